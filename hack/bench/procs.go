package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Procs tracks every process the bench starts, so that all of them are
// stopped on normal exit, on error and on Ctrl-C.
type Procs struct {
	mu    sync.Mutex
	procs map[*Proc]struct{}
}

var procs = &Procs{procs: map[*Proc]struct{}{}}

// Proc is one child process.
type Proc struct {
	Name    string
	Cmd     *exec.Cmd
	Started time.Time
	LogPath string
	done    chan struct{}
	err     error
}

// Start starts a child in its own process group, with its output in logPath.
func (ps *Procs) Start(name, logPath string, argv ...string) (*Proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Proc{Name: name, Cmd: cmd, LogPath: logPath, done: make(chan struct{})}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	ps.procs[p] = struct{}{}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Log returns the last bytes of the process's output.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(bytes.TrimSpace(b))
}

// Stop ends the process (TERM, then KILL after a grace period) and its group.
func (ps *Procs) Stop(p *Proc) {
	if p == nil {
		return
	}
	if !p.Exited() {
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	ps.mu.Lock()
	delete(ps.procs, p)
	ps.mu.Unlock()
}

// StopAll stops every process still running.
func (ps *Procs) StopAll() {
	ps.mu.Lock()
	all := make([]*Proc, 0, len(ps.procs))
	for p := range ps.procs {
		all = append(all, p)
	}
	ps.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Add(1)
		go func() { defer wg.Done(); ps.Stop(p) }()
	}
	wg.Wait()
}

// RSS returns VmRSS and VmHWM of pid in bytes.
func RSS(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v * 1024
		case "VmHWM:":
			hwm = v * 1024
		}
	}
	if rss == 0 {
		return 0, 0, errors.New("no VmRSS")
	}
	return rss, hwm, nil
}

// FreePort returns a port free for both UDP and TCP on 127.0.0.1.
func FreePort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err == nil {
			u.Close()
			return port, nil
		}
	}
	return 0, errors.New("no free port")
}

// reapLeftovers stops processes a previous, killed bench run left behind:
// only those running a binary from this bench's own bin folder.
func reapLeftovers(binDir string) {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil {
			continue
		}
		exe = strings.TrimSuffix(exe, " (deleted)")
		if strings.HasPrefix(exe, binDir+string(filepath.Separator)) && filepath.Base(exe) != "bench" {
			fmt.Fprintf(os.Stderr, "bench: stopping leftover %s (pid %d) from an earlier run\n", exe, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// linkOrCopy places src at dst (hard link if link, else copy), replacing dst.
func linkOrCopy(src, dst string, link bool) error {
	_ = os.Remove(dst)
	if link {
		if err := os.Link(src, dst); err == nil {
			return nil
		}
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst+".tmp", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(dst+".tmp", dst)
}

// waitCtx sleeps d unless ctx ends first.
func waitCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

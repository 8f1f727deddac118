package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// apiServerProc is a kube-apiserver this package restarted itself (the
// first one is envtest's).
type apiServerProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// StopAPIServer stops the cluster's kube-apiserver process (SIGTERM, then
// SIGKILL after 20 s) and leaves etcd running, as when a control-plane node
// goes down. StartAPIServer starts it again with the same flags, address,
// certificates and etcd, so clients reconnect with their configuration.
func (c *Cluster) StopAPIServer() error {
	if c.apiArgs != nil {
		return errors.New("the API server is stopped already")
	}
	if p := c.restarted; p != nil {
		c.apiArgs = p.cmd.Args
		c.restarted = nil
		return stopProc(p.cmd.Process.Pid, p.done)
	}
	pid, args, err := c.findAPIServer()
	if err != nil {
		return err
	}
	c.apiArgs = args
	done := make(chan struct{})
	go func() {
		// envtest reaps its own child; wait until the PID is gone.
		for {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
				close(done)
				return
			}
			if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && bytes.Contains(stat, []byte(") Z ")) {
				close(done)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return stopProc(pid, done)
}

func stopProc(pid int, done <-chan struct{}) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping kube-apiserver (pid %d): %w", pid, err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(pid, syscall.SIGKILL)
		<-done
		return nil
	}
}

// StartAPIServer starts the kube-apiserver StopAPIServer stopped and waits
// until it is ready (at most 60 s).
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	if c.apiArgs == nil {
		return errors.New("the API server is running")
	}
	cmd := exec.Command(c.apiArgs[0], c.apiArgs[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver: %w", err)
	}
	p := &apiServerProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	c.restarted, c.apiArgs = p, nil
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		body, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("kube-apiserver exited on restart:\n%s", out.String())
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready 60 s after restart: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// findAPIServer finds the process envtest started for this cluster: the
// kube-apiserver whose --cert-dir is this cluster's own (a fresh temporary
// folder, so no other process can match), and returns its PID and argv.
func (c *Cluster) findAPIServer() (int, []string, error) {
	api := c.env.ControlPlane.APIServer
	if api == nil || api.CertDir == "" {
		return 0, nil, errors.New("no API server recorded")
	}
	want := "--cert-dir=" + api.CertDir
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return 0, nil, err
	}
	for _, f := range procs {
		raw, err := os.ReadFile(f)
		if err != nil || len(raw) == 0 {
			continue
		}
		args := splitNUL(raw)
		if filepath.Base(args[0]) != "kube-apiserver" {
			continue
		}
		for _, a := range args[1:] {
			if a == want {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
				return pid, args, nil
			}
		}
	}
	return 0, nil, fmt.Errorf("no kube-apiserver with %s", want)
}

func splitNUL(raw []byte) []string {
	var out []string
	for _, p := range bytes.Split(bytes.TrimRight(raw, "\x00"), []byte{0}) {
		out = append(out, string(p))
	}
	return out
}

// CompactEtcd moves the cluster's etcd on by a few writes of its own (under
// a key no API server reads) and compacts its history up to the newest
// revision, as etcd's periodic compaction does. A client that watched from
// an older resource version can then only resume by reading the whole state
// again: its watch ends with 410 Gone. It returns the compacted revision.
func (c *Cluster) CompactEtcd(ctx context.Context) (int64, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{c.env.ControlPlane.Etcd.URL.String()},
		DialTimeout: 10 * time.Second,
		Context:     ctx,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return 0, fmt.Errorf("connecting to etcd: %w", err)
	}
	defer func() { _ = cli.Close() }()
	var rev int64
	for i := range 3 {
		resp, err := cli.Put(ctx, "/mcs-dns-test/compaction", strconv.Itoa(i))
		if err != nil {
			return 0, fmt.Errorf("writing to etcd: %w", err)
		}
		rev = resp.Header.Revision
	}
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("compacting etcd at revision %d: %w", rev, err)
	}
	return rev, nil
}

// FreezeAPIServer stops the cluster's kube-apiserver process (SIGSTOP)
// without ending it: connections stay open and requests get no answer,
// as from an API server too busy to answer. The returned function resumes
// it (SIGCONT); call it before the test ends.
func (c *Cluster) FreezeAPIServer() (resume func() error, err error) {
	pid, _, err := c.findAPIServer()
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return nil, err
	}
	return func() error { return syscall.Kill(pid, syscall.SIGCONT) }, nil
}

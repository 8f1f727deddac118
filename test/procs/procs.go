// Package procs runs mcs-dns's real binaries as child processes: it builds
// them once per test process, starts and stops processes (in tests by
// t.Cleanup, with their output printed when the test fails; in hack/bench
// by the caller, with their output in log files), finds free ports and
// waits for a DNS server to answer.
package procs

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
	"testing"
	"time"

	"github.com/miekg/dns"
)

// binDirName is where the binaries are built; hack/reap.sh matches this name.
const binDirName = "mcs-dns-test-bin"

// Binaries holds the paths of our built binaries.
type Binaries struct {
	CoreDNS  string
	Importer string
}

// Build compiles cmd/coredns and cmd/mcs-importer (each once per test
// process). Set MCS_DNS_BIN_DIR to use prebuilt binaries (e.g. bin/) instead.
func Build(t testing.TB) Binaries {
	t.Helper()
	return Binaries{CoreDNS: CoreDNSBinary(t), Importer: ImporterBinary(t)}
}

// CoreDNSBinary returns our CoreDNS binary, building it once per test process.
func CoreDNSBinary(t testing.TB) string { t.Helper(); return binary(t, "coredns", "./cmd/coredns") }

// ImporterBinary returns the mcs-importer binary, building it once per test process.
func ImporterBinary(t testing.TB) string {
	t.Helper()
	return binary(t, "mcs-importer", "./cmd/mcs-importer")
}

// KubectlMCSBinary returns the kubectl plugin kubectl-mcs, building it
// once per test process.
func KubectlMCSBinary(t testing.TB) string {
	t.Helper()
	return binary(t, "kubectl-mcs", "./cmd/kubectl-mcs")
}

type built struct {
	once sync.Once
	path string
	err  error
}

var (
	buildsMu sync.Mutex
	builds   = map[string]*built{}
)

func binary(t testing.TB, name, pkg string) string {
	t.Helper()
	if dir := os.Getenv("MCS_DNS_BIN_DIR"); dir != "" {
		return filepath.Join(dir, name)
	}
	buildsMu.Lock()
	b, ok := builds[name]
	if !ok {
		b = &built{}
		builds[name] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() { b.path, b.err = build(name, pkg) })
	if b.err != nil {
		t.Fatalf("building %s: %v", name, b.err)
	}
	return b.path
}

var (
	dirOnce sync.Once
	dirPath string
	dirErr  error
)

// sharedDir is the one folder all binaries of this test process go to, so
// that callers (the demo's -bin) can find them side by side.
func sharedDir() (string, error) {
	dirOnce.Do(func() {
		tmp, err := os.MkdirTemp("", "mcs-dns-")
		if err != nil {
			dirErr = err
			return
		}
		dirPath = filepath.Join(tmp, binDirName)
		dirErr = os.MkdirAll(dirPath, 0o755)
	})
	return dirPath, dirErr
}

func build(name, pkg string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	dir, err := sharedDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
	}
	return out, nil
}

func repoRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Process is a running child process, in a process group of its own.
type Process struct {
	Name    string
	Cmd     *exec.Cmd
	Started time.Time
	logPath string      // where its output goes, if to a file
	out     *syncBuffer // else, its output
	done    chan struct{}
	err     error
}

// Output returns what the process wrote to stdout and stderr so far.
func (p *Process) Output() string {
	if p.logPath != "" {
		b, _ := os.ReadFile(p.logPath)
		return string(b)
	}
	return p.out.String()
}

// LogPath is the file its output goes to ("": kept in memory).
func (p *Process) LogPath() string { return p.logPath }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits for the process to exit and returns its error.
func (p *Process) Wait() error { <-p.done; return p.err }

// stopGrace is how long Stop waits after SIGTERM.
const stopGrace = 10 * time.Second

// Stop sends SIGTERM to the process's group, waits up to 10 s, then kills
// the group.
func (p *Process) Stop() error {
	if p.Exited() {
		return p.err
	}
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("did not stop within %s of SIGTERM; killed", stopGrace)
	}
	return p.err
}

// Kill kills the process's group with SIGKILL (a crash, as far as the
// process can tell).
func (p *Process) Kill() {
	if !p.Exited() {
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Launch starts argv[0] with the rest of argv as its arguments, in a
// process group of its own (Stop ends whatever it starts too) and killed
// when this process dies, where the kernel allows it. Its output goes to
// the file logPath, or is kept in memory if logPath is "". The caller
// stops it.
func Launch(name, logPath string, argv ...string) (*Process, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("starting %s: no command", name)
	}
	p := &Process{Name: name, Cmd: exec.Command(argv[0], argv[1:]...), logPath: logPath, done: make(chan struct{})}
	var out io.Writer
	var file *os.File
	if logPath != "" {
		f, err := os.Create(logPath)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", name, err)
		}
		out, file = f, f
	} else {
		p.out = &syncBuffer{}
		out = p.out
	}
	p.Cmd.Stdout, p.Cmd.Stderr = out, out
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p.Started = time.Now()
	if err := p.Cmd.Start(); err != nil {
		if file != nil {
			file.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		if file != nil {
			file.Close()
		}
		close(p.done)
	}()
	return p, nil
}

// Start runs bin with args; the process is stopped by t.Cleanup and its
// output is logged if the test failed.
func Start(t testing.TB, name, bin string, args ...string) *Process {
	t.Helper()
	return StartLogged(t, name, "", bin, args...)
}

// StartLogged is Start with the output written to the file logPath (kept
// after the test; "": kept in memory).
func StartLogged(t testing.TB, name, logPath, bin string, args ...string) *Process {
	t.Helper()
	p, err := Launch(name, logPath, append([]string{bin}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop()
		if t.Failed() {
			t.Logf("--- output of %s ---\n%s", name, p.Output())
		}
	})
	return p
}

// FreePort returns a TCP port on 127.0.0.1 that is free for both TCP and
// UDP right now.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := FindFreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// FindFreePort is FreePort for callers without a testing.TB.
func FindFreePort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
		l.Close()
		if err == nil {
			u.Close()
			return port, nil
		}
	}
	return 0, errors.New("no free port")
}

// CoreDNS is a running CoreDNS process serving DNS on Addr (127.0.0.1:port).
type CoreDNS struct {
	*Process
	Addr string
}

// StartCoreDNS writes corefile to a temporary file and runs our CoreDNS
// with it, its default DNS port set to a free one; server blocks without
// an explicit port listen there. It waits until the server answers.
func StartCoreDNS(t testing.TB, bin, corefile string) *CoreDNS {
	t.Helper()
	port := FreePort(t)
	path := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(path, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	p := Start(t, "coredns", bin, "-conf", path, "-dns.port", strconv.Itoa(port))
	c := &CoreDNS{Process: p, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	if err := WaitAnswering(context.Background(), p, c.Addr, 50*time.Millisecond, 60*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, p.Output())
	}
	return c
}

// WaitAnswering asks the DNS server at addr, run by p, every poll until
// it answers at all (even REFUSED: it listens), and fails if p exits, ctx
// ends or no answer came within timeout.
func WaitAnswering(ctx context.Context, p *Process, addr string, poll, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if p.Exited() {
			return fmt.Errorf("%s exited: %v", p.Name, p.err)
		}
		if _, err := Query(addr, "udp", "dns-version.clusterset.local.", dns.TypeTXT); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer within %s", p.Name, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// Query sends one query over net ("udp" or "tcp") and returns the reply.
func Query(addr, network, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(4096, false)
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	r, _, err := c.ExchangeContext(ctx, m, addr)
	return r, err
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// AnswerEventually queries name over UDP and over TCP until check accepts
// both replies, for at most timeout, and fails t with the last reason
// otherwise. addr gives each network's server address (Addr when both are
// one).
func AnswerEventually(t testing.TB, timeout time.Duration, addr func(network string) string, name string, qtype uint16, check func(*dns.Msg) error) {
	t.Helper()
	var last error
	for deadline := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		last = nil
		for _, network := range []string{"udp", "tcp"} {
			r, err := Query(addr(network), network, name, qtype)
			if err == nil {
				err = check(r)
			}
			if err != nil {
				last = fmt.Errorf("%s %s over %s: %w", name, dns.TypeToString[qtype], network, err)
				break
			}
		}
		if last == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(last)
		}
	}
}

// Addr is AnswerEventually's addr for one server answering both networks.
func Addr(a string) func(string) string { return func(string) string { return a } }

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

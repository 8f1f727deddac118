// Package stack starts the whole system the way test/e2e, hack/demo,
// hack/conformance and hack/bench run it: N member clusters (a real
// kube-apiserver and etcd each, see test/cluster), mcs-importer over all
// of them, and one of our CoreDNS per member, as processes (see
// test/procs) with their logs, in one Group that stops them all.
//
// StartT is for tests: the clusters and processes stop in t.Cleanup and a
// process's output is printed when the test fails. Start is for programs:
// the caller calls Stop.
package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

// Config describes a stack.
type Config struct {
	// Members are the member clusters, started in parallel.
	Members []cluster.Spec
	// Kubeconfig is where the kubeconfig (one context per member, named
	// after it) is written: by default Dir/kubeconfig, or with StartT and
	// no Dir a file in t.TempDir().
	Kubeconfig string
	// Dir holds the Corefiles (and the kubeconfig by default). With
	// StartT it may be empty: a t.TempDir() then.
	Dir string
	// LogDir holds the processes' logs, <name>.log; empty: Dir, or with
	// StartT and no Dir either, the output is kept in memory (and printed
	// if the test fails).
	LogDir string
	// Bin is the built binaries: with StartT, procs.Build(t) if empty.
	Bin procs.Binaries
	// Group is where the processes go; empty: a new one.
	Group *Group
}

// Stack is a running set of member clusters and the processes started
// for them.
type Stack struct {
	Set *cluster.Set
	// Names are the members' names (their kubeconfig contexts), in order.
	Names      []string
	Kubeconfig string
	Dir        string
	// LogDir holds the logs; "": output kept in memory (StartT only).
	LogDir string
	Bin    procs.Binaries
	Group  *Group

	ctx context.Context
	t   testing.TB
}

// Start starts the member clusters and writes the kubeconfig. The caller
// calls Stop, also on error when the returned stack is not nil (the
// clusters that did start).
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	s := newStack(ctx, cfg)
	if s.Kubeconfig == "" {
		if s.Dir == "" {
			return nil, errors.New("stack: neither Kubeconfig nor Dir set")
		}
		s.Kubeconfig = filepath.Join(s.Dir, "kubeconfig")
	}
	set, err := cluster.StartClusters(cfg.Members...)
	if set == nil {
		return nil, err
	}
	s.Set = set
	if err != nil {
		return s, err
	}
	if err := set.WriteKubeconfig(s.Kubeconfig); err != nil {
		return s, err
	}
	return s, nil
}

// StartT is Start for a test: everything stops in t.Cleanup, and with
// -short the test is skipped (see cluster.Start).
func StartT(t testing.TB, cfg Config) *Stack {
	t.Helper()
	if cfg.Bin == (procs.Binaries{}) {
		cfg.Bin = procs.Build(t)
	}
	inMemory := cfg.Dir == "" && cfg.LogDir == ""
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s := newStack(t.Context(), cfg)
	s.t = t
	if inMemory {
		s.LogDir = ""
	}
	s.Set = cluster.Start(t, cfg.Members...)
	if s.Kubeconfig == "" {
		s.Kubeconfig = s.Set.Kubeconfig
	} else if err := s.Set.WriteKubeconfig(s.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	return s
}

func newStack(ctx context.Context, cfg Config) *Stack {
	s := &Stack{Kubeconfig: cfg.Kubeconfig, Dir: cfg.Dir, LogDir: cfg.LogDir, Bin: cfg.Bin, Group: cfg.Group, ctx: ctx}
	if s.LogDir == "" {
		s.LogDir = s.Dir
	}
	if s.Group == nil {
		s.Group = NewGroup()
	}
	for _, m := range cfg.Members {
		s.Names = append(s.Names, m.Name)
	}
	return s
}

// LogPath is where the process name's output goes: LogDir/name.log, or
// "" when it is kept in memory.
func (s *Stack) LogPath(name string) string {
	if s.LogDir == "" {
		return ""
	}
	return filepath.Join(s.LogDir, name+".log")
}

// Launch starts argv as process name in the stack's group, its output in
// LogPath(name). With StartT it stops in t.Cleanup, and its output is
// printed if the test failed.
func (s *Stack) Launch(name string, argv ...string) (*procs.Process, error) {
	p, err := s.Group.Launch(name, s.LogPath(name), argv...)
	if err != nil {
		return nil, err
	}
	if t := s.t; t != nil {
		t.Cleanup(func() {
			_ = s.Group.Stop(p)
			if t.Failed() {
				t.Logf("--- output of %s ---\n%s", name, p.Output())
			}
		})
	}
	return p, nil
}

// StopProcesses stops every process of the stack's group.
func (s *Stack) StopProcesses() { s.Group.StopAll() }

// Stop stops every process, then the clusters.
func (s *Stack) Stop() {
	s.StopProcesses()
	if s.Set != nil {
		s.Set.Stop()
	}
}

// ImporterArgs are mcs-importer's arguments for a stack.
type ImporterArgs struct {
	Kubeconfig string
	// Contexts are the members, by kubeconfig context.
	Contexts []string
	// MetricsAddr is --metrics-addr; always passed, so "" turns the
	// metrics server off.
	MetricsAddr string
	// Extra are more flags, after those.
	Extra []string
}

// Argv returns the arguments (without the binary).
func (a ImporterArgs) Argv() []string {
	args := []string{"--kubeconfig", a.Kubeconfig, "--contexts", strings.Join(a.Contexts, ","), "--metrics-addr", a.MetricsAddr}
	return append(args, a.Extra...)
}

// ImporterArgs returns the importer's arguments for every member of the
// stack, with metrics on metricsAddr and the extra flags.
func (s *Stack) ImporterArgs(metricsAddr string, extra ...string) ImporterArgs {
	return ImporterArgs{Kubeconfig: s.Kubeconfig, Contexts: s.Names, MetricsAddr: metricsAddr, Extra: extra}
}

// FreeAddr returns 127.0.0.1:<a port free for TCP and UDP right now>.
func FreeAddr() (string, error) {
	port, err := procs.FindFreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// StartImporter runs Bin.Importer with args as the process mcs-importer
// (log LogPath("mcs-importer")).
func (s *Stack) StartImporter(args ImporterArgs) (*procs.Process, error) {
	return s.StartImporterAs("mcs-importer", args)
}

// StartImporterAs is StartImporter with another process (and log) name.
func (s *Stack) StartImporterAs(name string, args ImporterArgs) (*procs.Process, error) {
	return s.Launch(name, append([]string{s.Bin.Importer}, args.Argv()...)...)
}

// CoreDNS is one member's running CoreDNS.
type CoreDNS struct {
	*procs.Process
	Member string
	Port   int
	// Addr is 127.0.0.1:Port.
	Addr string
	// Corefile is its Corefile's path.
	Corefile string
}

// CoreDNSOptions say how to run a member's CoreDNS.
type CoreDNSOptions struct {
	// Port is its DNS port; 0: a free one.
	Port int
	// Corefile returns the Corefile (default MCSCorefile).
	Corefile func(kubeconfig, member string, port int) string
	// PortFlag passes -dns.port Port, the port of server blocks that name
	// none.
	PortFlag bool
	// CorefilePath is where the Corefile is written (default
	// Dir/Corefile.<member>).
	CorefilePath string
	// Ready, if set, waits until the server is ready (see Answering).
	Ready func(ctx context.Context, c *CoreDNS) error
}

// MCSCorefile serves clusterset.local and reverse lookups from the
// member's imports, on the default port (see CoreDNSOptions.PortFlag).
func MCSCorefile(kubeconfig, member string, _ int) string {
	return fmt.Sprintf(`clusterset.local in-addr.arpa ip6.arpa {
    mcs clusterset.local in-addr.arpa ip6.arpa {
        kubeconfig %s %s
    }
}
`, kubeconfig, member)
}

// Answering is a CoreDNSOptions.Ready: the server answers at all within
// timeout, asked every poll (see procs.WaitAnswering).
func Answering(poll, timeout time.Duration) func(context.Context, *CoreDNS) error {
	return func(ctx context.Context, c *CoreDNS) error {
		return procs.WaitAnswering(ctx, c.Process, c.Addr, poll, timeout)
	}
}

// StartCoreDNS runs Bin.CoreDNS for member as the process
// coredns-<member> (log LogPath("coredns-<member>")).
func (s *Stack) StartCoreDNS(member string, o CoreDNSOptions) (*CoreDNS, error) {
	if o.Port == 0 {
		port, err := procs.FindFreePort()
		if err != nil {
			return nil, err
		}
		o.Port = port
	}
	if o.Corefile == nil {
		o.Corefile = MCSCorefile
	}
	if o.CorefilePath == "" {
		o.CorefilePath = filepath.Join(s.Dir, "Corefile."+member)
	}
	if err := os.WriteFile(o.CorefilePath, []byte(o.Corefile(s.Kubeconfig, member, o.Port)), 0o644); err != nil {
		return nil, err
	}
	argv := []string{s.Bin.CoreDNS, "-conf", o.CorefilePath}
	if o.PortFlag {
		argv = append(argv, "-dns.port", strconv.Itoa(o.Port))
	}
	p, err := s.Launch("coredns-"+member, argv...)
	if err != nil {
		return nil, err
	}
	c := &CoreDNS{Process: p, Member: member, Port: o.Port, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(o.Port)), Corefile: o.CorefilePath}
	if o.Ready != nil {
		if err := o.Ready(s.ctx, c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// Command bench is `make bench`: it starts one real API server, loads the
// scale fixture, serves the same data with three configurations of our
// CoreDNS build — (a) mcs, (b) the in-tree kubernetes plugin's multicluster
// option (the peer), (c) whoami (the ceiling) — and drives each with
// dnsperf over loopback, alternating a, b, c within every round. It also
// compares a with the answer-shaping options on (a+) and off, and big
// headless answers on a; measures RSS and start-up at 1x and 10x, DNS programming latency,
// mcs-importer (when built), and runs the plugin's go test benchmarks. It
// prints a table at the end and writes it, with the raw results as JSON,
// under the output folder. Targets are shown next to the numbers; nothing
// is asserted.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// Options are the flags; every size is one.
type Options struct {
	// Doc, when set, is a Markdown file whose "## Latest results"
	// section (to the end of the file) is replaced by this run's table.
	Doc            string
	Sizes          Sizes
	Scale          int
	Rounds         int
	Duration       time.Duration
	MixLines       int
	Updates        int
	Out            string
	CoreDNS        string
	Importer       string
	DNSPerfArgs    string
	StartupTimeout time.Duration
	Settle         time.Duration
	GoBench        string
	Exports        int
	Steady         time.Duration
	Profile        bool
	Workers        int
	Only           string
	Skip           string
	ImporterServer string
	ExportType     string
	StartupProfile time.Duration
	Starts         int
	ImporterArgs   string
	ImporterEnv    string
	ImporterFloor  bool
	// MemberScale lists the clusterset sizes of the member-scale phase.
	MemberScale        string
	MemberScaleTimeout time.Duration
	MemberChurnRate    float64
	MemberChurnWrites  float64
	MemberChurn        time.Duration
	MemberIdle         time.Duration
	MemberSlowDelay    time.Duration
	// MoreScales are further factors of start-up and RSS runs after the
	// large one ("100"); none by default.
	MoreScales string
}

func (o Options) phase(name string) bool {
	in := func(list string) bool {
		return slices.Contains(strings.Split(list, ","), name)
	}
	if o.Only != "" {
		return in(o.Only)
	}
	return !in(o.Skip)
}

// Phases, in the order they run.
const (
	PhasePerf     = "perf"
	PhaseProgLat  = "proglat"
	PhaseShaping  = "shaping"
	PhaseStartup  = "startup"
	Phase10x      = "10x"
	PhaseSizes    = "sizes"
	PhaseRelist   = "relist"
	PhaseImporter = "importer"
	PhaseMembers  = "members"
	PhaseGoBench  = "gobench"
)

func main() {
	var o Options
	flag.IntVar(&o.Sizes.Imports, "imports", 2000, "ClusterSetIP ServiceImports")
	flag.IntVar(&o.Sizes.Headless, "headless", 200, "headless ServiceImports")
	flag.IntVar(&o.Sizes.Endpoints, "endpoints", 25, "ready endpoints per headless import per source cluster")
	flag.IntVar(&o.Sizes.Clusters, "clusters", 2, "source clusters of every headless import (cluster IDs east, west, north, ...)")
	flag.IntVar(&o.Sizes.Namespaces, "namespaces", 10, "namespaces the imports spread over")
	flag.IntVar(&o.Sizes.SliceMax, "slice-size", 100, "endpoints per EndpointSlice at most")
	flag.IntVar(&o.Scale, "scale", 10, "factor of the large run (memory and start-up); <= 1 skips it")
	flag.StringVar(&o.MoreScales, "sizes", "", "comma-separated further factors of start-up and RSS runs after the large one, e.g. 100 (each loads the fixture up to its size; none by default)")
	flag.IntVar(&o.Rounds, "rounds", 5, "rounds of a, b, c per query kind (medians are reported)")
	flag.DurationVar(&o.Duration, "duration", 3*time.Second, "dnsperf run length (whole seconds)")
	flag.IntVar(&o.MixLines, "mix-lines", 20000, "lines of the mixed query file")
	flag.IntVar(&o.Updates, "updates", 100, "EndpointSlice updates for the programming latency")
	flag.StringVar(&o.Out, "out", ".bench", "output folder (results, logs, profiles)")
	flag.StringVar(&o.Doc, "doc", "", "a Markdown file (BENCHMARKS.md) whose \"## Latest results\" section, to the end of the file, this run's table replaces")
	flag.StringVar(&o.CoreDNS, "coredns", "bin/coredns", "our CoreDNS binary")
	flag.StringVar(&o.Importer, "importer", "bin/mcs-importer", "the mcs-importer binary (the importer part is skipped if missing)")
	flag.StringVar(&o.DNSPerfArgs, "dnsperf-args", "-c 2 -q 200", "extra dnsperf arguments")
	flag.IntVar(&o.Starts, "starts", 3, "starts of each server per size for RSS and start-up (medians)")
	flag.DurationVar(&o.StartupTimeout, "startup-timeout", 3*time.Minute, "how long a server may take to answer every sample name")
	flag.DurationVar(&o.Settle, "settle", 2*time.Second, "wait after sync before reading RSS")
	flag.StringVar(&o.GoBench, "go-bench", "./plugin/...", "packages for go test -bench (empty: skip)")
	flag.IntVar(&o.Exports, "exports", 1000, "importer: new ServiceExports in one cluster")
	flag.DurationVar(&o.Steady, "steady", 20*time.Second, "importer: steady-state window for counting writes")
	flag.BoolVar(&o.Profile, "profile", true, "take CPU and heap profiles of a and b under the mix, heap profiles after sync, and a CPU profile of the large start-up")
	flag.DurationVar(&o.StartupProfile, "startup-profile", 8*time.Second, "length of the start-up CPU profile at the large size")
	flag.IntVar(&o.Workers, "workers", 48, "parallel creates when loading fixtures")
	flag.StringVar(&o.Only, "only", "", "comma-separated phases to run: perf,proglat,shaping,startup,10x,relist,sizes,importer,members,gobench")
	flag.StringVar(&o.MemberScale, "member-scale", "3,10,20", "members: comma-separated clusterset sizes (each member its own API server, all on this machine)")
	flag.DurationVar(&o.MemberScaleTimeout, "member-scale-timeout", 15*time.Minute, "members: how long cold convergence may take at one size")
	flag.Float64Var(&o.MemberChurnRate, "member-churn-rate", 5, "members: endpoint changes per second during the churn")
	flag.Float64Var(&o.MemberChurnWrites, "member-churn-writes", 100, "members: the most mirrored-slice writes a second the churn asks of the clusterset (a change is one write per member): at more members the churn rate is lowered to this over the members (0: no bound)")
	flag.DurationVar(&o.MemberChurn, "member-churn", time.Minute, "members: length of the churn")
	flag.DurationVar(&o.MemberIdle, "member-idle", 2*time.Minute, "members: window for the importer's idle CPU (the access check and the runtime's forced collection run every 2 minutes: a shorter window holds them or not)")
	flag.DurationVar(&o.MemberSlowDelay, "member-slow-delay", 100*time.Millisecond, "members: the churn again with the last member behind a proxy delaying each way by this much (0: skip)")
	flag.StringVar(&o.Skip, "skip", "", "comma-separated phases to skip")
	flag.StringVar(&o.ExportType, "export-type", "headless", "importer: type of the exported Services, headless (answered: A = the endpoint's IP) or clustersetip (answered: NOERROR, since the importer may assign no VIP)")
	flag.StringVar(&o.ImporterArgs, "importer-args", "", "importer: extra mcs-importer flags (default: its defaults)")
	flag.StringVar(&o.ImporterEnv, "importer-env", "", "importer and members: space-separated KEY=VALUE pairs set in mcs-importer's environment only (e.g. GOMEMLIMIT=460MiB, as the importer sets itself in a container with a 512Mi limit)")
	flag.BoolVar(&o.ImporterFloor, "importer-floor", true, "importer: also measure the floor (the importer's answer writes issued straight from the bench, importer stopped)")
	flag.StringVar(&o.ImporterServer, "importer-server", "a", "importer: which server (a or b) answers for the importing clusters")
	flag.Parse()

	os.Exit(run(o))
}

func run(o Options) int {
	ctrllog.SetLogger(logr.Discard()) // envtest logs through controller-runtime
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	var sets []*cluster.Set
	cleanup := func() {
		children.StopAll()
		for _, s := range sets {
			s.Stop()
		}
	}
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "\nbench: %v: stopping every process it started\n", sig)
		cancel(fmt.Errorf("interrupted by %v", sig))
		// A second signal, or a phase that does not return, must not
		// leave processes behind.
		select {
		case <-sigs:
		case <-time.After(20 * time.Second):
		}
		cleanup()
		os.Exit(130)
	}()
	defer cleanup()

	b, err := prepare(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	res := b.Results
	logf("results go to %s", o.Out)

	s1 := o.Sizes
	// Phase 1: one API server with the 1x fixture.
	t0 := time.Now()
	set, err := cluster.StartClusters(cluster.Spec{Name: "bench"})
	if set != nil {
		sets = append(sets, set)
	}
	if err != nil {
		return b.fail(fmt.Errorf("starting the API server: %w", err))
	}
	b.Kubeconfig = filepath.Join(o.Out, "run", "kubeconfig")
	b.Context = "bench"
	if err := set.WriteKubeconfig(b.Kubeconfig); err != nil {
		return b.fail(err)
	}
	logf("API server up in %s", time.Since(t0).Round(time.Millisecond))
	loader, err := NewLoader(set.Clusters[0].Config, o.Workers)
	if err != nil {
		return b.fail(err)
	}
	t0 = time.Now()
	n, err := loader.Load(ctx, Sizes{}, s1)
	if err != nil {
		return b.fail(fmt.Errorf("loading the 1x fixture: %w", err))
	}
	res.Fixture = append(res.Fixture, FixtureLoad{Scale: 1, Sizes: s1, Objects: n, Endpoints: s1.TotalEndpoints(), Slices: s1.TotalSlices(), Seconds: time.Since(t0).Seconds()})
	logf("1x fixture: %d objects (%d endpoints in %d slices) in %s", n, s1.TotalEndpoints(), s1.TotalSlices(), time.Since(t0).Round(time.Millisecond))

	if o.phase(PhasePerf) || o.phase(PhaseProgLat) {
		if err := b.servePhase(ctx, loader, s1); err != nil {
			b.note("serving phase: %v", err)
		}
	}
	if ctx.Err() != nil {
		return b.fail(context.Cause(ctx))
	}
	if o.phase(PhaseShaping) {
		if err := b.shapingPhase(ctx, loader, s1); err != nil {
			b.note("shaping phase: %v", err)
		}
	}
	if ctx.Err() != nil {
		return b.fail(context.Cause(ctx))
	}
	if o.phase(PhaseStartup) {
		b.startupPhase(ctx, "1x", s1)
	}
	var scales []int
	if o.Scale > 1 && (o.phase(Phase10x) || o.phase(PhaseRelist)) {
		scales = append(scales, o.Scale)
	}
	if o.MoreScales != "" && o.phase(PhaseSizes) {
		for _, f := range strings.Split(o.MoreScales, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || v <= 1 {
				b.note("-sizes: %q is not a factor above 1", f)
				continue
			}
			scales = append(scales, v)
		}
	}
	slices.Sort(scales)
	scales = slices.Compact(scales)
	loaded := s1
	for _, f := range scales {
		if ctx.Err() != nil {
			break
		}
		sf := s1.Scaled(f)
		t0 = time.Now()
		n, err := loader.Load(ctx, loaded, sf)
		if err != nil {
			b.note("loading the %dx fixture: %v", f, err)
			break
		}
		loaded = sf
		res.Fixture = append(res.Fixture, FixtureLoad{Scale: f, Sizes: sf, Objects: n, Endpoints: sf.TotalEndpoints(), Slices: sf.TotalSlices(), Seconds: time.Since(t0).Seconds()})
		logf("%dx fixture: %d more objects (%d endpoints in %d slices in all) in %s", f, n, sf.TotalEndpoints(), sf.TotalSlices(), time.Since(t0).Round(time.Millisecond))
		if f != o.Scale || o.phase(Phase10x) {
			b.startupPhase(ctx, fmt.Sprintf("%dx", f), sf)
		}
		if f == o.Scale && o.phase(PhaseRelist) {
			b.relistPhase(ctx, set.Clusters[0], fmt.Sprintf("%dx", f), sf)
		}
	}
	set.Stop()
	sets = nil
	if ctx.Err() != nil {
		return b.fail(context.Cause(ctx))
	}
	if o.phase(PhaseImporter) {
		if err := b.importerPhase(ctx, func(s *cluster.Set) { sets = append(sets, s) }); err != nil {
			b.note("importer: %v", err)
			if res.Importer == nil {
				res.Importer = &ImporterResult{}
			}
			if res.Importer.NotDone == "" {
				res.Importer.NotDone = err.Error()
			}
		}
		for _, s := range sets {
			s.Stop()
		}
		sets = nil
	}
	if ctx.Err() != nil {
		return b.fail(context.Cause(ctx))
	}
	if o.phase(PhaseMembers) && b.Importer != "" {
		b.memberScalePhase(ctx, func(s *cluster.Set) { sets = append(sets, s) })
		for _, s := range sets {
			s.Stop()
		}
		sets = nil
	}
	if ctx.Err() != nil {
		return b.fail(context.Cause(ctx))
	}
	if o.GoBench != "" && o.phase(PhaseGoBench) {
		b.goBenchPhase(ctx)
	}
	return b.finish()
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (b *Bench) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	logf("NOTE: %s", msg)
	b.Results.Notes = append(b.Results.Notes, msg)
}

func (b *Bench) fail(err error) int {
	b.note("aborted: %v", err)
	b.finish()
	return 1
}

// prepare makes the output folders and copies the binaries under the
// output folder, so that a killed run's leftovers are found by their
// executable's path (reapLeftovers) and nothing else is.
func prepare(o Options) (*Bench, error) {
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return nil, err
	}
	o.Out = out
	for _, d := range []string{"run", "logs", "profiles", "bin/k8s"} {
		if err := os.MkdirAll(filepath.Join(out, d), 0o755); err != nil {
			return nil, err
		}
	}
	binDir := filepath.Join(out, "bin")
	reapLeftovers(binDir)
	b := &Bench{Opt: o, Out: out, Results: newResults(o), goodKinds: map[string]map[Kind]bool{}}
	b.CoreDNS = filepath.Join(binDir, "coredns")
	if err := linkOrCopy(o.CoreDNS, b.CoreDNS, false); err != nil {
		return nil, fmt.Errorf("our CoreDNS (%s): %w (run `make build`)", o.CoreDNS, err)
	}
	if v, err := exec.Command(b.CoreDNS, "-version").CombinedOutput(); err == nil {
		b.Results.Machine.CoreDNS = strings.TrimSpace(strings.SplitN(string(v), "\n", 2)[0])
	}
	if _, err := os.Stat(o.Importer); err == nil {
		b.Importer = filepath.Join(binDir, "mcs-importer")
		if err := linkOrCopy(o.Importer, b.Importer, false); err != nil {
			return nil, err
		}
	}
	assets, err := cluster.AssetsDir()
	if err != nil {
		return nil, err
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if err := linkOrCopy(filepath.Join(assets, bin), filepath.Join(binDir, "k8s", bin), true); err != nil {
			return nil, err
		}
	}
	os.Setenv("MCS_DNS_K8S_ASSETS", filepath.Join(binDir, "k8s"))
	if _, err := exec.LookPath("dnsperf"); err != nil {
		return nil, fmt.Errorf("dnsperf not found: run `make tools`")
	}
	return b, nil
}

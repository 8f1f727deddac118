package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
	"github.com/mcs-dns/mcs-dns/test/stack"
)

// ImporterResult is the importer part of the bench.
type ImporterResult struct {
	NotDone    string   `json:"not_done,omitempty"`
	Server     string   `json:"server"`
	ExportType string   `json:"export_type"`
	Args       string   `json:"args"`
	Exporter   string   `json:"exporter"`
	Importers  []string `json:"importers"`
	Exports    int      `json:"exports"`
	P50Ms      float64  `json:"p50_ms"`
	P99Ms      float64  `json:"p99_ms"`
	MaxMs      float64  `json:"max_ms"`
	AllSeconds float64  `json:"all_answered_seconds"`
	// QuietSeconds: from the first create to the importer's last write of
	// the burst (statuses included), as its own metrics show.
	QuietSeconds       float64          `json:"quiet_seconds"`
	BurstWrites        int64            `json:"burst_writes"`
	Unanswered         int              `json:"unanswered"`
	SteadySeconds      float64          `json:"steady_seconds"`
	SteadyWrites       int64            `json:"steady_writes"`
	SteadyWritesPerSec float64          `json:"steady_writes_per_sec"`
	WritesCounted      string           `json:"writes_counted"`
	WriteBreakdown     map[string]int64 `json:"write_breakdown,omitempty"`
	RSS                int64            `json:"rss_bytes"`
	HWM                int64            `json:"hwm_bytes"`
	Detail             string           `json:"detail,omitempty"`
	Floor              *FloorResult     `json:"floor,omitempty"`
}

// FloorResult: the same burst with the importer's answer writes issued
// straight from the bench (see importerFloor).
type FloorResult struct {
	NotDone    string  `json:"not_done,omitempty"`
	Workers    int     `json:"workers"`
	Writes     int64   `json:"writes"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	AllSeconds float64 `json:"all_answered_seconds"`
	Unanswered int     `json:"unanswered"`
}

const impNS = "bench-imports"

// importerPhase: three member clusters, mcs-importer over all three, our
// CoreDNS (mcs) for two of them; 1,000 new exports in the first; the time
// from each export's acknowledgement to its name being answered by both
// other clusters' CoreDNS; then the writes every API server receives at
// steady state, and the importer's RSS.
func (b *Bench) importerPhase(ctx context.Context, register func(*cluster.Set)) error {
	res := &ImporterResult{}
	b.Results.Importer = res
	if b.Importer == "" {
		res.NotDone = fmt.Sprintf("%s is not built (cmd/mcs-importer has not landed)", b.Opt.Importer)
		logf("importer: %s", res.NotDone)
		return nil
	}
	sid := b.Opt.ImporterServer
	if _, gone := b.Results.Unavailable[sid]; gone {
		res.NotDone = fmt.Sprintf("server %s (%s) is not available, so no CoreDNS can answer the imports", sid, serverLabels[sid])
		return nil
	}
	res.Server = sid
	names := []string{"east", "west", "north"}
	res.Exporter, res.Importers = names[0], names[1:]
	t0 := time.Now()
	var specs []cluster.Spec
	for _, n := range names {
		specs = append(specs, cluster.Spec{Name: n, ClusterID: n})
	}
	st, err := stack.Start(ctx, stack.Config{Members: specs, Kubeconfig: filepath.Join(b.Out, "run", "kubeconfig.importer"),
		Dir: filepath.Join(b.Out, "run"), LogDir: filepath.Join(b.Out, "logs"),
		Bin: procs.Binaries{CoreDNS: b.CoreDNS, Importer: b.Importer}, Group: children})
	if st != nil {
		register(st.Set)
	}
	if err != nil {
		return fmt.Errorf("starting member clusters: %w", err)
	}
	set, kc := st.Set, st.Kubeconfig
	logf("importer: %d member clusters up in %s", len(names), time.Since(t0).Round(time.Millisecond))
	metricsPort, err := procs.FindFreePort()
	if err != nil {
		return err
	}
	// The bench writes the source slices itself, as this manager.
	args := st.ImporterArgs(fmt.Sprintf("127.0.0.1:%d", metricsPort), append([]string{"--endpointslice-managers", "bench.mcs-dns.io"}, strings.Fields(b.Opt.ImporterArgs)...)...)
	res.Args = strings.Join(args.Argv(), " ")
	imp, err := b.startImporter(st, "mcs-importer", args)
	if err != nil {
		return err
	}
	defer children.Stop(imp)
	servers := map[string]*Server{}
	for _, n := range res.Importers {
		srv, err := b.startServerFor(sid, "importer-"+n, kc, n)
		if err != nil {
			return err
		}
		defer b.StopServer(srv)
		servers[n] = srv
	}
	for n, srv := range servers {
		if err := procs.WaitAnswering(ctx, srv.Proc, srv.Addr(), 20*time.Millisecond, 30*time.Second); err != nil {
			return fmt.Errorf("CoreDNS for %s: %w: %s", n, err, lastLines(srv.Proc.Output(), 3))
		}
	}
	if imp.Exited() {
		return fmt.Errorf("mcs-importer exited: %s", lastLines(imp.Output(), 3))
	}

	exp := set.Get(names[0])
	loader, err := NewLoader(exp.Config, b.Opt.Workers)
	if err != nil {
		return err
	}
	for _, c := range set.Clusters {
		_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: impNS}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	n := b.Opt.Exports
	headless := b.Opt.ExportType != "clustersetip"
	// The Services and their endpoints exist first (not timed): exporting is the event.
	if _, _, err := createExportedServices(ctx, loader, impNS, n, headless, b.Opt.Workers); err != nil {
		return err
	}
	logf("importer: %d Services with endpoints in %s; exporting them", n, names[0])
	run, err := exportToAnswer(ctx, set, loader, impNS, n, res.Importers, servers, headless, nil)
	if err != nil {
		return err
	}
	start := run.start
	res.Exports = n
	res.Unanswered = run.unanswered
	res.P50Ms, res.P99Ms, res.MaxMs = ms(percentileDur(run.lat, 0.5)), ms(percentileDur(run.lat, 0.99)), ms(percentileDur(run.lat, 1))
	res.AllSeconds = run.all.Seconds()
	res.Detail = "Exported Services: " + b.Opt.ExportType + ", one ready endpoint each. Latency per export: from its create being acknowledged to both other clusters' CoreDNS answering its A query "
	if headless {
		res.Detail += "with the endpoint's address"
	} else {
		res.Detail += "with NOERROR (the name exists; the importer may assign no VIP)"
	}
	res.Detail += "; a name is asked over DNS, in a tight loop, from the moment a watch sees its ServiceImport in that cluster (so the bench does not load the shared cores with queries for names not yet imported); resolution: a few ms."
	res.ExportType = b.Opt.ExportType
	logf("importer: export-to-answer p50 %.0f ms p99 %.0f ms max %.0f ms; all answered after %.2f s; %d unanswered", res.P50Ms, res.P99Ms, res.MaxMs, res.AllSeconds, res.Unanswered)
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// Steady state: wait for the importer to finish the burst (its queue
	// empty, its write counter still for 3 s; statuses are written after
	// the answers), let it settle, then count the writes each API server
	// receives over a window.
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	lastWrite, burst, err := waitImporterQuiet(ctx, metricsURL, 3*time.Second, 3*time.Minute)
	if err != nil {
		logf("importer: %v", err)
	}
	if !lastWrite.IsZero() {
		res.QuietSeconds, res.BurstWrites = lastWrite.Sub(start).Seconds(), burst
		logf("importer: %d writes in the burst, the last %.2f s after the first create", burst, res.QuietSeconds)
	}
	_ = waitCtx(ctx, 5*time.Second)
	before, err := writeCounts(ctx, set)
	if err != nil {
		return fmt.Errorf("reading API server metrics: %w", err)
	}
	t1 := time.Now()
	if err := waitCtx(ctx, b.Opt.Steady); err != nil {
		return err
	}
	after, err := writeCounts(ctx, set)
	if err != nil {
		return fmt.Errorf("reading API server metrics: %w", err)
	}
	res.SteadySeconds = time.Since(t1).Seconds()
	res.WriteBreakdown = map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			res.WriteBreakdown[k] = d
			if !strings.Contains(k, "/leases") && !strings.Contains(k, "/selfsubjectaccessreviews") {
				res.SteadyWrites += d
			}
		}
	}
	res.SteadyWritesPerSec = float64(res.SteadyWrites) / res.SteadySeconds
	res.WritesCounted = "apiserver_request_total POST/PUT/PATCH/DELETE on all 3 API servers, leases and SelfSubjectAccessReviews (the access probe's questions, which store nothing) excluded"
	if rss, hwm, err := procs.RSS(imp.Cmd.Process.Pid); err == nil {
		res.RSS, res.HWM = rss, hwm
	}
	var bd []string
	for k, v := range res.WriteBreakdown {
		bd = append(bd, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(bd)
	if len(bd) > 0 {
		res.Detail += " Writes in the steady window: " + strings.Join(bd, ", ") + "."
	}
	logf("importer: steady state %d writes in %.0f s (%v); RSS %.1f MiB", res.SteadyWrites, res.SteadySeconds, bd, mib(res.RSS))
	if imp.Exited() {
		return fmt.Errorf("mcs-importer exited: %s", lastLines(imp.Output(), 3))
	}
	if b.Opt.ImporterFloor {
		fl, err := importerFloor(ctx, set, names, imp, servers, n, headless, b.Opt.Workers)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fl = &FloorResult{NotDone: err.Error()}
			logf("importer floor: %v", err)
		}
		res.Floor = fl
	}
	return nil
}

// startServerFor starts server id for the given kubeconfig and context.
func (b *Bench) startServerFor(id, tag, kubeconfig, context string) (*Server, error) {
	saved, savedCtx := b.Kubeconfig, b.Context
	b.Kubeconfig, b.Context = kubeconfig, context
	defer func() { b.Kubeconfig, b.Context = saved, savedCtx }()
	return b.StartServer(id, tag)
}

// startImporter starts mcs-importer as name with args, with -importer-env
// added to its environment (through env(1), which execs it: the process
// measured is the importer's).
func (b *Bench) startImporter(st *stack.Stack, name string, args stack.ImporterArgs) (*procs.Process, error) {
	env := strings.Fields(b.Opt.ImporterEnv)
	if len(env) == 0 {
		return st.StartImporterAs(name, args)
	}
	argv := append(append([]string{"env"}, env...), st.Bin.Importer)
	return st.Launch(name, append(argv, args.Argv()...)...)
}

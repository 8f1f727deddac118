package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/aggregate"
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
	imp, err := st.StartImporter(args)
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

const (
	floorNS = "bench-floor"
	// floorWorkers: mcs-importer's default --workers.
	floorWorkers = 16
)

// importerFloor measures what these API servers allow any importer that
// writes what mcs-importer's serve passes write: with the importer
// stopped, the bench exports another n Services (in floorNS) and, as each
// export is acknowledged, computes its import and mirrored slices with the
// importer's own pure rules (aggregate.Compute) and writes them into every
// member itself, floorWorkers exports at a time, in the importer's order
// (member by member, slices then import), reading nothing; statuses are
// left out (the importer writes them after the answers). The same DNS
// polling measures export-to-answer. The CoreDNS servers keep running, so
// they receive the same watch events as in the importer's burst.
func importerFloor(ctx context.Context, set *cluster.Set, names []string, imp *procs.Process, servers map[string]*Server, n int, headless bool, workers int) (*FloorResult, error) {
	if !headless {
		return nil, errors.New("measured for headless exports only (a ClusterSetIP export's serve pass also writes derived Services)")
	}
	children.Stop(imp)
	loaders := make([]*Loader, len(names))
	for k, name := range names {
		c := set.Get(name)
		_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: floorNS}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		if loaders[k], err = NewLoader(c.Config, floorWorkers); err != nil {
			return nil, err
		}
	}
	svcs, slices, err := createExportedServices(ctx, loaders[0], floorNS, n, headless, workers)
	if err != nil {
		return nil, err
	}
	logf("importer floor: %d Services with endpoints in %s; exporting them with the importer stopped", n, names[0])

	type ack struct {
		i  int
		se *mcsv1beta1.ServiceExport
	}
	acks := make(chan ack, n)
	res := &FloorResult{Workers: floorWorkers}
	var writes atomic.Int64
	var errMu sync.Mutex
	var writeErr error
	keep := func(err error) {
		if err != nil {
			errMu.Lock()
			writeErr = errors.Join(writeErr, err)
			errMu.Unlock()
		}
	}
	// wrote counts one write and keeps its error, if any.
	wrote := func(err error) {
		writes.Add(1)
		keep(err)
	}
	var wg sync.WaitGroup
	for range floorWorkers {
		wg.Go(func() {
			for a := range acks {
				out := aggregate.Compute(aggregate.Input{Namespace: floorNS, Name: svcName(a.i), Exports: []aggregate.Export{{
					ClusterID: names[0], Export: a.se, Service: svcs[a.i], Slices: []*discoveryv1.EndpointSlice{slices[a.i]},
				}}})
				if out.Import == nil {
					keep(fmt.Errorf("%s: no import computed", svcName(a.i)))
					continue
				}
				for _, l := range loaders {
					for _, s := range out.Slices {
						_, err := l.Kube.DiscoveryV1().EndpointSlices(floorNS).Create(ctx, s, metav1.CreateOptions{})
						wrote(err)
					}
					si := out.Import.DeepCopy()
					si.Status = mcsv1beta1.ServiceImportStatus{}
					_, err := l.MCS.MulticlusterV1beta1().ServiceImports(floorNS).Create(ctx, si, metav1.CreateOptions{})
					wrote(err)
				}
			}
		})
	}
	run, err := exportToAnswer(ctx, set, loaders[0], floorNS, n, names[1:], servers, headless, func(i int, se *mcsv1beta1.ServiceExport) {
		acks <- ack{i, se}
	})
	close(acks)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if writeErr != nil {
		return nil, fmt.Errorf("writing answers: %w", writeErr)
	}
	res.Writes = writes.Load()
	res.Unanswered = run.unanswered
	res.P50Ms, res.P99Ms, res.MaxMs = ms(percentileDur(run.lat, 0.5)), ms(percentileDur(run.lat, 0.99)), ms(percentileDur(run.lat, 1))
	res.AllSeconds = run.all.Seconds()
	logf("importer floor: %d writes; export-to-answer p50 %.0f ms p99 %.0f ms max %.0f ms; all answered after %.2f s; %d unanswered",
		res.Writes, res.P50Ms, res.P99Ms, res.MaxMs, res.AllSeconds, res.Unanswered)
	return res, nil
}

func svcName(i int) string { return fmt.Sprintf("exp-%04d", i) }

// epIP is the address of export i's one endpoint.
func epIP(i int) string { return addrAdd(mustAddr("10.200.0.0"), uint32(i+1)).String() }

// createExportedServices creates n Services, each with one ready endpoint,
// in ns of the loader's cluster.
func createExportedServices(ctx context.Context, loader *Loader, ns string, n int, headless bool, workers int) ([]*corev1.Service, []*discoveryv1.EndpointSlice, error) {
	svcs, slices := make([]*corev1.Service, n), make([]*discoveryv1.EndpointSlice, n)
	svcSpec := corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: portName, Port: cipPort, Protocol: corev1.ProtocolTCP}}}
	if headless {
		svcSpec.ClusterIP = corev1.ClusterIPNone
	}
	var jobs []func(context.Context) error
	for i := range n {
		jobs = append(jobs, func(ctx context.Context) error {
			svc, err := loader.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: svcName(i)},
				Spec:       svcSpec,
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				svc, err = loader.Kube.CoreV1().Services(ns).Get(ctx, svcName(i), metav1.GetOptions{})
			}
			if err != nil {
				return err
			}
			svcs[i] = svc
			slice, err := loader.Kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{Name: svcName(i) + "-1", Labels: map[string]string{
					discoveryv1.LabelServiceName: svcName(i), discoveryv1.LabelManagedBy: "bench.mcs-dns.io"}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
				Endpoints: []discoveryv1.Endpoint{{Addresses: []string{epIP(i)},
					Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				slice, err = loader.Kube.DiscoveryV1().EndpointSlices(ns).Get(ctx, svcName(i)+"-1", metav1.GetOptions{})
			}
			if err != nil {
				return err
			}
			slices[i] = slice
			return nil
		})
	}
	if err := runParallel(ctx, workers, jobs); err != nil {
		return nil, nil, fmt.Errorf("creating services: %w", err)
	}
	return svcs, slices, nil
}

// exportRun is one burst of exports, measured.
type exportRun struct {
	start      time.Time       // before the first create
	lat        []time.Duration // per answered export: acknowledged -> answered by every importing cluster
	all        time.Duration   // start -> the last answer
	unanswered int
}

// exportToAnswer exports the n Services of ns (in the loader's cluster), in
// parallel, recording each acknowledgement (and passing its index to
// onAck, when set); meanwhile it asks each importing cluster's CoreDNS
// for every name whose ServiceImport exists there, until all answer (or
// two minutes pass).
func exportToAnswer(ctx context.Context, set *cluster.Set, loader *Loader, ns string, n int, importers []string, servers map[string]*Server, headless bool, onAck func(i int, se *mcsv1beta1.ServiceExport)) (*exportRun, error) {
	acked := make([]time.Time, n)
	answered := map[string][]time.Time{}
	for _, c := range importers {
		answered[c] = make([]time.Time, n)
	}
	var mu sync.Mutex
	var jobs []func(context.Context) error
	for i := range n {
		jobs = append(jobs, func(ctx context.Context) error {
			se, err := loader.MCS.MulticlusterV1beta1().ServiceExports(ns).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: svcName(i)}}, metav1.CreateOptions{})
			if err == nil {
				mu.Lock()
				acked[i] = time.Now()
				mu.Unlock()
				if onAck != nil {
					onAck(i, se)
				}
			}
			return err
		})
	}
	// Ask DNS only for names whose ServiceImport exists in that cluster
	// (seen through a watch): polling every pending name would load the
	// two shared cores the importer and the API servers need.
	imported := map[string][]bool{}
	index := map[string]int{}
	for i := range n {
		index[svcName(i)] = i
	}
	for _, cname := range importers {
		imported[cname] = make([]bool, n)
		w, err := set.Get(cname).MCS.MulticlusterV1beta1().ServiceImports(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("watching imports in %s: %w", cname, err)
		}
		defer w.Stop()
		go func() {
			for ev := range w.ResultChan() {
				si, ok := ev.Object.(*mcsv1beta1.ServiceImport)
				if !ok {
					continue
				}
				if i, ok := index[si.Name]; ok {
					mu.Lock()
					imported[cname][i] = true
					mu.Unlock()
				}
			}
		}()
	}
	run := &exportRun{start: time.Now()}
	createErr := make(chan error, 1)
	go func() { createErr <- runParallel(ctx, 32, jobs) }()
	pollCtx, stopPoll := context.WithTimeout(ctx, 2*time.Minute)
	defer stopPoll()
	created := false
	for pollCtx.Err() == nil {
		if !created {
			select {
			case err := <-createErr:
				if err != nil {
					return nil, fmt.Errorf("creating exports: %w", err)
				}
				created = true
				logf("importer: %d exports acknowledged in %s", n, time.Since(run.start).Round(time.Millisecond))
			default:
			}
		}
		type job struct {
			c string
			i int
		}
		var todo []job
		mu.Lock()
		for c, ts := range answered {
			for i := range n {
				if ts[i].IsZero() && !acked[i].IsZero() && imported[c][i] {
					todo = append(todo, job{c, i})
				}
			}
		}
		mu.Unlock()
		if created && len(todo) == 0 {
			done := true
			mu.Lock()
			for _, ts := range answered {
				for i := range n {
					done = done && !ts[i].IsZero()
				}
			}
			mu.Unlock()
			if done {
				break
			}
		}
		ch := make(chan job)
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := &dns.Client{Net: "udp", Timeout: 200 * time.Millisecond, UDPSize: 4096}
				for j := range ch {
					name := svcName(j.i) + "." + ns + ".svc." + Zone
					r, _, err := cl.Exchange(newMsg(name, dns.TypeA), servers[j.c].Addr())
					if err == nil && answeredImport(r, headless, epIP(j.i)) {
						now := time.Now()
						mu.Lock()
						answered[j.c][j.i] = now
						mu.Unlock()
					}
				}
			}()
		}
		for _, j := range todo {
			ch <- j
		}
		close(ch)
		wg.Wait()
		_ = waitCtx(pollCtx, 2*time.Millisecond)
	}
	if !created {
		// The poll timed out first: the creates still finish (or fail).
		if err := <-createErr; err != nil {
			return nil, fmt.Errorf("creating exports: %w", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var last time.Time
	for i := range n {
		var worst time.Time
		ok := !acked[i].IsZero()
		for _, c := range importers {
			t := answered[c][i]
			if t.IsZero() {
				ok = false
				break
			}
			if t.After(worst) {
				worst = t
			}
		}
		if !ok {
			run.unanswered++
			continue
		}
		run.lat = append(run.lat, worst.Sub(acked[i]))
		if worst.After(last) {
			last = worst
		}
	}
	if !last.IsZero() {
		run.all = last.Sub(run.start)
	}
	return run, nil
}

// waitImporterQuiet polls the importer's metrics until its queue is empty
// and mcs_importer_writes_total has not moved for quiet (or limit passes).
// It returns when the counter last moved and its value then.
func waitImporterQuiet(ctx context.Context, url string, quiet, limit time.Duration) (time.Time, int64, error) {
	deadline := time.Now().Add(limit)
	var last time.Time
	prev := int64(-1)
	for {
		writes, depth, err := importerCounters(ctx, url)
		if err != nil {
			return last, prev, err
		}
		now := time.Now()
		if writes != prev {
			prev, last = writes, now
		}
		if depth == 0 && now.Sub(last) >= quiet {
			return last, prev, nil
		}
		if now.After(deadline) {
			return last, prev, fmt.Errorf("the importer was still writing (or its queue not empty) after %s", limit)
		}
		if err := waitCtx(ctx, 100*time.Millisecond); err != nil {
			return last, prev, err
		}
	}
}

// importerCounters reads the sum of mcs_importer_writes_total and
// mcs_importer_queue_depth from the importer's /metrics.
func importerCounters(ctx context.Context, url string) (writes int64, depth float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexByte(line, '}'); i > 0 && strings.HasPrefix(name, "mcs_importer_writes_total{") {
			rest = strings.TrimSpace(line[i+1:])
			name = "mcs_importer_writes_total"
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, perr := strconv.ParseFloat(fields[0], 64)
		switch name {
		case "mcs_importer_writes_total":
			if perr == nil {
				writes += int64(v)
			}
		case "mcs_importer_queue_depth":
			if perr == nil {
				depth = v
			}
		}
	}
	return writes, depth, sc.Err()
}

// writeCounts sums apiserver_request_total of the write verbs per
// cluster/resource.
func writeCounts(ctx context.Context, set *cluster.Set) (map[string]int64, error) {
	out := map[string]int64{}
	err := apiMetric(ctx, set, "apiserver_request_total", func(c *cluster.Cluster, labels string, v float64) {
		switch label(labels, "verb") {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY", "CREATE", "UPDATE", "DELETECOLLECTION":
		default:
			return
		}
		key := c.Name + "/" + label(labels, "resource")
		if sub := label(labels, "subresource"); sub != "" {
			key += "/" + sub
		}
		out[key] += int64(v)
	})
	return out, err
}

// apiMetric calls f with the labels and value of every sample of metric
// name that each cluster's API server exports on /metrics.
func apiMetric(ctx context.Context, set *cluster.Set, name string, f func(c *cluster.Cluster, labels string, v float64)) error {
	for _, c := range set.Clusters {
		raw, err := c.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 1<<16), 1<<22)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, name+"{") {
				continue
			}
			end := strings.LastIndexByte(line, '}')
			v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
			if err == nil {
				f(c, line[len(name)+1:end], v)
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
	}
	return nil
}

func label(labels, name string) string {
	i := strings.Index(labels, name+`="`)
	if i < 0 {
		return ""
	}
	rest := labels[i+len(name)+2:]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return rest[:j]
}

// startServerFor starts server id for the given kubeconfig and context.
func (b *Bench) startServerFor(id, tag, kubeconfig, context string) (*Server, error) {
	saved, savedCtx := b.Kubeconfig, b.Context
	b.Kubeconfig, b.Context = kubeconfig, context
	defer func() { b.Kubeconfig, b.Context = saved, savedCtx }()
	return b.StartServer(id, tag)
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// answeredImport: a headless import answers with the endpoint's address; a
// ClusterSetIP import answers NOERROR (with its VIP, if it has one).
func answeredImport(r *dns.Msg, headless bool, ip string) bool {
	if r.Rcode != dns.RcodeSuccess {
		return false
	}
	if !headless {
		return true
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok && a.A.String() == ip {
			return true
		}
	}
	return false
}

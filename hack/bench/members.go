package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/pprof/profile"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
	"github.com/mcs-dns/mcs-dns/test/stack"
)

// The member-scale phase: M member clusters (each its own kube-apiserver
// and etcd), every one exporting the same fixture, one mcs-importer over
// all of them. Per M: cold convergence (importer start to every member
// holding every import, mirrored slice and derived Service), the
// importer's writes, CPU, peak RSS and watches; then endpoint churn timed
// to the farthest member; idle CPU; and the floor: the same objects
// written by a trivial writer at the importer's concurrency.

const (
	scaleNS = "bench-scale"
	// scaleShared ClusterIP Services are exported by every member under
	// the same names; scaleOwn ClusterIP and scaleHeadless headless ones
	// by each member under its own.
	scaleShared, scaleOwn, scaleHeadless = 10, 10, 5
	scaleEndpoints                       = 5
	// scaleSourceManager is the manager of the bench's source slices
	// (the importer is told to trust it).
	scaleSourceManager = "bench.mcs-dns.io"
	// Today's importer at 20 members on this rig's kind of machine (the
	// figures the scale work started from): peak RSS and CPU to converge.
	baseline20RSSMB, baseline20CPU = 178.0, 16.2
)

// MemberScaleResult is one clusterset size.
type MemberScaleResult struct {
	Members int    `json:"members"`
	NotDone string `json:"not_done,omitempty"`
	// Per member after import: imports, mirrored slices, derived Services.
	Imports, Slices, Derived int
	ClustersUpSeconds        float64 `json:"clusters_up_seconds"`
	ColdSeconds              float64 `json:"cold_seconds"`
	// ImporterWrites: mcs_importer_writes_total at convergence (every
	// write it sent, refused ones too); APIWrites: what the API servers
	// counted (leases excluded), per member and in all.
	ImporterWrites int64   `json:"importer_writes"`
	APIWrites      int64   `json:"api_writes"`
	CPUSeconds     float64 `json:"cpu_seconds_to_converge"`
	PeakRSS        int64   `json:"peak_rss_bytes"`
	Watches        int     `json:"watches"`
	IdleCPUSeconds float64 `json:"idle_cpu_seconds"`
	IdleSeconds    float64 `json:"idle_seconds"`
	ChurnRate      float64 `json:"churn_changes_per_second"`
	ChurnChanges   int     `json:"churn_changes"`
	ChurnUnseen    int     `json:"churn_unseen"`
	ChurnP50Ms     float64 `json:"churn_p50_ms"`
	ChurnP99Ms     float64 `json:"churn_p99_ms"`
	ChurnMaxMs     float64 `json:"churn_max_ms"`
	ChurnWrites    int64   `json:"churn_writes"`
	// ChurnImporterP50Ms, ChurnImporterP99Ms: the importer's own part of
	// the churn's changes (mcs_importer_propagation_seconds: from its
	// seeing a change to its last write carrying it), as the upper bound
	// of the histogram bucket holding each (-1: past the last bound).
	ChurnImporterP50Ms float64 `json:"churn_importer_p50_ms_bound"`
	ChurnImporterP99Ms float64 `json:"churn_importer_p99_ms_bound"`
	ChurnImporterCount float64 `json:"churn_importer_changes"`
	ChurnCPUSeconds    float64 `json:"churn_cpu_seconds"`
	FloorSeconds       float64 `json:"floor_seconds"`
	FloorWrites        int64   `json:"floor_writes"`
	FloorWorkers       int     `json:"floor_workers"`
	// FloorCPUSeconds: the bench process's own CPU while it wrote the
	// floor (the same client code a controller has, deciding nothing).
	FloorCPUSeconds float64 `json:"floor_cpu_seconds"`
	FloorNotDone    string  `json:"floor_not_done,omitempty"`
	// Slow: the churn again with one member behind a delaying proxy.
	Slow *SlowMemberResult `json:"slow_member,omitempty"`
}

func scaleID(i int) string { return fmt.Sprintf("m%02d", i) }

// scaleSources are member i's exported Services and their source slices.
func scaleSources(i int) ([]*corev1.Service, []*discoveryv1.EndpointSlice) {
	var svcs []*corev1.Service
	var slices []*discoveryv1.EndpointSlice
	add := func(name string, headless bool, n int) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: scaleNS, Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: portName, Port: cipPort, Protocol: corev1.ProtocolTCP}}}}
		if headless {
			svc.Spec.ClusterIP = corev1.ClusterIPNone
		}
		s := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: scaleNS, Name: name + "-src", Labels: map[string]string{
				discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: scaleSourceManager}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
		}
		for k := range scaleEndpoints {
			ep := discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", 1+i, n, 1+k)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
			if headless {
				ep.Hostname = ptr.To(fmt.Sprintf("%s-%d", name, k))
			}
			s.Endpoints = append(s.Endpoints, ep)
		}
		svcs, slices = append(svcs, svc), append(slices, s)
	}
	n := 0
	for j := range scaleShared {
		add(fmt.Sprintf("shared-%02d", j), false, n)
		n++
	}
	for j := range scaleOwn {
		add(fmt.Sprintf("%s-svc-%02d", scaleID(i), j), false, n)
		n++
	}
	for j := range scaleHeadless {
		add(fmt.Sprintf("%s-hl-%02d", scaleID(i), j), true, n)
		n++
	}
	return svcs, slices
}

// scaleWatch counts, in one member, what the importer wrote into
// scaleNS, and reports churn addresses as its mirrored slices show them.
type scaleWatch struct {
	imports, withVIP, slices, derived atomic.Int64
	factories                         []interface{ Shutdown() }
}

// memberScalePhase runs every size of -member-scale.
func (b *Bench) memberScalePhase(ctx context.Context, register func(*cluster.Set)) {
	for _, f := range strings.Split(b.Opt.MemberScale, ",") {
		m, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || m < 2 {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		r := &MemberScaleResult{Members: m}
		b.Results.MemberScale = append(b.Results.MemberScale, r)
		var set *cluster.Set
		err = b.memberScale(ctx, r, func(s *cluster.Set) { set = s; register(s) })
		if err != nil {
			r.NotDone = err.Error()
			b.note("member scale %d: %v", m, err)
		}
		children.StopAll()
		if set != nil {
			set.Stop()
		}
	}
}

func (b *Bench) memberScale(ctx context.Context, r *MemberScaleResult, register func(*cluster.Set)) error {
	m := r.Members
	r.Imports, r.Slices, r.Derived = scaleShared+m*(scaleOwn+scaleHeadless), m*(scaleShared+scaleOwn+scaleHeadless), scaleShared+m*scaleOwn
	t0 := time.Now()
	specs := make([]cluster.Spec, m)
	names := make([]string, m)
	for i := range m {
		names[i] = scaleID(i)
		specs[i] = cluster.Spec{Name: names[i], ClusterID: names[i], IPv4Only: true}
	}
	st, err := stack.Start(ctx, stack.Config{Members: specs, Kubeconfig: filepath.Join(b.Out, "run", fmt.Sprintf("kubeconfig.scale%d", m)),
		Dir: filepath.Join(b.Out, "run"), LogDir: filepath.Join(b.Out, "logs"),
		Bin: procs.Binaries{CoreDNS: b.CoreDNS, Importer: b.Importer}, Group: children})
	if st != nil {
		register(st.Set)
	}
	if err != nil {
		return fmt.Errorf("starting %d member clusters: %w", m, err)
	}
	set := st.Set
	r.ClustersUpSeconds = time.Since(t0).Seconds()
	logf("member scale %d: clusters up in %s", m, time.Since(t0).Round(time.Millisecond))

	// The fixture, before the importer starts.
	loaders := make([]*Loader, m)
	var jobs []func(context.Context) error
	for i, c := range set.Clusters {
		if loaders[i], err = NewLoader(c.Config, 8); err != nil {
			return err
		}
		if err := createNS(ctx, loaders[i], scaleNS); err != nil {
			return err
		}
		svcs, slices := scaleSources(i)
		l := loaders[i]
		for k := range svcs {
			jobs = append(jobs, func(ctx context.Context) error {
				if _, err := l.Kube.CoreV1().Services(scaleNS).Create(ctx, svcs[k], metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					return err
				}
				if _, err := l.Kube.DiscoveryV1().EndpointSlices(scaleNS).Create(ctx, slices[k], metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					return err
				}
				_, err := l.MCS.MulticlusterV1beta1().ServiceExports(scaleNS).Create(ctx, &mcsv1beta1.ServiceExport{
					ObjectMeta: metav1.ObjectMeta{Namespace: scaleNS, Name: svcs[k].Name}}, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					err = nil
				}
				return err
			})
		}
	}
	if err := runParallel(ctx, b.Opt.Workers, jobs); err != nil {
		return fmt.Errorf("fixture: %w", err)
	}

	// Watch what the importer writes into every member (the bench's own
	// watches are started before the baseline of watch connections).
	watches := make([]*scaleWatch, 0, m)
	churn := newChurnSeen(m)
	wctx, stopWatches := context.WithCancel(ctx)
	defer func() {
		stopWatches() // the informers stop, then Shutdown has nothing to wait for
		for _, w := range watches {
			w.stop()
		}
	}()
	for i, c := range set.Clusters {
		w, err := startScaleWatch(wctx, c, i, churn)
		if err != nil {
			return err
		}
		watches = append(watches, w)
	}
	baseWatches, err := watchCount(ctx, set)
	if err != nil {
		return err
	}
	writesBefore, err := writeCounts(ctx, set)
	if err != nil {
		return err
	}

	metricsPort, err := procs.FindFreePort()
	if err != nil {
		return err
	}
	extra := []string{"--endpointslice-managers", scaleSourceManager}
	if b.Opt.Profile {
		extra = append(extra, "--profiling")
	}
	extra = append(extra, strings.Fields(b.Opt.ImporterArgs)...)
	start := time.Now()
	imp, err := b.startImporter(st, fmt.Sprintf("mcs-importer.scale%d", m), st.ImporterArgs(fmt.Sprintf("127.0.0.1:%d", metricsPort), extra...))
	if err != nil {
		return err
	}
	defer children.Stop(imp)
	pid := imp.Cmd.Process.Pid
	pprofURL := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", metricsPort)
	profPath := func(what string) string {
		return filepath.Join(b.Out, "profiles", fmt.Sprintf("importer-scale%d-%s.pprof", m, what))
	}
	var profiles sync.WaitGroup
	defer profiles.Wait()
	// The cold start's CPU profile: consecutive 10 s profiles from the
	// importer's start until it has converged (the last one ends up to
	// 10 s after), merged into one.
	converged := make(chan struct{})
	var coldProfiles sync.WaitGroup
	if b.Opt.Profile {
		coldProfiles.Go(func() {
			var chunks []string
			defer func() {
				if err := mergeProfiles(profPath("cold-cpu"), chunks); err != nil {
					logf("member scale %d: cold-start CPU profile: %v", m, err)
					return
				}
				b.addProfile(fmt.Sprintf("importer@%d members", m), profPath("cold-cpu"))
			}()
			for i := 1; ; i++ {
				path := profPath(fmt.Sprintf("cold-cpu-%d", i))
				if err := fetch(ctx, pprofURL+"profile?seconds=10", path); err == nil {
					chunks = append(chunks, path)
				} else if imp.Exited() || waitCtx(ctx, 100*time.Millisecond) != nil {
					// Not served yet (the importer needs a moment), or
					// too busy to answer: asked again. Gone: the end.
					return
				}
				select {
				case <-converged:
					return
				default:
				}
			}
		})
	}
	complete := func() bool {
		for _, w := range watches {
			if w.imports.Load() != int64(r.Imports) || w.withVIP.Load() != int64(r.Imports-m*scaleHeadless) ||
				w.slices.Load() != int64(r.Slices) || w.derived.Load() != int64(r.Derived) {
				return false
			}
		}
		return true
	}
	limit := b.Opt.MemberScaleTimeout
	for !complete() {
		if imp.Exited() {
			return fmt.Errorf("mcs-importer exited: %s", lastLines(imp.Output(), 3))
		}
		if time.Since(start) > limit {
			return fmt.Errorf("not converged after %s: %s", limit, scaleProgress(watches))
		}
		if err := waitCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	r.ColdSeconds = time.Since(start).Seconds()
	r.CPUSeconds, _ = procCPUSeconds(pid)
	close(converged)
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	r.ImporterWrites, _, _ = importerCounters(ctx, metricsURL)
	if after, err := writeCounts(ctx, set); err == nil {
		r.APIWrites = apiWritesSince(writesBefore, after)
	}
	if n, err := watchCount(ctx, set); err == nil {
		r.Watches = n - baseWatches
	}
	logf("member scale %d: converged in %.1f s; %d importer writes, %d API writes; CPU %.1f s; %d watches", m, r.ColdSeconds, r.ImporterWrites, r.APIWrites, r.CPUSeconds, r.Watches)

	// Let the statuses settle before the churn, and the last cold-start
	// profile end (one CPU profile at a time).
	if _, _, err := waitImporterQuiet(ctx, metricsURL, 3*time.Second, 5*time.Minute); err != nil {
		logf("member scale %d: %v", m, err)
	}
	coldProfiles.Wait()

	// Churn: one endpoint address changed at a time in a random member's
	// export, at a steady rate; each change timed from its update's
	// acknowledgement to the last member's mirrored slice showing it.
	cpu0, _ := procCPUSeconds(pid)
	w0, _, _ := importerCounters(ctx, metricsURL)
	prop0, propErr := importerHistogram(ctx, metricsURL, "mcs_importer_propagation_seconds")
	if b.Opt.Profile {
		secs := max(1, int(b.Opt.MemberChurn.Seconds()))
		profiles.Go(func() {
			if err := fetch(ctx, fmt.Sprintf("%sprofile?seconds=%d", pprofURL, secs), profPath("churn-cpu")); err == nil {
				b.addProfile(fmt.Sprintf("importer@%d members", m), profPath("churn-cpu"))
			}
		})
	}
	rng := rand.New(rand.NewPCG(uint64(m), 20261206))
	r.ChurnRate = b.churnRate(m)
	n := int(r.ChurnRate * b.Opt.MemberChurn.Seconds())
	if err := b.churn(ctx, loaders, churn, n, 0, r.ChurnRate, func() int { return rng.IntN(m) }); err != nil {
		return err
	}
	lat, unseen := churn.wait(ctx, 30*time.Second)
	r.ChurnChanges, r.ChurnUnseen = n, unseen
	baseOthers, _, _ := churn.split(m - 1)
	r.ChurnP50Ms, r.ChurnP99Ms, r.ChurnMaxMs = ms(percentileDur(lat, 0.5)), ms(percentileDur(lat, 0.99)), ms(percentileDur(lat, 1))
	cpu1, _ := procCPUSeconds(pid)
	w1, _, _ := importerCounters(ctx, metricsURL)
	r.ChurnCPUSeconds, r.ChurnWrites = cpu1-cpu0, w1-w0
	if prop1, err := importerHistogram(ctx, metricsURL, "mcs_importer_propagation_seconds"); err == nil && propErr == nil {
		d := prop1.since(prop0)
		r.ChurnImporterCount = d.total
		r.ChurnImporterP50Ms, r.ChurnImporterP99Ms = msBound(d.quantileBound(0.5)), msBound(d.quantileBound(0.99))
		logf("member scale %d: the importer's part of the churn's changes (%.0f carried): p50 <= %.0f ms, p99 <= %.0f ms", m, d.total, r.ChurnImporterP50Ms, r.ChurnImporterP99Ms)
	}
	logf("member scale %d: %d changes, farthest member p50 %.0f ms p99 %.0f ms max %.0f ms, %d unseen; %d writes, CPU %.2f s", m, n, r.ChurnP50Ms, r.ChurnP99Ms, r.ChurnMaxMs, unseen, r.ChurnWrites, r.ChurnCPUSeconds)

	// Idle: nothing changes.
	if _, _, err := waitImporterQuiet(ctx, metricsURL, 3*time.Second, 2*time.Minute); err != nil {
		logf("member scale %d: %v", m, err)
	}
	c0, _ := procCPUSeconds(pid)
	t1 := time.Now()
	if b.Opt.Profile {
		secs := max(1, int(b.Opt.MemberIdle.Seconds()))
		if err := fetch(ctx, fmt.Sprintf("%sprofile?seconds=%d", pprofURL, secs), profPath("idle-cpu")); err == nil {
			b.addProfile(fmt.Sprintf("importer@%d members", m), profPath("idle-cpu"))
		}
		if err := fetch(ctx, pprofURL+"heap", profPath("heap")); err == nil {
			b.addProfile(fmt.Sprintf("importer@%d members", m), profPath("heap"))
		}
	}
	if err := waitCtx(ctx, time.Until(t1.Add(b.Opt.MemberIdle))); err != nil {
		return err
	}
	c1, _ := procCPUSeconds(pid)
	r.IdleCPUSeconds, r.IdleSeconds = c1-c0, time.Since(t1).Seconds()
	if _, hwm, err := procs.RSS(pid); err == nil {
		r.PeakRSS = hwm
	}
	logf("member scale %d: idle CPU %.2f s in %.0f s; peak RSS %.1f MiB", m, r.IdleCPUSeconds, r.IdleSeconds, mib(r.PeakRSS))
	if imp.Exited() {
		return fmt.Errorf("mcs-importer exited: %s", lastLines(imp.Output(), 3))
	}
	children.Stop(imp)

	if b.Opt.MemberSlowDelay > 0 {
		slow, err := b.slowMember(ctx, st, loaders, churn, m, rng)
		if err != nil {
			logf("member scale %d, slow member: %v", m, err)
			slow = &SlowMemberResult{NotDone: err.Error()}
		}
		slow.BaseP50Ms, slow.BaseP99Ms = ms(percentileDur(baseOthers, 0.5)), ms(percentileDur(baseOthers, 0.99))
		r.Slow = slow
	}

	// The floor: the objects the importer wrote into scaleNS, written
	// again into another namespace of the same members by a writer that
	// reads nothing and decides nothing.
	if err := scaleFloor(ctx, set, loaders, r); err != nil {
		r.FloorNotDone = err.Error()
		logf("member scale %d floor: %v", m, err)
	}
	return nil
}

// msBound is a quantileBound in milliseconds (-1 stays -1).
func msBound(seconds float64) float64 {
	if seconds < 0 {
		return -1
	}
	return 1000 * seconds
}

// mergeProfiles writes the profiles in paths merged into one file at
// out, and removes them.
func mergeProfiles(out string, paths []string) error {
	if len(paths) == 0 {
		return errors.New("no profile taken")
	}
	var ps []*profile.Profile
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		p, err := profile.Parse(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		ps = append(ps, p)
	}
	merged, err := profile.Merge(ps)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := merged.Write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	for _, path := range paths {
		_ = os.Remove(path)
	}
	return nil
}

// addProfile records a profile file under name.
func (b *Bench) addProfile(name, path string) {
	b.profilesMu.Lock()
	defer b.profilesMu.Unlock()
	b.Results.Profiles[name] = append(b.Results.Profiles[name], path)
}

func createNS(ctx context.Context, l *Loader, ns string) error {
	_, err := l.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func scaleProgress(ws []*scaleWatch) string {
	var out []string
	for i, w := range ws {
		out = append(out, fmt.Sprintf("%s %d/%d/%d/%d", scaleID(i), w.imports.Load(), w.withVIP.Load(), w.slices.Load(), w.derived.Load()))
	}
	return "imports/with VIP/slices/derived: " + strings.Join(out, ", ")
}

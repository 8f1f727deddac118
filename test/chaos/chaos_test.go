package chaos

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/netcut"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

// Timings of the system under test, short so that a run sees many
// withdrawals, returns and leader changes.
const (
	grace         = 20 * time.Second
	probeInterval = time.Second
	// settle: a member that became reachable again counts as seen by the
	// importer this long after (probe, relist, reconcile).
	settle = 15 * time.Second
	// invalidatedFor: an import may legitimately go or change within this
	// long of an unexport or of its Service being replaced.
	invalidatedFor = 15 * time.Second
	// dnsStaleness: how long CoreDNS may answer an import's or a
	// mirrored slice's earlier state.
	dnsStaleness = 10 * time.Second
	// sourceStaleness: how long after an exporting member last listed an
	// address ready CoreDNS may still answer it (the importer's hold of
	// a member it has not seen since it started, plus its reaction).
	sourceStaleness = grace + settle + dnsStaleness
	// noticeDisruption: how long after most members are cut the
	// importer has noticed (a probe's timeout, 5 s, and the next probes).
	noticeDisruption = 5*time.Second + 3*probeInterval
	// maxDisruption: how long a disruption (most members away) stops
	// withdrawals (--max-disruption); after it, members away longer
	// than the grace period are withdrawn.
	maxDisruption = 50 * time.Second
	// convergeBound: after the last fault heals, every member matches the
	// model within this (the measured time is reported).
	convergeBound = 3 * time.Minute
)

var namespaces = []string{"chaos-a", "chaos-b"}

const servicesPerNamespace = 5

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestChaos: see the package comment and RELIABILITY.md. Without
// CHAOS_SEED it is the short fixed-seed run `make test` includes.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real API servers; skipped with -short")
	}
	seed := uint64(20261202)
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", v, err)
		}
		seed = s
	}
	n := envInt("CHAOS_MEMBERS", 3)
	if n < 2 {
		t.Fatalf("CHAOS_MEMBERS must be at least 2")
	}
	duration := 75 * time.Second
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("CHAOS_DURATION=%q: %v", v, err)
		}
		duration = d
	}
	replay := fmt.Sprintf("CHAOS_SEED=%d CHAOS_MEMBERS=%d CHAOS_DURATION=%s make chaos", seed, n, duration)
	t.Logf("chaos: seed %d, %d members, %s of faults (replay: %s)", seed, n, duration, replay)

	w := newWorld(t, seed, n)
	w.replay = replay
	w.startImporters()
	w.startDNS()
	w.seedWorkload()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	checkCtx, stopChecks := context.WithCancel(ctx)
	wg.Go(func() { w.checkLoop(checkCtx) })
	wg.Go(func() { w.dnsLoop(checkCtx) })
	wg.Go(func() { w.supervise(checkCtx) })
	faultCtx, stopFaults := context.WithTimeout(ctx, duration)
	defer stopFaults()
	var faults sync.WaitGroup
	wg.Go(func() { w.faultLoop(faultCtx, &faults) })
	wg.Go(func() { w.workLoop(faultCtx) })
	<-faultCtx.Done()
	faults.Wait() // every fault healed
	healed := time.Now()
	w.logf("last fault healed; waiting for the members to match the model")

	converged, last := w.awaitModel(convergeBound)
	took := time.Since(healed)
	stopChecks()
	wg.Wait()
	if !converged {
		w.violate("convergence", fmt.Sprintf("members differ from the model %s after the last fault healed: %s", convergeBound, strings.Join(last, "; ")))
	} else {
		w.writesQuiet()
	}
	w.report(took, converged)
	if len(w.violations) > 0 {
		t.Errorf("%d invariant violations; replay with: %s", len(w.violations), replay)
	}
}

// world is the system under test and what the test knows of it.
type world struct {
	t       *testing.T
	seed    uint64
	replay  string
	began   time.Time
	members []*cluster.Cluster
	proxies []*netcut.Proxy
	// kubeconfig reaches the members through the proxies (the
	// importers'); direct does not (CoreDNS's, the Lease's, the test's).
	kubeconfig, direct string
	importerBin        string

	mu   sync.Mutex
	rng  *rand.Rand
	cuts []int // active cuts per member
	// apiDown: the API server is being stopped, is stopped, or is being
	// started (not read); apiAway: it is stopped for sure (from the stop's
	// return to the start's call), the only time it counts as away: the
	// importer may reach a starting one before StartAPIServer returns.
	apiDown, apiAway []bool
	seenFrom         []time.Time // when each member last became reachable again
	replicas         [2]*replica
	dns              []*procs.CoreDNS
	// invalidated: when each key last had an export removed or a Service
	// replaced (an import may then go or change legitimately).
	invalidated map[string]time.Time
	faultLog    []string
	faults      map[string]int
	ops         map[string]int
	checks      map[string]int
	violations  []string
	// history of each member's imports and ready mirrored endpoints, for
	// the DNS checks' staleness bound; sourceReady: when each address
	// was last listed ready by an exporting member.
	history     map[string][]observed
	sourceReady map[string]map[string]time.Time
	// lastRead is when each member was last read whole: while its API
	// server is stopped its objects are as they were then.
	lastRead map[string]time.Time
	// readyWhileReachable: when each member last listed each address of
	// each key ready, in a reading while the importers could reach it;
	// lastReach: that reading. While a member is away the importers
	// serve its last known state: what it listed up to settle before it
	// went away (their caches lag the readings).
	readyWhileReachable map[string]map[string]map[string]time.Time
	lastReach           map[string]time.Time
	// reachedUntil: for each member, lastReach before its latest return.
	reachedUntil []time.Time
	// reachable: each member's stretches of readings in which the
	// importers could reach it; upheaval: when a leader term may have
	// changed or a disruption began (after which a new leader may hold
	// what it has not seen, stale where it was stale, across a
	// disruption); listedBy: which member last listed each address of
	// each key ready.
	reachable [][]span
	upheaval  []time.Time
	listedBy  map[string]map[string]int
}

// span is a stretch of time; to is the last reading in it.
type span struct {
	from, to time.Time
	open     bool
}

type observed struct {
	at    time.Time
	ips   []string
	ready []string
}

type replica struct {
	p    *procs.Process
	addr string
	// busy: a fault is stopping or starting it (the supervisor waits).
	busy bool
}

func newWorld(t *testing.T, seed uint64, n int) *world {
	w := &world{t: t, seed: seed, began: time.Now(), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		invalidated: map[string]time.Time{}, faults: map[string]int{}, ops: map[string]int{}, checks: map[string]int{},
		history: map[string][]observed{}, sourceReady: map[string]map[string]time.Time{}, lastRead: map[string]time.Time{},
		readyWhileReachable: map[string]map[string]map[string]time.Time{}, lastReach: map[string]time.Time{}}
	var specs []cluster.Spec
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		specs = append(specs, cluster.Spec{Name: name, ClusterID: name, IPv4Only: true})
	}
	set := cluster.Start(t, specs...)
	w.members = set.Clusters
	w.direct = set.Kubeconfig
	w.cuts, w.apiDown, w.apiAway, w.seenFrom = make([]int, n), make([]bool, n), make([]bool, n), make([]time.Time, n)
	w.reachedUntil = make([]time.Time, n)
	w.reachable, w.listedBy = make([][]span, n), map[string]map[string]int{}
	kc, err := clientcmd.LoadFromFile(set.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range w.members {
		host := strings.TrimPrefix(strings.TrimSuffix(c.Config.Host, "/"), "https://")
		p, err := netcut.Start(host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		w.proxies = append(w.proxies, p)
		kc.Clusters[c.Name].Server = "https://" + p.Addr()
	}
	w.kubeconfig = t.TempDir() + "/kubeconfig"
	if err := clientcmd.WriteToFile(*kc, w.kubeconfig); err != nil {
		t.Fatal(err)
	}
	for _, c := range w.members {
		for _, ns := range namespaces {
			_, err := c.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	w.importerBin = procs.ImporterBinary(t)
	return w
}

func (w *world) logf(format string, args ...any) {
	w.t.Logf("[%6.1fs] %s", time.Since(w.began).Seconds(), fmt.Sprintf(format, args...))
}

func (w *world) intn(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rng.IntN(n)
}

func (w *world) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.intn(int(hi-lo)/int(time.Millisecond)+1))*time.Millisecond
}

func (w *world) contexts() string {
	names := make([]string, len(w.members))
	for i, c := range w.members {
		names[i] = c.Name
	}
	return strings.Join(names, ",")
}

// --- the system ---

func (w *world) startReplica(i int) {
	addr := fmt.Sprintf("127.0.0.1:%d", procs.FreePort(w.t))
	p := procs.Start(w.t, fmt.Sprintf("mcs-importer-%d", i), w.importerBin,
		"--kubeconfig", w.kubeconfig, "--contexts", w.contexts(), "--metrics-addr", addr,
		"--endpoint-grace-period", grace.String(), "--health-probe-interval", probeInterval.String(),
		"--connect-timeout", "5s", "--max-disruption", maxDisruption.String(),
		"--leader-elect", "--leader-elect-kubeconfig", w.direct, "--leader-elect-context", w.members[0].Name,
		"--leader-elect-namespace", "kube-system", "--leader-elect-name", "mcs-importer-chaos",
		"--leader-elect-lease-duration", "6s", "--leader-elect-renew-deadline", "4s", "--leader-elect-retry-period", "1s")
	w.mu.Lock()
	w.replicas[i] = &replica{p: p, addr: addr}
	w.mu.Unlock()
}

// supervise restarts a replica that exited by itself (a leader that
// loses its Lease exits, as it should), as a Deployment's kubelet would.
func (w *world) supervise(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		for i := range w.replicas {
			w.mu.Lock()
			r := w.replicas[i]
			exited := r != nil && !r.busy && r.p.Exited()
			if exited {
				r.busy = true // a fault must not start it too
			}
			w.mu.Unlock()
			if exited {
				w.fault("replica-exited", "importer replica %d exited by itself; started again", i)
				w.markUpheaval()
				w.startReplica(i)
			}
		}
	}
}

// claim marks replica i busy for one fault and reports whether it was
// free. Faults overlap in time, and two of them stopping and starting the
// same replica at once would each start a process, leaving one running
// that the test no longer knows of (it would hold the Lease unseen).
func (w *world) claim(i int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.replicas[i]
	if r == nil || r.busy {
		return false
	}
	r.busy = true
	return true
}

func (w *world) startImporters() {
	w.startReplica(0)
	w.startReplica(1)
}

// leader is the replica that holds the Lease (-1 if none answers so).
func (w *world) leader() int {
	for i := range w.replicas {
		w.mu.Lock()
		r := w.replicas[i]
		w.mu.Unlock()
		if r != nil && !r.p.Exited() && metric(r.addr, "mcs_importer_leader") == 1 {
			return i
		}
	}
	return -1
}

// metric sums the samples of one metric family of a replica (-1 when it
// does not answer).
func metric(addr, name string) float64 {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// startDNS runs one of our CoreDNS per member, with the production
// Corefile's mcs stanza, reading that member directly.
func (w *world) startDNS() {
	bin := procs.CoreDNSBinary(w.t)
	for _, c := range w.members {
		corefile := fmt.Sprintf(`clusterset.local {
    errors
    bufsize 1232
    mcs clusterset.local {
        kubeconfig %s %s
        ttl 5
        endpointslice_managers mcs-importer.mcs-dns.io
    }
}
`, w.direct, c.Name)
		w.dns = append(w.dns, procs.StartCoreDNS(w.t, bin, corefile))
	}
}

// --- faults ---

func (w *world) fault(kind, format string, args ...any) {
	msg := fmt.Sprintf("[%6.1fs] %s: %s", time.Since(w.began).Seconds(), kind, fmt.Sprintf(format, args...))
	w.mu.Lock()
	w.faults[kind]++
	w.faultLog = append(w.faultLog, msg)
	w.mu.Unlock()
	w.t.Log(msg)
}

func (w *world) faultLoop(ctx context.Context, faults *sync.WaitGroup) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.between(2*time.Second, 6*time.Second)):
		}
		switch r := w.intn(100); {
		case r < 35:
			i := w.intn(len(w.members))
			faults.Go(func() { w.cut("cut", []int{i}, w.between(3*time.Second, 30*time.Second)) })
		case r < 45:
			k := 2 + w.intn(len(w.members)-1)
			perm := w.perm(len(w.members))[:k]
			faults.Go(func() { w.cut("cut-many", perm, w.between(5*time.Second, 30*time.Second)) })
		case r < 65:
			i := 1 + w.intn(len(w.members)-1) // m0 holds the Lease: see RELIABILITY.md
			faults.Go(func() { w.restartAPIServer(i, w.between(3*time.Second, 15*time.Second)) })
		case r < 82:
			faults.Go(w.killLeader)
		default:
			i := w.intn(2)
			faults.Go(func() { w.restartReplica(i) })
		}
	}
}

func (w *world) perm(n int) []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rng.Perm(n)
}

func (w *world) names(idx []int) string {
	var s []string
	for _, i := range idx {
		s = append(s, w.members[i].Name)
	}
	return strings.Join(s, ",")
}

func (w *world) cut(kind string, idx []int, d time.Duration) {
	w.fault(kind, "%s unreachable for the importers for %s", w.names(idx), d.Round(time.Millisecond))
	w.mu.Lock()
	for _, i := range idx {
		w.cuts[i]++
		w.proxies[i].Cut()
	}
	w.mu.Unlock()
	time.Sleep(d)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, i := range idx {
		if w.cuts[i]--; w.cuts[i] == 0 {
			if err := w.proxies[i].Resume(); err != nil {
				w.t.Error(err)
			}
			w.back(i)
		}
	}
}

// upheavalSince reports whether a leader term may have changed or a
// disruption began after t (under mu).
func (w *world) upheavalSince(t time.Time) bool {
	return len(w.upheaval) > 0 && w.upheaval[len(w.upheaval)-1].After(t)
}

// markUpheaval notes that a leader term may change, or a disruption
// began, now.
func (w *world) markUpheaval() {
	w.mu.Lock()
	w.upheaval = append(w.upheaval, time.Now())
	w.mu.Unlock()
}

// flushedSince reports whether, since t, the importers had a quiet
// window with both member i (answering) and member j (the source) in
// reach for settle plus dnsStaleness, no leader change or disruption
// start within it (under mu): a stale endpoint left in i is rewritten in
// such a window at the latest.
func (w *world) flushedSince(i, j int, t time.Time) bool {
	need := settle + dnsStaleness
	for _, a := range w.reachable[i] {
		for _, b := range w.reachable[j] {
			from, to := maxTime(a.from, b.from, t), minTime(a.to, b.to)
			for _, u := range w.upheaval {
				switch {
				case u.After(to) || u.Add(10*time.Second).Before(from):
				case u.Sub(from) > need:
					to = u
				default:
					from = maxTime(from, u.Add(10*time.Second))
				}
			}
			if to.Sub(from) > need {
				return true
			}
		}
	}
	return false
}

func maxTime(ts ...time.Time) time.Time {
	out := ts[0]
	for _, t := range ts[1:] {
		if t.After(out) {
			out = t
		}
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// back notes that member i can be reached again (under mu): seen from
// now, after what the importers last wrote there while they could.
func (w *world) back(i int) {
	w.seenFrom[i] = time.Now()
	w.reachedUntil[i] = w.lastReach[w.members[i].Name]
}

func (w *world) restartAPIServer(i int, d time.Duration) {
	w.mu.Lock()
	if w.apiDown[i] {
		w.mu.Unlock()
		return
	}
	w.apiDown[i] = true
	w.mu.Unlock()
	c := w.members[i]
	w.fault("apiserver-restart", "%s's API server stopped for %s, etcd compacted meanwhile", c.Name, d.Round(time.Millisecond))
	if err := c.StopAPIServer(); err != nil {
		w.t.Errorf("stopping %s's API server: %v", c.Name, err)
	}
	w.setAPIAway(i, true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.CompactEtcd(ctx); err != nil {
		w.t.Errorf("compacting %s's etcd: %v", c.Name, err)
	}
	time.Sleep(d)
	w.setAPIAway(i, false)
	if err := c.StartAPIServer(ctx); err != nil {
		w.t.Errorf("starting %s's API server: %v", c.Name, err)
	}
	w.mu.Lock()
	w.apiDown[i] = false
	w.back(i)
	w.mu.Unlock()
}

func (w *world) setAPIAway(i int, away bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.apiAway[i] = away
	if !away {
		w.back(i)
	}
}

func (w *world) killLeader() {
	l := w.leader()
	if l < 0 {
		return
	}
	if !w.claim(l) {
		return
	}
	w.fault("leader-kill", "importer replica %d (the leader) SIGKILLed", l)
	w.markUpheaval()
	w.mu.Lock()
	r := w.replicas[l]
	w.mu.Unlock()
	r.p.Kill()
	time.Sleep(w.between(time.Second, 3*time.Second))
	w.startReplica(l)
}

func (w *world) restartReplica(i int) {
	if !w.claim(i) {
		return
	}
	w.fault("replica-restart", "importer replica %d stopped (SIGTERM) and started", i)
	w.markUpheaval()
	w.mu.Lock()
	r := w.replicas[i]
	w.mu.Unlock()
	_ = r.p.Stop()
	w.startReplica(i)
}

// --- workload ---

func key(ns, name string) string { return ns + "/" + name }

func (w *world) op(kind string) {
	w.mu.Lock()
	w.ops[kind]++
	w.mu.Unlock()
}

func (w *world) invalidate(k string) {
	w.mu.Lock()
	w.invalidated[k] = time.Now()
	w.mu.Unlock()
}

// seedWorkload exports a first set of services before any fault.
func (w *world) seedWorkload() {
	for range 3 * len(w.members) {
		w.doExport(context.Background())
	}
}

func (w *world) workLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.between(300*time.Millisecond, 1200*time.Millisecond)):
		}
		opCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		switch r := w.intn(100); {
		case r < 25:
			w.doExport(opCtx)
		case r < 35:
			w.doUnexport(opCtx)
		case r < 70:
			w.doEndpoints(opCtx)
		case r < 80:
			w.doFlipType(opCtx)
		case r < 90:
			w.doAffinity(opCtx)
		default:
			w.doPorts(opCtx)
		}
		cancel()
	}
}

// pick chooses a member whose API server is up, and a service name.
func (w *world) pick() (int, *cluster.Cluster, string, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var up []int
	for i, down := range w.apiDown {
		if !down {
			up = append(up, i)
		}
	}
	i := up[w.rng.IntN(len(up))]
	return i, w.members[i], namespaces[w.rng.IntN(len(namespaces))], fmt.Sprintf("svc%d", w.rng.IntN(servicesPerNamespace))
}

func (w *world) endpoints(i int, headless bool) []discoveryv1.Endpoint {
	n := 1 + w.intn(3)
	var out []discoveryv1.Endpoint
	for j := range n {
		e := discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 100+i, w.intn(250), 1+w.intn(250))},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(w.intn(4) != 0)},
		}
		if headless {
			e.Hostname = ptr.To(fmt.Sprintf("pod-%d", j))
		}
		out = append(out, e)
	}
	return out
}

func service(ns, name string, headless bool) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	if headless {
		s.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return s
}

func (w *world) putSlice(ctx context.Context, i int, c *cluster.Cluster, ns, name string, headless bool) error {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-src", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   w.endpoints(i, headless),
	}
	api := c.Kube.DiscoveryV1().EndpointSlices(ns)
	cur, err := api.Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = api.Create(ctx, s, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	s.ResourceVersion = cur.ResourceVersion
	_, err = api.Update(ctx, s, metav1.UpdateOptions{})
	return err
}

func (w *world) doExport(ctx context.Context) {
	i, c, ns, name := w.pick()
	svcs := c.Kube.CoreV1().Services(ns)
	svc, err := svcs.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		svc, err = svcs.Create(ctx, service(ns, name, w.intn(3) == 0), metav1.CreateOptions{})
	}
	if err != nil {
		return
	}
	if w.putSlice(ctx, i, c, ns, name, svc.Spec.ClusterIP == corev1.ClusterIPNone) != nil {
		return
	}
	_, err = c.MCS.MulticlusterV1beta1().ServiceExports(ns).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err == nil {
		w.op("export")
	}
}

func (w *world) doUnexport(ctx context.Context) {
	_, c, ns, name := w.pick()
	w.invalidate(key(ns, name))
	if c.MCS.MulticlusterV1beta1().ServiceExports(ns).Delete(ctx, name, metav1.DeleteOptions{}) == nil {
		w.op("unexport")
	}
}

func (w *world) doEndpoints(ctx context.Context) {
	i, c, ns, name := w.pick()
	svc, err := c.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	if w.putSlice(ctx, i, c, ns, name, svc.Spec.ClusterIP == corev1.ClusterIPNone) == nil {
		w.op("endpoints")
	}
}

// doFlipType replaces a Service by one of the other type (a Service's
// clusterIP cannot change in place): headless <-> ClusterIP.
func (w *world) doFlipType(ctx context.Context) {
	_, c, ns, name := w.pick()
	svcs := c.Kube.CoreV1().Services(ns)
	svc, err := svcs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	w.invalidate(key(ns, name))
	if svcs.Delete(ctx, name, metav1.DeleteOptions{}) != nil {
		return
	}
	if _, err := svcs.Create(ctx, service(ns, name, svc.Spec.ClusterIP != corev1.ClusterIPNone), metav1.CreateOptions{}); err == nil {
		w.op("flip-type")
	}
	w.invalidate(key(ns, name))
}

func (w *world) updateService(ctx context.Context, kind string, mutate func(*corev1.Service)) {
	_, c, ns, name := w.pick()
	svcs := c.Kube.CoreV1().Services(ns)
	svc, err := svcs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	mutate(svc)
	if _, err := svcs.Update(ctx, svc, metav1.UpdateOptions{}); err == nil {
		w.op(kind)
	}
}

func (w *world) doAffinity(ctx context.Context) {
	w.updateService(ctx, "session-affinity", func(s *corev1.Service) {
		if s.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
			s.Spec.SessionAffinity, s.Spec.SessionAffinityConfig = corev1.ServiceAffinityNone, nil
		} else {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		}
	})
}

func (w *world) doPorts(ctx context.Context) {
	w.updateService(ctx, "ports", func(s *corev1.Service) {
		if s.Spec.Ports[0].Port == 80 {
			s.Spec.Ports[0].Port = 8080
		} else {
			s.Spec.Ports[0].Port = 80
		}
	})
}

// --- reading the members ---

func (w *world) read(ctx context.Context, i int) (*member, error) {
	c := w.members[i]
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m := &member{id: c.Name, namespaces: map[string]bool{}, exports: map[string]*mcsv1beta1.ServiceExport{},
		services: map[string]*corev1.Service{}, sources: map[string][]discoveryv1.EndpointSlice{},
		imports: map[string]*mcsv1beta1.ServiceImport{}, mirrored: map[string][]discoveryv1.EndpointSlice{}}
	nss, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, n := range nss.Items {
		if n.DeletionTimestamp == nil {
			m.namespaces[n.Name] = true
		}
	}
	exps, err := c.MCS.MulticlusterV1beta1().ServiceExports("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for j := range exps.Items {
		e := &exps.Items[j]
		m.exports[key(e.Namespace, e.Name)] = e
	}
	svcs, err := c.Kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for j := range svcs.Items {
		s := &svcs.Items[j]
		m.services[key(s.Namespace, s.Name)] = s
	}
	sls, err := c.Kube.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, s := range sls.Items {
		switch s.Labels[discoveryv1.LabelManagedBy] {
		case "endpointslice-controller.k8s.io":
			k := key(s.Namespace, s.Labels[discoveryv1.LabelServiceName])
			m.sources[k] = append(m.sources[k], s)
		case mcsapi.ManagedByImporter:
			k := key(s.Namespace, s.Labels[mcsapi.LabelServiceName])
			m.mirrored[k] = append(m.mirrored[k], s)
		}
	}
	sis, err := c.MCS.MulticlusterV1beta1().ServiceImports("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for j := range sis.Items {
		si := &sis.Items[j]
		if si.Labels[mcsapi.LabelManagedBy] == mcsapi.ManagedByImporter {
			m.imports[key(si.Namespace, si.Name)] = si
		}
	}
	return m, nil
}

// view is one reading of every member and of what the importer can see.
type view struct {
	at      time.Time
	members []*member // nil where the API server did not answer
	visible []bool    // reachable by the importers, and long enough to be seen
	reach   []bool    // reachable by the importers now
	away    int       // members the importers cannot reach now, for sure
}

func (w *world) look(ctx context.Context) view {
	v := view{at: time.Now(), members: make([]*member, len(w.members)), visible: make([]bool, len(w.members))}
	w.mu.Lock()
	v.reach = make([]bool, len(w.members))
	for i := range w.members {
		if w.cuts[i] > 0 || w.apiAway[i] {
			v.away++
		}
		v.reach[i] = w.cuts[i] == 0 && !w.apiDown[i]
		v.visible[i] = v.reach[i] && time.Since(w.seenFrom[i]) > settle
	}
	down := slices.Clone(w.apiDown)
	w.mu.Unlock()
	for i := range w.members {
		if down[i] {
			continue
		}
		if m, err := w.read(ctx, i); err == nil {
			v.members[i] = m
		} else {
			v.visible[i] = false
		}
	}
	return v
}

// --- invariants ---

func (w *world) violate(kind, detail string) {
	w.mu.Lock()
	recent := w.faultLog[max(0, len(w.faultLog)-4):]
	msg := fmt.Sprintf("[%6.1fs] VIOLATION %s: %s (seed %d; last faults: %s)", time.Since(w.began).Seconds(), kind, detail, w.seed, strings.Join(recent, " | "))
	w.violations = append(w.violations, msg)
	w.mu.Unlock()
	w.t.Log(msg)
}

func (w *world) check(kind string) {
	w.mu.Lock()
	w.checks[kind]++
	w.mu.Unlock()
}

func (w *world) recentlyInvalidated(k string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.invalidated[k]
	return ok && now.Sub(at) < invalidatedFor
}

// exportedByVisible reports whether some member the importer can see
// exports k validly in both readings.
func exportedByVisible(prev, cur view, k string) bool {
	for i, m := range cur.members {
		if !cur.visible[i] || !prev.visible[i] || m == nil || prev.members[i] == nil {
			continue
		}
		if len(validExports([]*member{m}, k)) > 0 && len(validExports([]*member{prev.members[i]}, k)) > 0 {
			return true
		}
	}
	return false
}

func (w *world) checkLoop(ctx context.Context) {
	var prev view
	// disruptedSince: the start of the disruption in progress, or of the
	// last one, which ended at disruptedUntil (zero while it lasts).
	var disruptedSince, disruptedUntil time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		cur := w.look(ctx)
		if ctx.Err() != nil {
			return
		}
		w.record(cur)
		// A disruption that ends and begins again within settle may be
		// one to the importer (it sees members again only after a
		// probe and a relist): its --max-disruption runs from the first.
		if cur.away*2 > len(w.members) {
			if disruptedSince.IsZero() || (!disruptedUntil.IsZero() && cur.at.Sub(disruptedUntil) > settle) {
				disruptedSince = cur.at
				w.markUpheaval()
			}
			disruptedUntil = time.Time{}
		} else if !disruptedSince.IsZero() && disruptedUntil.IsZero() {
			disruptedUntil = cur.at
		}
		inDisruption := !disruptedSince.IsZero() && disruptedUntil.IsZero()
		if prev.members != nil {
			w.checkStable(prev, cur)
			// The importer counts a cut member as unreachable when a
			// probe times out (at least 5 s) and the next
			// decision runs: both readings must be past that (a member
			// whose grace period ends before may be withdrawn, rightly),
			// and within the time a disruption stops withdrawals.
			if inDisruption && prev.at.Sub(disruptedSince) > noticeDisruption && cur.at.Sub(disruptedSince) < maxDisruption {
				w.checkNothingWithdrawn(prev, cur)
			}
		}
		prev = cur
	}
}

// checkStable: an import of a service some member the importer can see
// exports is never deleted or re-created, and a ClusterSetIP import's VIP
// never changes, in any member the importer can see.
func (w *world) checkStable(prev, cur view) {
	for i, m := range cur.members {
		p := prev.members[i]
		if m == nil || p == nil || !cur.visible[i] || !prev.visible[i] {
			continue
		}
		for k, was := range p.imports {
			if w.recentlyInvalidated(k, cur.at) || !exportedByVisible(prev, cur, k) || !m.namespaces[was.Namespace] {
				continue
			}
			w.check("import-stable")
			now := m.imports[k]
			switch {
			case now == nil:
				w.violate("import-deleted", fmt.Sprintf("%s: import %s deleted while a visible member exports it", m.id, k))
			case now.UID != was.UID:
				w.violate("import-recreated", fmt.Sprintf("%s: import %s re-created (uid %s -> %s)", m.id, k, was.UID, now.UID))
			case was.Spec.Type == mcsv1beta1.ClusterSetIP && now.Spec.Type == mcsv1beta1.ClusterSetIP &&
				len(was.Spec.IPs) > 0 && len(now.Spec.IPs) > 0 && !slices.Equal(was.Spec.IPs, now.Spec.IPs):
				w.check("vip-stable")
				w.violate("vip-changed", fmt.Sprintf("%s: import %s VIP %v -> %v", m.id, k, was.Spec.IPs, now.Spec.IPs))
			default:
				if now.Spec.Type == mcsv1beta1.ClusterSetIP && len(now.Spec.IPs) > 0 {
					w.check("vip-stable")
				}
			}
		}
	}
}

// checkNothingWithdrawn: while more than half the members cannot be seen,
// no import goes and no import loses a cluster, in any member.
func (w *world) checkNothingWithdrawn(prev, cur view) {
	for i, m := range cur.members {
		p := prev.members[i]
		if m == nil || p == nil {
			continue
		}
		for k, was := range p.imports {
			if w.recentlyInvalidated(k, cur.at) {
				continue
			}
			w.check("no-withdrawal-in-disruption")
			now := m.imports[k]
			if now == nil {
				w.violate("withdrawn-in-disruption", fmt.Sprintf("%s: import %s deleted while %d of %d members cannot be seen", m.id, k, cur.away, len(w.members)))
				continue
			}
			for _, c := range was.Status.Clusters {
				if !slices.ContainsFunc(now.Status.Clusters, func(x mcsv1beta1.ClusterStatus) bool { return x.Cluster == c.Cluster }) {
					w.violate("withdrawn-in-disruption", fmt.Sprintf("%s: import %s lost cluster %s while %d of %d members cannot be seen", m.id, k, c.Cluster, cur.away, len(w.members)))
				}
			}
		}
	}
}

// record keeps what DNS may answer: each member's imports' VIPs and ready
// mirrored endpoints, and when each address was last listed ready at its
// source.
func (w *world) record(v view) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.members {
		st := w.reachable[i]
		switch {
		case v.reach[i] && len(st) > 0 && st[len(st)-1].open:
			st[len(st)-1].to = v.at
		case v.reach[i]:
			w.reachable[i] = append(st, span{from: v.at, to: v.at, open: true})
		case len(st) > 0:
			st[len(st)-1].open = false
		}
	}
	for i, m := range v.members {
		if m == nil {
			continue
		}
		w.lastRead[m.id] = v.at
		if v.reach[i] {
			w.lastReach[m.id] = v.at
			if w.readyWhileReachable[m.id] == nil {
				w.readyWhileReachable[m.id] = map[string]map[string]time.Time{}
			}
			for k, srcs := range m.sources {
				if w.readyWhileReachable[m.id][k] == nil {
					w.readyWhileReachable[m.id][k] = map[string]time.Time{}
				}
				for _, a := range readyAddresses(srcs) {
					w.readyWhileReachable[m.id][k][a] = v.at
				}
			}
		}
		for k, si := range m.imports {
			hk := m.id + "/" + k
			h := append(w.history[hk], observed{at: v.at, ips: si.Spec.IPs, ready: readyAddresses(m.mirrored[k])})
			for len(h) > 1 && v.at.Sub(h[0].at) > 3*dnsStaleness {
				h = h[1:]
			}
			w.history[hk] = h
		}
		for k, srcs := range m.sources {
			if w.sourceReady[k] == nil {
				w.sourceReady[k] = map[string]time.Time{}
				w.listedBy[k] = map[string]int{}
			}
			for _, a := range readyAddresses(srcs) {
				w.sourceReady[k][a] = v.at
				w.listedBy[k][a] = i
			}
		}
	}
}

// dnsLoop asks every member's CoreDNS, over UDP and TCP, for names its
// member's imports hold: the answer must be what the member's objects say
// within dnsStaleness, never an address no exporting member listed ready
// within the grace period (plus the staleness bound), and never SERVFAIL.
func (w *world) dnsLoop(ctx context.Context) {
	networks := []string{"udp", "tcp"}
	for round := 0; ; round++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		for i, d := range w.dns {
			hk, ok := w.sample(w.members[i].Name)
			if !ok {
				continue
			}
			_, k, _ := strings.Cut(hk, "/")
			ns, name, _ := strings.Cut(k, "/")
			qname := name + "." + ns + ".svc.clusterset.local."
			network := networks[round%2]
			resp, err := procs.Query(d.Addr, network, qname, dns.TypeA)
			if err != nil {
				continue // a timeout on a loaded machine is not an answer
			}
			w.check("dns-" + network)
			w.checkAnswer(ctx, i, hk, k, qname, resp)
		}
	}
}

func (w *world) sample(id string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var keys []string
	for hk := range w.history {
		if strings.HasPrefix(hk, id+"/") {
			keys = append(keys, hk)
		}
	}
	if len(keys) == 0 {
		return "", false
	}
	sort.Strings(keys)
	return keys[w.rng.IntN(len(keys))], true
}

func (w *world) checkAnswer(ctx context.Context, i int, hk, k, qname string, resp *dns.Msg) {
	if resp.Rcode == dns.RcodeServerFailure {
		w.violate("dns-servfail", qname+" answered SERVFAIL")
		return
	}
	var got []string
	for _, rr := range resp.Answer {
		if a, ok := rr.(*dns.A); ok {
			got = append(got, a.A.String())
		}
	}
	now := time.Now()
	w.mu.Lock()
	allowed := map[string]bool{}
	id, _, _ := strings.Cut(hk, "/")
	for _, o := range w.history[hk] {
		// What the objects said within the bound, or say still (the
		// member's latest reading, however old: its API server may be
		// stopped, its objects unchanged).
		if now.Sub(o.at) <= dnsStaleness+time.Second || o.at.Equal(w.lastRead[id]) {
			for _, a := range o.ips {
				allowed[a] = true
			}
			for _, a := range o.ready {
				allowed[a] = true
			}
		}
	}
	// This member itself away from the importers, or just back: what
	// they last wrote there while they could.
	awayHere, wroteUntil := false, time.Time{}
	switch {
	case w.cuts[i] > 0 || w.apiDown[i]:
		awayHere, wroteUntil = true, w.lastReach[id]
	case now.Sub(w.seenFrom[i]) <= settle:
		awayHere, wroteUntil = true, w.reachedUntil[i]
	}
	var unlisted []string
	for _, a := range got {
		if strings.HasPrefix(a, "10.96.") {
			continue // a VIP: checked against the import above
		}
		// A member the importer cannot use (unreachable, partly
		// revoked, not seen yet by a new leader) has its last known
		// state served for up to the grace period: the bound is that
		// long.
		if t, ok := w.sourceReady[k][a]; ok && now.Sub(t) <= sourceStaleness {
			continue
		}
		// This member itself cut off from the importers (or just seen
		// again): its objects, and so its CoreDNS, say what the
		// importers last wrote there while they could.
		if t, ok := w.sourceReady[k][a]; ok && awayHere && wroteUntil.Sub(t) <= sourceStaleness {
			continue
		}
		// Left stale by a write that could not be made, then held by a
		// new leader that has not seen its source yet, or through a
		// disruption: served until the importers could see both ends
		// for a while, which they have not since.
		if t, ok := w.sourceReady[k][a]; ok && w.upheavalSince(t) && !w.flushedSince(i, w.listedBy[k][a], t) {
			continue
		}
		// Listed by a member the importers cannot see (or have just seen
		// again) when they last could: its last known state is served.
		held := false
		for j, c := range w.members {
			away := w.cuts[j] > 0 || w.apiDown[j] || now.Sub(w.seenFrom[j]) <= settle
			if t, ok := w.readyWhileReachable[c.Name][k][a]; ok && away && w.lastReach[c.Name].Sub(t) <= settle {
				held = true
			}
		}
		if !held {
			unlisted = append(unlisted, a)
		}
	}
	w.mu.Unlock()
	for _, a := range got {
		if allowed[a] {
			continue
		}
		// The answer may be newer than the last reading: read again.
		if m, err := w.read(ctx, i); err == nil {
			if si := m.imports[k]; si != nil {
				for _, b := range append(slices.Clone(si.Spec.IPs), readyAddresses(m.mirrored[k])...) {
					allowed[b] = true
				}
			}
		}
		if !allowed[a] {
			w.violate("dns-stale", fmt.Sprintf("%s answered %s, which the member's objects have not said within %s (answer %v)", qname, a, dnsStaleness, got))
			return
		}
	}
	if len(unlisted) > 0 {
		// The sources may have changed since the last reading (the
		// importer and CoreDNS are quicker than a reading of every
		// member): read them again.
		var still []string
		for _, a := range unlisted {
			listed := false
			for j := range w.members {
				if m, err := w.read(ctx, j); err == nil && slices.Contains(readyAddresses(m.sources[k]), a) {
					listed = true
					break
				}
			}
			if !listed {
				still = append(still, a)
			}
		}
		unlisted = still
	}
	if len(unlisted) > 0 {
		w.mu.Lock()
		last := map[string]string{}
		for _, a := range unlisted {
			if t, ok := w.sourceReady[k][a]; ok {
				last[a] = fmt.Sprintf("%.1fs", t.Sub(w.began).Seconds())
			}
		}
		w.mu.Unlock()
		w.violate("dns-unlisted", fmt.Sprintf("%s answered %v in %s, which no exporting member listed ready (last listed ready at %v)", qname, unlisted, w.members[i].Name, last))
	}
}

// awaitModel waits until every member matches the model.
func (w *world) awaitModel(bound time.Duration) (bool, []string) {
	deadline := time.Now().Add(bound)
	var last []string
	for time.Now().Before(deadline) {
		v := w.look(context.Background())
		complete := true
		for _, m := range v.members {
			complete = complete && m != nil
		}
		if complete {
			w.check("model")
			if last = diff(v.members); len(last) == 0 {
				return true, nil
			}
		}
		time.Sleep(time.Second)
	}
	return false, last
}

// writesQuiet: once converged and quiet, the leader writes nothing.
func (w *world) writesQuiet() {
	var l int
	for range 30 {
		if l = w.leader(); l >= 0 {
			break
		}
		time.Sleep(time.Second)
	}
	if l < 0 {
		w.violate("no-leader", "no replica leads after the faults healed")
		return
	}
	w.mu.Lock()
	addr := w.replicas[l].addr
	w.mu.Unlock()
	// Statuses follow answers by about a second; then nothing moves.
	time.Sleep(5 * time.Second)
	before := metric(addr, "mcs_importer_writes_total")
	time.Sleep(15 * time.Second)
	after := metric(addr, "mcs_importer_writes_total")
	w.check("quiet-writes")
	if after != before {
		w.violate("writes-when-quiet", fmt.Sprintf("the leader wrote %.0f times in 15 s once converged", after-before))
	}
}

func (w *world) report(converge time.Duration, converged bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	line := func(m map[string]int) string {
		var keys []string
		total := 0
		for k, v := range m {
			keys = append(keys, fmt.Sprintf("%s %d", k, v))
			total += v
		}
		sort.Strings(keys)
		return fmt.Sprintf("%d (%s)", total, strings.Join(keys, ", "))
	}
	conv := "not reached"
	if converged {
		conv = converge.Round(100 * time.Millisecond).String()
	}
	w.t.Logf("chaos report: seed %d, %d members, %s\n  faults injected: %s\n  workload ops: %s\n  invariant checks: %s\n  convergence after the last fault healed: %s (bound %s)\n  violations: %d\n  replay: %s",
		w.seed, len(w.members), time.Since(w.began).Round(time.Second), line(w.faults), line(w.ops), line(w.checks), conv, convergeBound, len(w.violations), w.replay)
}

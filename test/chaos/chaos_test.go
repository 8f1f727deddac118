package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/deploy/crds"
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
	// accessCheckInterval: how often the importers check their access in
	// full (2 min by default): short, so that a revocation that has not
	// shown in a refused request yet is noticed within most of them.
	accessCheckInterval = 5 * time.Second
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

// chaosClusterSetCIDR is the clusterset CIDR of CHAOS_VIP_MODE=clusterset-cidr:
// within the production Corefile's 10.250.0.0/16 (its reverse zone),
// outside every member's Service range and the workload's endpoints, and
// small enough that released addresses are given again within a run.
var chaosClusterSetCIDR = netip.MustParsePrefix("10.250.0.0/24")

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
	var cidr netip.Prefix
	switch mode := os.Getenv("CHAOS_VIP_MODE"); mode {
	case "", "derived-service":
	case "clusterset-cidr":
		cidr = chaosClusterSetCIDR
	default:
		t.Fatalf("CHAOS_VIP_MODE=%q: derived-service or clusterset-cidr", mode)
	}
	replay := fmt.Sprintf("CHAOS_SEED=%d CHAOS_MEMBERS=%d CHAOS_DURATION=%s make chaos", seed, n, duration)
	if cidr.IsValid() {
		replay = "CHAOS_VIP_MODE=clusterset-cidr " + replay
	}
	t.Logf("chaos: seed %d, %d members, %s of faults (replay: %s)", seed, n, duration, replay)

	w := newWorld(t, seed, n)
	w.replay = replay
	w.clusterSetCIDR = cidr
	if dir := os.Getenv("CHAOS_LOG_DIR"); dir != "" {
		w.logDir = filepath.Join(dir, strconv.FormatUint(seed, 10))
		if err := os.MkdirAll(w.logDir, 0o755); err != nil {
			t.Fatalf("CHAOS_LOG_DIR: %v", err)
		}
		t.Logf("importer logs in %s", w.logDir)
	}
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
	w.rechecks.Wait()
	if !converged {
		w.violate("convergence", fmt.Sprintf("members differ from the model %s after the last fault healed: %s", convergeBound, strings.Join(last, "; ")))
	} else {
		w.dnsMatches()
		w.writesQuiet()
	}
	w.loggedVIPChanges()
	w.report(took, converged)
	if len(w.violations) > 0 {
		t.Errorf("%d invariant violations; replay with: %s", len(w.violations), replay)
	}
}

// world is the system under test and what the test knows of it.
type world struct {
	t      *testing.T
	seed   uint64
	replay string
	// clusterSetCIDR: where VIPs come from under
	// --vip-mode=clusterset-cidr (invalid: --vip-mode=derived-service).
	clusterSetCIDR netip.Prefix
	began          time.Time
	members        []*cluster.Cluster
	proxies        []*netcut.Proxy
	// kubeconfig reaches the members through the proxies (the
	// importers'); direct does not (CoreDNS's, the Lease's, the test's).
	kubeconfig, direct string
	importerBin        string

	// Each stream draws from its own generator, seeded from the seed, so
	// that the faults drawn (kinds, members, durations) are the same on
	// a replay whatever the workload and the DNS checks drew meanwhile.
	faultDraws, workDraws, dnsDraws *draws

	mu   sync.Mutex
	cuts []int // active cuts per member
	// apiDown: the API server is being stopped, is stopped, or is being
	// started (not read); apiAway: it is stopped for sure (from the stop's
	// return to the start's call), the only time it counts as away: the
	// importer may reach a starting one before StartAPIServer returns.
	apiDown, apiAway []bool
	seenFrom         []time.Time // when each member last became reachable again
	replicas         [2]*replica
	// importers: every importer process started, for the report's
	// count of what they logged; logDir (CHAOS_LOG_DIR) keeps their
	// output in files, of passing runs too.
	importers []*procs.Process
	logDir    string
	dns       []*procs.CoreDNS
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
	// crdsGone: while each member's MCS CRDs are deleted (and for
	// invalidatedFor after they are back), else nil.
	crdsGone []*span
	// revoked: the importers' access to each member taken away (part of
	// its RBAC, or its token), counted as cuts are: the importers cannot
	// use the member, but it does not count towards a disruption (a
	// refusal is not evidence of a broken network).
	revoked []int
	// tokenSecret: the Secret each member's importer token is bound to
	// (deleting it revokes the token); tokenDir holds the token files
	// the importers' kubeconfig names.
	tokenSecret []string
	tokenGen    []int
	tokenDir    string
	// apiUpAt: when each member's API server last answered again after
	// a stop (its CoreDNS resumes from there).
	apiUpAt []time.Time
	// readBeforeStop: each member's last reading before its API server
	// was last stopped.
	readBeforeStop []time.Time
	// latest: each member's latest reading (nil before the first).
	latest []*member
	// rechecks: answers asked again later (recheckStale).
	rechecks sync.WaitGroup
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
	w := &world{t: t, seed: seed, began: time.Now(),
		faultDraws: newDraws(seed, 1), workDraws: newDraws(seed, 2), dnsDraws: newDraws(seed, 3),
		invalidated: map[string]time.Time{}, faults: map[string]int{}, ops: map[string]int{}, checks: map[string]int{},
		history: map[string][]observed{}, sourceReady: map[string]map[string]time.Time{}, lastRead: map[string]time.Time{},
		readyWhileReachable: map[string]map[string]map[string]time.Time{}, lastReach: map[string]time.Time{}}
	var specs []cluster.Spec
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		// Cluster IDs differ from the context names, so that a member
		// renamed after its context would be seen.
		specs = append(specs, cluster.Spec{Name: name, ClusterID: clusterID(i), IPv4Only: true})
	}
	set := cluster.Start(t, specs...)
	w.members = set.Clusters
	w.direct = set.Kubeconfig
	w.cuts, w.apiDown, w.apiAway, w.seenFrom = make([]int, n), make([]bool, n), make([]bool, n), make([]time.Time, n)
	w.reachedUntil = make([]time.Time, n)
	w.reachable, w.listedBy = make([][]span, n), map[string]map[string]int{}
	w.crdsGone = make([]*span, n)
	w.revoked, w.tokenSecret, w.tokenGen = make([]int, n), make([]string, n), make([]int, n)
	w.tokenDir = t.TempDir()
	w.apiUpAt, w.readBeforeStop, w.latest = make([]time.Time, n), make([]time.Time, n), make([]*member, n)
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
	// The importers are the member role's ServiceAccount (deploy/member),
	// with a token file each, which client-go reads again when the API
	// server refuses the token it has.
	for i, c := range w.members {
		w.installMemberRole(c)
		if err := w.mintToken(context.Background(), i); err != nil {
			t.Fatal(err)
		}
		kc.AuthInfos[c.Name] = &clientcmdapi.AuthInfo{TokenFile: w.tokenFile(i)}
		kc.Contexts[c.Name].AuthInfo = c.Name
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

// clusterID is the i-th member's cluster ID.
func clusterID(i int) string { return fmt.Sprintf("id%d", i) }

const (
	memberNamespace      = "mcs-dns-system"
	memberServiceAccount = "mcs-importer-member"
	memberRole           = "mcs-dns:importer"
)

// installMemberRole creates the importer's ServiceAccount, ClusterRole and
// ClusterRoleBinding of deploy/member/rbac.yaml in c.
func (w *world) installMemberRole(c *cluster.Cluster) {
	raw, err := os.ReadFile("../../deploy/member/rbac.yaml")
	if err != nil {
		w.t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: memberNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		w.t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			w.t.Fatalf("deploy/member/rbac.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = c.Kube.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = c.Kube.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		default:
			continue // the leader election Role: the Lease is reached as admin here
		}
		if err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *world) tokenFile(i int) string {
	return fmt.Sprintf("%s/%s.token", w.tokenDir, w.members[i].Name)
}

// mintToken makes a new token for member i's importer ServiceAccount,
// bound to a Secret of its own (deleting the Secret revokes the token),
// and puts it in the token file, in one rename.
func (w *world) mintToken(ctx context.Context, i int) error {
	c := w.members[i]
	w.mu.Lock()
	name := fmt.Sprintf("chaos-importer-token-%d", w.tokenGen[i])
	w.tokenGen[i]++
	w.mu.Unlock()
	sec, err := c.Kube.CoreV1().Secrets(memberNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	tr, err := c.Kube.CoreV1().ServiceAccounts(memberNamespace).CreateToken(ctx, memberServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](24 * 3600),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: name, UID: sec.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	tmp := w.tokenFile(i) + ".new"
	if err := os.WriteFile(tmp, []byte(tr.Status.Token), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, w.tokenFile(i)); err != nil {
		return err
	}
	w.mu.Lock()
	w.tokenSecret[i] = name
	w.mu.Unlock()
	return nil
}

// cutOff reports whether the importers cannot use member i: its proxy
// cut, or its access revoked (under mu).
func (w *world) cutOff(i int) bool { return w.cuts[i] > 0 || w.revoked[i] > 0 }

func (w *world) logf(format string, args ...any) {
	w.t.Logf("[%6.1fs] %s", time.Since(w.began).Seconds(), fmt.Sprintf(format, args...))
}

// draws is one stream of random draws.
type draws struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newDraws(seed, stream uint64) *draws {
	return &draws{r: rand.New(rand.NewPCG(seed, stream*0x9e3779b97f4a7c15))}
}

func (d *draws) intn(n int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.r.IntN(n)
}

func (d *draws) perm(n int) []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.r.Perm(n)
}

func (d *draws) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(d.intn(int(hi-lo)/int(time.Millisecond)+1))*time.Millisecond
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
	name := fmt.Sprintf("mcs-importer-%d", i)
	logPath := ""
	if w.logDir != "" {
		w.mu.Lock()
		logPath = filepath.Join(w.logDir, fmt.Sprintf("%s.%d.log", name, len(w.importers)))
		w.mu.Unlock()
	}
	args := []string{"--kubeconfig", w.kubeconfig, "--contexts", w.contexts(), "--metrics-addr", addr,
		"--endpoint-grace-period", grace.String(), "--health-probe-interval", probeInterval.String(), "--health-access-check-interval", accessCheckInterval.String(),
		"--connect-timeout", "5s", "--max-disruption", maxDisruption.String(),
		"--leader-elect", "--leader-elect-kubeconfig", w.direct, "--leader-elect-context", w.members[0].Name,
		"--leader-elect-namespace", "kube-system", "--leader-elect-name", "mcs-importer-chaos",
		"--leader-elect-lease-duration", "6s", "--leader-elect-renew-deadline", "4s", "--leader-elect-retry-period", "1s"}
	if w.clusterSetCIDR.IsValid() {
		args = append(args, "--vip-mode", "clusterset-cidr", "--clusterset-cidr", w.clusterSetCIDR.String(), "--clusterset-ip-default")
	}
	p := procs.StartLogged(w.t, name, logPath, w.importerBin, args...)
	w.mu.Lock()
	w.replicas[i] = &replica{p: p, addr: addr}
	w.importers = append(w.importers, p)
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
// startDNS starts one CoreDNS per member with the production Corefile
// (corefile-examples/production.Corefile), pointed at the member: a
// kubeconfig line, free ports for health, ready and metrics, and the
// reverse zone of the addresses the test uses (10.0.0.0/8: the members'
// Service range and the workload's endpoints).
func (w *world) startDNS() {
	bin := procs.CoreDNSBinary(w.t)
	raw, err := os.ReadFile(filepath.Join("..", "..", "corefile-examples", "production.Corefile"))
	if err != nil {
		w.t.Fatal(err)
	}
	prod := string(raw)
	if !strings.Contains(prod, "250.10.in-addr.arpa") || !mcsBlock.MatchString(prod) {
		w.t.Fatalf("production.Corefile has no mcs block for 250.10.in-addr.arpa to point at the members")
	}
	prod = strings.ReplaceAll(prod, "250.10.in-addr.arpa", "10.in-addr.arpa")
	for _, c := range w.members {
		corefile := mcsBlock.ReplaceAllString(prod, "$0\n$1    kubeconfig "+w.direct+" "+c.Name)
		corefile = fixedPorts.ReplaceAllStringFunc(corefile, func(string) string {
			return "127.0.0.1:" + strconv.Itoa(procs.FreePort(w.t))
		})
		w.dns = append(w.dns, procs.StartCoreDNS(w.t, bin, corefile))
	}
}

var (
	mcsBlock   = regexp.MustCompile(`(?m)^(\s*)mcs\b[^{\n]*\{[ \t]*$`)
	fixedPorts = regexp.MustCompile(`:(8080|8181|9153)\b`)
)

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
		case <-time.After(w.faultDraws.between(2*time.Second, 6*time.Second)):
		}
		switch r := w.faultDraws.intn(100); {
		case r < 30:
			i, d := w.faultDraws.intn(len(w.members)), w.faultDraws.between(3*time.Second, 30*time.Second)
			faults.Go(func() { w.cut("cut", []int{i}, d) })
		case r < 38:
			k := 2 + w.faultDraws.intn(len(w.members)-1)
			perm, d := w.faultDraws.perm(len(w.members))[:k], w.faultDraws.between(5*time.Second, 30*time.Second)
			faults.Go(func() { w.cut("cut-many", perm, d) })
		case r < 54:
			i := 1 + w.faultDraws.intn(len(w.members)-1) // m0 holds the Lease: see RELIABILITY.md
			d := w.faultDraws.between(3*time.Second, 15*time.Second)
			faults.Go(func() { w.restartAPIServer(i, d) })
		case r < 66:
			d := w.faultDraws.between(time.Second, 3*time.Second)
			faults.Go(func() { w.killLeader(d) })
		case r < 72:
			i, d := w.faultDraws.intn(len(w.members)), w.faultDraws.between(3*time.Second, 30*time.Second)
			faults.Go(func() { w.dropClusterID(i, d) })
		case r < 78:
			i, d := w.faultDraws.intn(len(w.members)), w.faultDraws.between(3*time.Second, 20*time.Second)
			faults.Go(func() { w.dropCRDs(i, d) })
		case r < 85:
			i := w.faultDraws.intn(len(w.members))
			res := revocable[w.faultDraws.intn(len(revocable))]
			d := w.faultDraws.between(3*time.Second, 30*time.Second)
			faults.Go(func() { w.revokeAccess(i, res, d) })
		case r < 91:
			i, overlap := w.faultDraws.intn(len(w.members)), w.faultDraws.between(0, 3*time.Second)
			faults.Go(func() { w.replaceToken(i, overlap) })
		default:
			i := w.faultDraws.intn(2)
			faults.Go(func() { w.restartReplica(i) })
		}
	}
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
			if !w.cutOff(i) {
				w.back(i)
			}
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
	w.mu.Lock()
	w.readBeforeStop[i] = w.lastRead[c.Name]
	w.mu.Unlock()
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
	w.logf("%s's API server answers again", c.Name)
	w.mu.Lock()
	w.apiDown[i] = false
	w.apiUpAt[i] = time.Now()
	w.back(i)
	w.mu.Unlock()
}

// dropClusterID deletes member i's ClusterProperty for d, then makes it
// again with the same value. A member the importers join meanwhile (a new
// leader, a restarted replica, an API server back) keeps the ID it had:
// nothing of it is renamed after its context (checked by checkNames).
func (w *world) dropClusterID(i int, d time.Duration) {
	c := w.members[i]
	w.fault("clusterproperty-delete", "%s's ClusterProperty %s deleted for %s", c.Name, mcsapi.ClusterIDProperty, d.Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	try := func(f func() error) {
		// Its API server may be away meanwhile: try until it answers.
		_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) { return f() == nil, nil })
	}
	try(func() error {
		err := c.Dynamic.Resource(mcsapi.ClusterPropertyGVR).Delete(ctx, mcsapi.ClusterIDProperty, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	time.Sleep(d)
	try(func() error { return c.SetClusterID(ctx, clusterID(i)) })
}

// dropCRDs deletes member i's MCS CRDs (and so every ServiceExport and
// ServiceImport it holds) for d, then installs them again. Its exports are
// unexports, withdrawn at once; its imports come back once the CRDs do,
// made anew (checkStable leaves the member out meanwhile).
func (w *world) dropCRDs(i int, d time.Duration) {
	c := w.members[i]
	w.mu.Lock()
	if w.crdsGone[i] != nil {
		w.mu.Unlock()
		return
	}
	gone := &span{from: time.Now(), open: true}
	w.crdsGone[i] = gone
	w.mu.Unlock()
	w.fault("crds-delete", "%s's MCS CRDs deleted for %s", c.Name, d.Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ext, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		w.t.Error(err)
		return
	}
	all, err := crds.All()
	if err != nil {
		w.t.Error(err)
		return
	}
	try := func(f func() error) {
		_ = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(context.Context) (bool, error) { return f() == nil, nil })
	}
	// What it exports may be withdrawn from every member at once.
	try(func() error {
		exps, err := c.MCS.MulticlusterV1beta1().ServiceExports("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range exps.Items {
			w.invalidate(key(e.Namespace, e.Name))
		}
		return nil
	})
	for _, crd := range all {
		if crd.Spec.Group != mcsapi.Group {
			continue
		}
		try(func() error {
			err := ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	}
	time.Sleep(d)
	for _, crd := range all {
		if crd.Spec.Group != mcsapi.Group {
			continue
		}
		crd = crd.DeepCopy()
		// AlreadyExists while the old one is still being deleted.
		try(func() error {
			_, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
			return err
		})
	}
	w.mu.Lock()
	gone.to, gone.open = time.Now(), false
	w.mu.Unlock()
	time.AfterFunc(invalidatedFor, func() {
		w.mu.Lock()
		w.crdsGone[i] = nil
		w.mu.Unlock()
	})
}

// revocable are the resources revokeAccess takes away, one at a time.
var revocable = []string{"endpointslices", "services", "serviceexports"}

// revokeAccess takes the importers' access to one resource of member i
// away for d (the member role loses its rule), then gives it back. The
// importers must count the member as unusable (its last known state
// served, withdrawn after the grace period), not as up with frozen data.
func (w *world) revokeAccess(i int, resource string, d time.Duration) {
	c := w.members[i]
	w.mu.Lock()
	if w.revoked[i] > 0 {
		w.mu.Unlock()
		return
	}
	w.revoked[i]++
	w.mu.Unlock()
	w.fault("rbac-revoke", "%s: the importers' access to %s revoked for %s", c.Name, resource, d.Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	roles := c.Kube.RbacV1().ClusterRoles()
	var orig []rbacv1.PolicyRule
	retryUntil(ctx, func() error {
		role, err := roles.Get(ctx, memberRole, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if orig == nil {
			orig = role.Rules
		}
		role.Rules = slices.DeleteFunc(slices.Clone(role.Rules), func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.Resources, resource)
		})
		_, err = roles.Update(ctx, role, metav1.UpdateOptions{})
		return err
	})
	time.Sleep(d)
	retryUntil(ctx, func() error {
		role, err := roles.Get(ctx, memberRole, metav1.GetOptions{})
		if err != nil {
			return err
		}
		role.Rules = orig
		_, err = roles.Update(ctx, role, metav1.UpdateOptions{})
		return err
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.revoked[i]--; !w.cutOff(i) {
		w.back(i)
	}
}

// replaceToken rotates member i's importer token: a new one in the token
// file, then (a moment later, as a rotation does) the old one revoked.
// The importers must go on with the new one by themselves.
func (w *world) replaceToken(i int, overlap time.Duration) {
	c := w.members[i]
	w.fault("token-replace", "%s: the importers' token replaced and the old one revoked", c.Name)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w.mu.Lock()
	old := w.tokenSecret[i]
	w.mu.Unlock()
	retryUntil(ctx, func() error { return w.mintToken(ctx, i) })
	time.Sleep(overlap)
	// A request with the old token in flight may be refused once, until
	// client-go reads the file again: the member may be unusable for a
	// probe or two.
	w.mu.Lock()
	w.revoked[i]++
	w.mu.Unlock()
	retryUntil(ctx, func() error {
		err := c.Kube.CoreV1().Secrets(memberNamespace).Delete(ctx, old, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	time.Sleep(3 * probeInterval)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.revoked[i]--; !w.cutOff(i) {
		w.back(i)
	}
}

// retryUntil calls f every half second until it succeeds or ctx ends (a
// member's API server may be away meanwhile).
func retryUntil(ctx context.Context, f func() error) {
	_ = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(context.Context) (bool, error) { return f() == nil, nil })
}

// crdsAway reports whether member i's MCS CRDs were deleted, or have
// just come back, at t (its imports may be gone or made anew then).
func (w *world) crdsAway(i int, t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := w.crdsGone[i]
	return g != nil && !t.Before(g.from.Add(-time.Second)) && (g.open || t.Sub(g.to) < invalidatedFor)
}

func (w *world) setAPIAway(i int, away bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.apiAway[i] = away
	if !away {
		w.back(i)
	}
}

func (w *world) killLeader(down time.Duration) {
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
	time.Sleep(down)
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
		case <-time.After(w.workDraws.between(300*time.Millisecond, 1200*time.Millisecond)):
		}
		opCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		switch r := w.workDraws.intn(100); {
		case r < 25:
			w.doExport(opCtx)
		case r < 35:
			w.doUnexport(opCtx)
		case r < 70:
			w.doEndpoints(opCtx)
		case r < 80:
			w.doFlipType(opCtx)
		case r < 89:
			w.doAffinity(opCtx)
		case r < 97:
			w.doPorts(opCtx)
		default:
			cancel()
			opCtx, cancel = context.WithTimeout(ctx, time.Minute)
			w.doNamespace(opCtx)
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
	i := up[w.workDraws.intn(len(up))]
	return i, w.members[i], namespaces[w.workDraws.intn(len(namespaces))], fmt.Sprintf("svc%d", w.workDraws.intn(servicesPerNamespace))
}

func (w *world) endpoints(i int, headless bool) []discoveryv1.Endpoint {
	n := 1 + w.workDraws.intn(3)
	var out []discoveryv1.Endpoint
	for j := range n {
		e := discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 100+i, w.workDraws.intn(250), 1+w.workDraws.intn(250))},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(w.workDraws.intn(4) != 0)},
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
		svc, err = svcs.Create(ctx, service(ns, name, w.workDraws.intn(3) == 0), metav1.CreateOptions{})
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

// doNamespace deletes a namespace in one member and makes it again.
// There is no namespace controller in the members: the test does its
// work (deletes what the namespace holds, then finalizes it) after a
// while in Terminating, in which the member must lose its imports there
// and its exports there must be withdrawn.
func (w *world) doNamespace(ctx context.Context) {
	i, c, ns, _ := w.pick()
	invalidateNS := func() {
		for j := range servicesPerNamespace {
			w.invalidate(key(ns, fmt.Sprintf("svc%d", j)))
		}
	}
	invalidateNS()
	defer invalidateNS()
	nss := c.Kube.CoreV1().Namespaces()
	if err := nss.Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return
	}
	w.logf("namespace %s deleted in %s (Terminating)", ns, w.members[i].Name)
	time.Sleep(w.workDraws.between(time.Second, 8*time.Second))
	invalidateNS()
	if err := w.emptyNamespace(ctx, c, ns); err != nil {
		return
	}
	n, err := nss.Get(ctx, ns, metav1.GetOptions{})
	if err == nil {
		n.Spec.Finalizers = nil
		if _, err := nss.Finalize(ctx, n, metav1.UpdateOptions{}); err != nil {
			return
		}
	} else if !apierrors.IsNotFound(err) {
		return
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := nss.Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		return
	}
	time.Sleep(w.workDraws.between(0, 5*time.Second))
	invalidateNS()
	if _, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err == nil {
		w.op("namespace-recreate")
		w.logf("namespace %s made again in %s", ns, w.members[i].Name)
	}
}

// emptyNamespace deletes what the namespace controller would: every
// object of the kinds the test and the importer write there.
func (w *world) emptyNamespace(ctx context.Context, c *cluster.Cluster, ns string) error {
	all := metav1.ListOptions{}
	return errors.Join(
		c.MCS.MulticlusterV1beta1().ServiceExports(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all),
		c.MCS.MulticlusterV1beta1().ServiceImports(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all),
		c.Kube.DiscoveryV1().EndpointSlices(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all),
		deleteServices(ctx, c, ns),
	)
}

// deleteServices deletes every Service in ns (Services have no
// DeleteCollection).
func deleteServices(ctx context.Context, c *cluster.Cluster, ns string) error {
	list, err := c.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range list.Items {
		if err := c.Kube.CoreV1().Services(ns).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// --- reading the members ---

func (w *world) read(ctx context.Context, i int) (*member, error) {
	c := w.members[i]
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m := &member{id: c.Name, cluster: clusterID(i), namespaces: map[string]bool{}, exports: map[string]*mcsv1beta1.ServiceExport{},
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
	// awayAtMost: members the importers may not reach now (a stopped API
	// server counts until it answers again, cut ones too).
	awayAtMost int
}

func (w *world) look(ctx context.Context) view {
	v := view{at: time.Now(), members: make([]*member, len(w.members)), visible: make([]bool, len(w.members))}
	w.mu.Lock()
	v.reach = make([]bool, len(w.members))
	for i := range w.members {
		if w.cuts[i] > 0 || w.apiAway[i] {
			v.away++
		}
		if w.cuts[i] > 0 || w.apiDown[i] {
			v.awayAtMost++
		}
		v.reach[i] = !w.cutOff(i) && !w.apiDown[i]
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
			w.mu.Lock()
			w.latest[i] = m
			w.mu.Unlock()
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
	// earliestSince: the same for a disruption counted from awayAtMost,
	// the earliest the importer may have seen one begin: a starting API
	// server is away to it until it answers, and a disruption that
	// includes one may have begun earlier, and reached --max-disruption
	// earlier, than the one counted for sure.
	var earliestSince, earliestUntil time.Time
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
		if cur.awayAtMost*2 > len(w.members) {
			if earliestSince.IsZero() || (!earliestUntil.IsZero() && cur.at.Sub(earliestUntil) > settle) {
				earliestSince = cur.at
			}
			earliestUntil = time.Time{}
		} else if !earliestSince.IsZero() && earliestUntil.IsZero() {
			earliestUntil = cur.at
		}
		inDisruption := !disruptedSince.IsZero() && disruptedUntil.IsZero()
		w.checkNames(cur)
		if prev.members != nil {
			w.checkStable(prev, cur)
			// The importer counts a cut member as unreachable when a
			// probe times out (at least 5 s) and the next
			// decision runs: both readings must be past that (a member
			// whose grace period ends before may be withdrawn, rightly),
			// and within the time a disruption stops withdrawals, from
			// the earliest it may have begun.
			if inDisruption && prev.at.Sub(disruptedSince) > noticeDisruption && cur.at.Sub(disruptedSince) < maxDisruption &&
				cur.at.Sub(earliestSince) < maxDisruption {
				w.checkNothingWithdrawn(prev, cur, disruptedSince)
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
		if m == nil || p == nil || !cur.visible[i] || !prev.visible[i] || w.crdsAway(i, prev.at) || w.crdsAway(i, cur.at) {
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
				w.violate("vip-changed", fmt.Sprintf("%s: import %s VIP %v -> %v (readings at %.1fs and %.1fs; clusters %v -> %v; resourceVersion %s -> %s; derived Service %q -> %q)",
					m.id, k, was.Spec.IPs, now.Spec.IPs, prev.at.Sub(w.began).Seconds(), cur.at.Sub(w.began).Seconds(),
					importClusters(was), importClusters(now), was.ResourceVersion, now.ResourceVersion,
					was.Annotations[mcsapi.AnnotationDerivedService], now.Annotations[mcsapi.AnnotationDerivedService]))
			default:
				if now.Spec.Type == mcsv1beta1.ClusterSetIP && len(now.Spec.IPs) > 0 {
					w.check("vip-stable")
				}
			}
		}
	}
}

func importClusters(si *mcsv1beta1.ServiceImport) []string {
	var out []string
	for _, c := range si.Status.Clusters {
		out = append(out, c.Cluster)
	}
	return out
}

// checkNames: the MCS objects name members by cluster ID only, never by
// a context name (a member whose ClusterProperty went must keep its ID).
func (w *world) checkNames(cur view) {
	ids := map[string]bool{}
	for i := range w.members {
		ids[clusterID(i)] = true
	}
	for _, m := range cur.members {
		if m == nil {
			continue
		}
		w.check("cluster-ids")
		for k, si := range m.imports {
			for _, c := range si.Status.Clusters {
				if !ids[c.Cluster] {
					w.violate("renamed", fmt.Sprintf("%s: import %s names cluster %q", m.id, k, c.Cluster))
				}
			}
		}
		for k, ss := range m.mirrored {
			for _, s := range ss {
				if c := s.Labels[mcsapi.LabelSourceCluster]; !ids[c] {
					w.violate("renamed", fmt.Sprintf("%s: mirrored slice %s of %s comes from cluster %q", m.id, s.Name, k, c))
				}
			}
		}
	}
}

// checkNothingWithdrawn: while more than half the members cannot be seen,
// no import goes and no import loses a cluster, in any member the
// importers could see at the earlier reading. A member they could not
// (cut off, or seen again within settle) is written, when it is back,
// what they decided while it was away: that may be a withdrawal decided
// before the disruption could be noticed (a member whose grace period
// ended just after the cut), which is right.
func (w *world) checkNothingWithdrawn(prev, cur view, since time.Time) {
	during := fmt.Sprintf("(the disruption began at %.1fs; readings at %.1fs and %.1fs)",
		since.Sub(w.began).Seconds(), prev.at.Sub(w.began).Seconds(), cur.at.Sub(w.began).Seconds())
	for i, m := range cur.members {
		p := prev.members[i]
		if m == nil || p == nil || !prev.visible[i] || w.crdsAway(i, prev.at) || w.crdsAway(i, cur.at) {
			continue
		}
		for k, was := range p.imports {
			if w.recentlyInvalidated(k, cur.at) || !m.namespaces[was.Namespace] {
				continue
			}
			w.check("no-withdrawal-in-disruption")
			now := m.imports[k]
			if now == nil && !w.stillExported(k, "") {
				continue // unexported everywhere: its members' own word, seen late
			}
			if now == nil {
				w.violate("withdrawn-in-disruption", fmt.Sprintf("%s: import %s deleted while %d of %d members cannot be seen %s", m.id, k, cur.away, len(w.members), during))
				continue
			}
			for _, c := range was.Status.Clusters {
				if !slices.ContainsFunc(now.Status.Clusters, func(x mcsv1beta1.ClusterStatus) bool { return x.Cluster == c.Cluster }) &&
					w.stillExported(k, c.Cluster) {
					w.violate("withdrawn-in-disruption", fmt.Sprintf("%s: import %s lost cluster %s while %d of %d members cannot be seen %s", m.id, k, c.Cluster, cur.away, len(w.members), during))
				}
			}
		}
	}
}

// stillExported reports whether the latest readings of the members (of
// the member with that cluster ID, when cluster is set) still export k
// validly. An unexport, or a Service gone, made while the importers could
// not see that member reaches the imports only once they can, however
// long after: dropping the cluster then is the member's own word, not a
// withdrawal. A member never read counts as exporting.
func (w *world) stillExported(k, cluster string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for j, m := range w.latest {
		if cluster != "" && clusterID(j) != cluster {
			continue
		}
		if m == nil || len(validExports([]*member{m}, k)) > 0 {
			return true
		}
	}
	return false
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
			switch round % 4 {
			case 0, 1:
				resp, err := procs.Query(d.Addr, network, qname, dns.TypeA)
				if err != nil {
					continue // a timeout on a loaded machine is not an answer
				}
				w.check("dns-a-" + network)
				if resp.Rcode == dns.RcodeNameError {
					at := time.Now()
					w.rechecks.Go(func() { w.recheckMissing(i, d.Addr, network, k, qname, at) })
				}
				w.checkAnswer(ctx, i, hk, k, qname, resp.Rcode, addresses(resp.Answer), asker(d.Addr, network, qname, dns.TypeA))
			case 2:
				w.checkSRV(ctx, i, d.Addr, network, hk, k, "_http._tcp."+qname)
			case 3:
				w.checkPTR(ctx, i, d.Addr, network, hk, k)
			}
		}
	}
}

// asker asks addr for name again: the addresses of the answer (of the
// additional section, for SRV, where the targets' addresses are).
func asker(addr, network, name string, qtype uint16) func() ([]string, error) {
	return func() ([]string, error) {
		r, err := procs.Query(addr, network, name, qtype)
		if err != nil {
			return nil, err
		}
		if qtype == dns.TypeSRV {
			return addresses(r.Extra), nil
		}
		return addresses(r.Answer), nil
	}
}

// addresses are the A records' addresses in rrs.
func addresses(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out
}

// checkSRV asks for the port's SRV records: their targets' addresses
// (the additional section) are checked as an A answer is; one target,
// a per-endpoint name for a Headless import, is asked for itself.
func (w *world) checkSRV(ctx context.Context, i int, addr, network, hk, k, qname string) {
	resp, err := procs.Query(addr, network, qname, dns.TypeSRV)
	if err != nil {
		return
	}
	w.check("dns-srv")
	w.checkAnswer(ctx, i, hk, k, qname, resp.Rcode, addresses(resp.Extra), asker(addr, network, qname, dns.TypeSRV))
	var targets []string
	for _, rr := range resp.Answer {
		srv, ok := rr.(*dns.SRV)
		if !ok {
			continue
		}
		if !strings.HasSuffix(srv.Target, strings.TrimPrefix(qname, "_http._tcp.")) {
			w.violate("dns-srv-target", fmt.Sprintf("%s: SRV target %s is not a name of the service", qname, srv.Target))
		}
		targets = append(targets, srv.Target)
	}
	if len(targets) == 0 {
		return
	}
	target := targets[w.dnsDraws.intn(len(targets))]
	resp, err = procs.Query(addr, network, target, dns.TypeA)
	if err != nil {
		return
	}
	w.check("dns-endpoint-a")
	w.checkAnswer(ctx, i, hk, k, target, resp.Rcode, addresses(resp.Answer), asker(addr, network, target, dns.TypeA))
}

// checkPTR asks for the PTR of an address the member's import of k or
// its mirrored slices held lately: never SERVFAIL, and a name it gives
// is k's (the service, or one of its endpoints) or that of another key
// whose objects held the address within the staleness bound (a released
// VIP given again).
func (w *world) checkPTR(ctx context.Context, i int, addr, network, hk, k string) {
	w.mu.Lock()
	var cands []string
	if h := w.history[hk]; len(h) > 0 {
		o := h[len(h)-1]
		cands = append(slices.Clone(o.ips), o.ready...)
	}
	var ip string
	if len(cands) > 0 {
		ip = cands[w.dnsDraws.intn(len(cands))]
	}
	w.mu.Unlock()
	if ip == "" {
		return
	}
	rev, err := dns.ReverseAddr(ip)
	if err != nil {
		return
	}
	resp, err := procs.Query(addr, network, rev, dns.TypePTR)
	if err != nil {
		return
	}
	w.check("dns-ptr")
	if resp.Rcode == dns.RcodeServerFailure {
		w.violate("dns-servfail", rev+" answered SERVFAIL")
		return
	}
	id := w.members[i].Name
	now := time.Now()
	for _, rr := range resp.Answer {
		ptr, ok := rr.(*dns.PTR)
		if !ok {
			continue
		}
		owner, ok := ptrKey(ptr.Ptr)
		if !ok {
			w.violate("dns-ptr", fmt.Sprintf("%s -> %s, not a name in clusterset.local", rev, ptr.Ptr))
			continue
		}
		if owner == k {
			continue
		}
		w.mu.Lock()
		held := false
		for _, o := range w.history[id+"/"+owner] {
			if now.Sub(o.at) <= dnsStaleness+time.Second || o.at.Equal(w.lastRead[id]) {
				held = held || slices.Contains(o.ips, ip) || slices.Contains(o.ready, ip)
			}
		}
		w.mu.Unlock()
		if !held {
			w.violate("dns-ptr", fmt.Sprintf("%s in %s -> %s, but %s's objects there have not held %s within %s", rev, id, ptr.Ptr, owner, ip, dnsStaleness))
		}
	}
}

// ptrKey is the "ns/name" of the service a PTR target names: the
// service itself (<svc>.<ns>.svc.clusterset.local.) or one of its
// endpoints (<host>.<cluster>.<svc>.<ns>.svc.clusterset.local.).
func ptrKey(target string) (string, bool) {
	rest, ok := strings.CutSuffix(target, ".svc.clusterset.local.")
	if !ok {
		return "", false
	}
	labels := strings.Split(rest, ".")
	if len(labels) != 2 && len(labels) != 4 {
		return "", false
	}
	return key(labels[len(labels)-1], labels[len(labels)-2]), true
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
	return keys[w.dnsDraws.intn(len(keys))], true
}

// isVIP reports whether address a is a VIP: in the members' Service
// range, or the clusterset CIDR, where no endpoint is.
func (w *world) isVIP(a string) bool {
	if strings.HasPrefix(a, "10.96.") {
		return true
	}
	ip, err := netip.ParseAddr(a)
	return err == nil && w.clusterSetCIDR.IsValid() && w.clusterSetCIDR.Contains(ip)
}

// checkAnswer checks the addresses got of an answer (rcode) to qname, a
// name of k, from member i's CoreDNS.
func (w *world) checkAnswer(ctx context.Context, i int, hk, k, qname string, rcode int, got []string, reask func() ([]string, error)) {
	if rcode == dns.RcodeServerFailure {
		w.violate("dns-servfail", qname+" answered SERVFAIL")
		return
	}
	now := time.Now()
	w.mu.Lock()
	allowed := map[string]bool{}
	id, _, _ := strings.Cut(hk, "/")
	// While the member's API server is stopped, and until its CoreDNS has
	// caught up after, that CoreDNS answers what it had when the server
	// stopped: up to the bound behind the last reading before.
	frozen := w.apiDown[i] || now.Sub(w.apiUpAt[i]) <= dnsStaleness+time.Second
	frozenFrom := w.readBeforeStop[i].Add(-dnsStaleness - time.Second)
	for _, o := range w.history[hk] {
		// What the objects said within the bound, or say still (the
		// member's latest reading, however old: its API server may be
		// stopped, its objects unchanged).
		if now.Sub(o.at) <= dnsStaleness+time.Second || o.at.Equal(w.lastRead[id]) ||
			(frozen && !o.at.Before(frozenFrom)) {
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
	case w.cutOff(i) || w.apiDown[i]:
		awayHere, wroteUntil = true, w.lastReach[id]
	case now.Sub(w.seenFrom[i]) <= settle:
		awayHere, wroteUntil = true, w.reachedUntil[i]
	}
	var unlisted []string
	for _, a := range got {
		if w.isVIP(a) {
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
			away := w.cutOff(j) || w.apiDown[j] || now.Sub(w.seenFrom[j]) <= settle
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
		now := "unread"
		if m, err := w.read(ctx, i); err != nil {
			if frozen {
				// Its API server is stopped: what it holds cannot be
				// read (it may be newer than the last reading), so
				// the answer is only checked against the sources
				// below.
				w.check("dns-unreadable")
				continue
			}
			now = "unread: " + err.Error()
		} else {
			now = "no import"
			if si := m.imports[k]; si != nil {
				now = fmt.Sprintf("import %s ips %v, ready %v", si.Spec.Type, si.Spec.IPs, readyAddresses(m.mirrored[k]))
				for _, b := range append(slices.Clone(si.Spec.IPs), readyAddresses(m.mirrored[k])...) {
					allowed[b] = true
				}
			}
		}
		if !allowed[a] {
			w.mu.Lock()
			said, saidAt := "never", time.Time{}
			for _, o := range w.history[hk] {
				if slices.Contains(o.ips, a) || slices.Contains(o.ready, a) {
					said, saidAt = fmt.Sprintf("%.1fs", o.at.Sub(w.began).Seconds()), o.at
				}
			}
			lastRead := w.lastRead[id].Sub(w.began).Seconds()
			w.mu.Unlock()
			if !saidAt.IsZero() && time.Since(saidAt) <= dnsStaleness+time.Second {
				// A reading that began before this answer was asked
				// but was recorded only after the history above was
				// consulted: it said a, recently enough.
				w.check("dns-reading-recorded-late")
				continue
			}
			if said == "never" {
				// No reading showed it: a state between two readings
				// (the importer can write twice within one). It
				// counts only if CoreDNS still answers it after the
				// bound while the objects still do not say it.
				w.rechecks.Go(func() { w.recheckStale(i, k, qname, a, reask) })
				return
			}
			w.violate("dns-stale", fmt.Sprintf("%s in %s answered %s, which the member's objects have not said within %s (last said at %s; member last read at %.1fs; answer %v; now: %s)", qname, w.members[i].Name, a, dnsStaleness, said, lastRead, got, now))
			return
		}
	}
	if len(unlisted) > 0 {
		// The sources may have changed since the last reading (the
		// importer and CoreDNS are quicker than a reading of every
		// member): read them again.
		var still []string
		for _, a := range unlisted {
			// A reading made since (the check loop's) may list it: an
			// address made ready and answered between two readings.
			w.mu.Lock()
			t, ok := w.sourceReady[k][a]
			w.mu.Unlock()
			listed := ok && now.Sub(t) <= sourceStaleness
			for j := range w.members {
				if listed {
					break
				}
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

// recheckStale asks again, dnsStaleness later, for an answer that named
// a that no reading of member i showed for k: a violation if CoreDNS still
// answers it and the member's objects still do not say it.
func (w *world) recheckStale(i int, k, qname, a string, reask func() ([]string, error)) {
	time.Sleep(dnsStaleness)
	got, err := reask()
	if err != nil || !slices.Contains(got, a) {
		w.check("dns-between-readings")
		return
	}
	m, err := w.read(context.Background(), i)
	if err != nil {
		return // unreadable now: not a verdict either way
	}
	if si := m.imports[k]; si != nil && (slices.Contains(si.Spec.IPs, a) || slices.Contains(readyAddresses(m.mirrored[k]), a)) {
		w.check("dns-between-readings")
		return
	}
	w.violate("dns-stale", fmt.Sprintf("%s in %s answered %s, which no reading of the member's objects showed, and still does %s later (answer %v)", qname, w.members[i].Name, a, dnsStaleness, got))
}

// recheckMissing asks again, dnsStaleness later, for a name member i's
// CoreDNS answered NXDOMAIN at: a violation if it still does while the
// member holds an import of k made well before the first answer (so that
// CoreDNS has had it for longer than its staleness bound) and its API
// server has been up all along (while it is stopped CoreDNS serves what it
// last knew, which may predate the import). A Headless import with no
// ready endpoint is NXDOMAIN rightly: one that had none in some reading
// since the bound before the first answer is no violation.
func (w *world) recheckMissing(i int, addr, network, k, qname string, at time.Time) {
	time.Sleep(dnsStaleness)
	r, err := procs.Query(addr, network, qname, dns.TypeA)
	if err != nil || r.Rcode != dns.RcodeNameError {
		w.check("dns-nxdomain-recheck")
		return
	}
	w.mu.Lock()
	unsure := w.apiDown[i] || at.Sub(w.apiUpAt[i]) <= 2*dnsStaleness
	w.mu.Unlock()
	if unsure {
		return
	}
	m, err := w.read(context.Background(), i)
	if err != nil {
		return
	}
	w.check("dns-nxdomain-recheck")
	si := m.imports[k]
	if si == nil || at.Sub(si.CreationTimestamp.Time) <= dnsStaleness+2*time.Second {
		return
	}
	if si.Spec.Type == mcsv1beta1.Headless {
		// A Headless import with no ready endpoint is NXDOMAIN: so it is
		// only a violation if every reading from the bound before the
		// first answer until now listed some.
		if len(readyAddresses(m.mirrored[k])) == 0 {
			return
		}
		w.mu.Lock()
		none := false
		for _, o := range w.history[w.members[i].Name+"/"+k] {
			if !o.at.Before(at.Add(-dnsStaleness-time.Second)) && len(o.ready) == 0 {
				none = true
			}
		}
		w.mu.Unlock()
		if none {
			return
		}
	}
	w.violate("dns-nxdomain", fmt.Sprintf("%s in %s answered NXDOMAIN at %.1fs and still does %s later, but its import %s (uid %s) exists since %s", qname, w.members[i].Name, at.Sub(w.began).Seconds(), dnsStaleness, k, si.UID, si.CreationTimestamp.Format(time.RFC3339)))
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
			if last = diff(v.members, w.clusterSetCIDR); len(last) == 0 {
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

// loggedVIPChanges counts every in-place VIP change an importer logged
// as a violation. The readings see an import only every interval, and a
// VIP named for a few milliseconds (one released a moment later, which
// its cluster may give to another Service) falls between two of them;
// the importer's own line does not. Nothing in the workload or the faults
// asks for one: no IP family changes, and a derived Service goes only
// with its import or its namespace.
func (w *world) loggedVIPChanges() {
	w.mu.Lock()
	importers := slices.Clone(w.importers)
	w.mu.Unlock()
	for _, p := range importers {
		w.check("vip-logged")
		for _, l := range strings.Split(p.Output(), "\n") {
			if strings.Contains(l, "ServiceImport VIP changed") {
				w.violate("vip-changed-logged", fmt.Sprintf("%s: %s", p.Name, l))
			}
		}
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
	// What the importers said they did to VIPs, every change between
	// two readings included: type changes and unexports explain most.
	logged := map[string]int{}
	for _, p := range w.importers {
		out := p.Output()
		for _, l := range []string{"ServiceImport VIP changed", "ServiceImport type changed", "ServiceImport type settled", "deleted derived Service", "deleted ServiceImport"} {
			logged[l] += strings.Count(out, l)
		}
	}
	w.t.Logf("chaos report: seed %d, %d members, %s\n  faults injected: %s\n  workload ops: %s\n  invariant checks: %s\n  importers logged: %s\n  convergence after the last fault healed: %s (bound %s)\n  violations: %d\n  replay: %s",
		w.seed, len(w.members), time.Since(w.began).Round(time.Second), line(w.faults), line(w.ops), line(w.checks), line(logged), conv, convergeBound, len(w.violations), w.replay)
}

// dnsMatches is the check the sampled one during the faults cannot make
// both ways: once the members match the model, every member's CoreDNS
// answers exactly what that member's objects say, within dnsStaleness (its
// informers' lag): every import's name, over UDP and TCP, its addresses
// and nothing else (a ClusterSetIP import's VIP, a Headless import's
// ready endpoints), its SRV records (one for a ClusterSetIP import, one
// per ready endpoint for a Headless one, whose targets answer), the PTR of
// its addresses; and NXDOMAIN for every workload name the member imports
// nothing of.
func (w *world) dnsMatches() {
	for i, d := range w.dns {
		deadline := time.Now().Add(dnsStaleness + 5*time.Second)
		var problems []string
		for {
			m, err := w.read(context.Background(), i)
			if err != nil {
				problems = []string{"unread: " + err.Error()}
			} else {
				problems = dnsProblems(d.Addr, m)
			}
			if len(problems) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Second)
		}
		w.check("dns-final")
		if len(problems) > 0 {
			w.violate("dns-final", fmt.Sprintf("%s's CoreDNS, %s after convergence: %s", w.members[i].Name, dnsStaleness+5*time.Second, strings.Join(problems, "; ")))
		}
	}
}

// dnsProblems compares the answers of the CoreDNS at addr with member m's
// objects; nil when they agree.
func dnsProblems(addr string, m *member) []string {
	var out []string
	ask := func(network, name string, qtype uint16) *dns.Msg {
		r, err := procs.Query(addr, network, name, qtype)
		if err != nil {
			out = append(out, fmt.Sprintf("%s %s over %s: %v", name, dns.TypeToString[qtype], network, err))
			return nil
		}
		if r.Rcode != dns.RcodeSuccess {
			out = append(out, fmt.Sprintf("%s %s over %s: %s", name, dns.TypeToString[qtype], network, dns.RcodeToString[r.Rcode]))
			return nil
		}
		return r
	}
	for _, ns := range namespaces {
		for n := range servicesPerNamespace {
			k := key(ns, fmt.Sprintf("svc%d", n))
			qname := fmt.Sprintf("svc%d.%s.svc.clusterset.local.", n, ns)
			si := m.imports[k]
			if si == nil {
				if r, err := procs.Query(addr, "udp", qname, dns.TypeA); err != nil {
					out = append(out, qname+" A: "+err.Error())
				} else if r.Rcode != dns.RcodeNameError {
					out = append(out, fmt.Sprintf("%s A: %s %v, but %s imports nothing of it", qname, dns.RcodeToString[r.Rcode], addresses(r.Answer), m.id))
				}
				continue
			}
			want := readyAddresses(m.mirrored[k])
			if si.Spec.Type != mcsv1beta1.Headless {
				want = slices.Sorted(slices.Values(si.Spec.IPs))
			} else if len(want) == 0 {
				// No ready endpoint: the name does not exist.
				for _, network := range []string{"udp", "tcp"} {
					if r, err := procs.Query(addr, network, qname, dns.TypeA); err != nil {
						out = append(out, qname+" A: "+err.Error())
					} else if r.Rcode != dns.RcodeNameError {
						out = append(out, fmt.Sprintf("%s A over %s: %s %v, but the Headless import has no ready endpoint", qname, network, dns.RcodeToString[r.Rcode], addresses(r.Answer)))
					}
				}
				continue
			}
			for _, network := range []string{"udp", "tcp"} {
				if r := ask(network, qname, dns.TypeA); r != nil {
					if got := sortedSet(addresses(r.Answer)); !slices.Equal(got, want) {
						out = append(out, fmt.Sprintf("%s A over %s: %v, the objects say %v", qname, network, got, want))
					}
				}
			}
			out = append(out, srvProblems(ask, qname, si, m.mirrored[k], want)...)
			for _, a := range want {
				rev, _ := dns.ReverseAddr(a)
				r := ask("udp", rev, dns.TypePTR)
				if r == nil {
					continue
				}
				named := false
				for _, rr := range r.Answer {
					if ptr, ok := rr.(*dns.PTR); ok {
						if owner, ok := ptrKey(ptr.Ptr); ok && owner == k {
							named = true
						}
					}
				}
				if !named {
					out = append(out, fmt.Sprintf("%s PTR: %v, no name of %s", rev, r.Answer, k))
				}
			}
		}
	}
	return out
}

// srvProblems checks the SRV records of the import's "http" port: a
// ClusterSetIP import has one, its own name at the import's port; a
// Headless import one per ready endpoint, whose targets (each
// endpoint's own name) answer its address.
func srvProblems(ask func(network, name string, qtype uint16) *dns.Msg, qname string, si *mcsv1beta1.ServiceImport, mirrored []discoveryv1.EndpointSlice, want []string) []string {
	var out []string
	srvName := "_http._tcp." + qname
	r := ask("tcp", srvName, dns.TypeSRV)
	if r == nil {
		return out
	}
	var targets []string
	var ports []uint16
	for _, rr := range r.Answer {
		if srv, ok := rr.(*dns.SRV); ok {
			targets = append(targets, srv.Target)
			ports = append(ports, srv.Port)
		}
	}
	if si.Spec.Type != mcsv1beta1.Headless {
		var port uint16
		for _, p := range si.Spec.Ports {
			if p.Name == "http" {
				port = uint16(p.Port)
			}
		}
		if len(targets) != 1 || targets[0] != qname || ports[0] != port {
			out = append(out, fmt.Sprintf("%s SRV: targets %v ports %v, want %s port %d", srvName, targets, ports, qname, port))
		}
		return out
	}
	ready := 0
	for _, s := range mirrored {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				ready++
			}
		}
	}
	if len(targets) != ready {
		out = append(out, fmt.Sprintf("%s SRV: %d records, %d ready endpoints", srvName, len(targets), ready))
	}
	if got := sortedSet(addresses(r.Extra)); !slices.Equal(got, want) {
		out = append(out, fmt.Sprintf("%s SRV: additional addresses %v, the objects say %v", srvName, got, want))
	}
	for _, t := range targets {
		if r := ask("udp", t, dns.TypeA); r != nil {
			got := addresses(r.Answer)
			if len(got) == 0 || slices.ContainsFunc(got, func(a string) bool { return !slices.Contains(want, a) }) {
				out = append(out, fmt.Sprintf("%s A: %v, not one of the ready endpoints %v", t, got, want))
			}
		}
	}
	return out
}

func sortedSet(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return slices.Compact(s)
}

package importer_test

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

// The outage tests run the importer as a process against real API servers
// and cut the importer's connections with a TCP proxy in front of each
// member (the API server itself keeps running, so the test can look).

// proxiedSet starts member clusters, each reached by the importer through
// a proxy the test can cut; the kubeconfig names them as the clusters do.
func proxiedSet(t *testing.T, names ...string) (*cluster.Set, map[string]*proxy, string) {
	t.Helper()
	set := cluster.Start(t, cluster.Names(names...)...)
	proxies := map[string]*proxy{}
	for _, c := range set.Clusters {
		u, err := url.Parse(c.Config.Host)
		require.NoError(t, err)
		proxies[c.Name] = startProxy(t, u.Host)
	}
	return set, proxies, kubeconfigVia(t, set, proxies, nil)
}

// importerProc is mcs-importer as a process, with its metrics address.
type importerProc struct {
	*procs.Process
	addr string
}

func startImporterProc(t *testing.T, name string, args ...string) *importerProc {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", procs.FreePort(t))
	p := procs.Start(t, name, procs.ImporterBinary(t), append(args, "--metrics-addr", addr)...)
	return &importerProc{Process: p, addr: addr}
}

func (p *importerProc) get(path string) (int, string, error) {
	resp, err := http.Get("http://" + p.addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

var sampleLine = regexp.MustCompile(`^([a-z_]+)(\{[^}]*\})? (\S+)$`)

// metrics returns the samples of the named metric, by their label string
// (`cluster="east",state="up"`); nil when the process does not answer.
func (p *importerProc) metrics(name string) map[string]float64 {
	code, body, err := p.get("/metrics")
	if err != nil || code != http.StatusOK {
		return nil
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		m := sampleLine.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != name {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err == nil {
			out[strings.Trim(m[2], "{}")] = v
		}
	}
	return out
}

// state is the member_state of cluster ("" when not known).
func (p *importerProc) state(cluster string) string {
	for labels, v := range p.metrics("mcs_importer_member_state") {
		if v == 1 && strings.Contains(labels, `cluster="`+cluster+`"`) {
			_, st, _ := strings.Cut(labels, `state="`)
			return strings.TrimSuffix(st, `"`)
		}
	}
	return ""
}

// writesTo sums mcs_importer_writes_total for the given clusters.
func (p *importerProc) writesTo(clusters ...string) float64 {
	var sum float64
	for labels, v := range p.metrics("mcs_importer_writes_total") {
		for _, c := range clusters {
			if strings.Contains(labels, `cluster="`+c+`"`) {
				sum += v
			}
		}
	}
	return sum
}

// exportIn exports a ClusterSetIP Service name in c, with one endpoint.
func exportIn(t *testing.T, c *cluster.Cluster, ns, name, ip string) {
	t.Helper()
	mkService(t, c, ns, name, false, tcpPort("http", 80))
	putSlice(t, c, ns, name, name+"-1", ep{ip: ip, ready: true})
	mkExport(t, c, ns, name)
}

// A member that is down when the importer starts, in each position: the
// first context, a member that only imports, and the cluster holding the
// leader Lease. The importer imports among the others (except while the
// Lease's cluster is away: no replica leads then, as documented), and the
// member joins without a restart when it answers.
func TestMemberDownAtStart(t *testing.T) {
	t.Parallel()
	set, proxies, kubeconfig := proxiedSet(t, "east", "west", "north")
	east, west, north := set.Get("east"), set.Get("west"), set.Get("north")
	all := []*cluster.Cluster{east, west, north}
	ns := "down-at-start"
	mkNamespace(t, ns, all...)
	base := []string{"--kubeconfig", kubeconfig, "--contexts", "east,west,north", "--health-probe-interval", "200ms",
		"--endpoint-grace-period", "30s", "--vip-mode", "none", "--connect-timeout", "5s"}

	t.Run("first context", func(t *testing.T) {
		proxies["east"].pause()
		exportIn(t, east, ns, "from-east", "10.70.0.1") // made while the importer cannot see east
		started := time.Now()
		p := startImporterProc(t, "importer", base...)
		exportIn(t, west, ns, "from-west", "10.70.1.1")
		waitEndpoints(t, []*cluster.Cluster{west, north}, ns, "from-west", map[string][]string{"west": {"10.70.1.1"}})
		t.Logf("measured: imported among west and north %s after start-up, east down", time.Since(started).Round(time.Millisecond))
		code, body, err := p.get("/readyz")
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code, body)
		assert.Contains(t, body, "member east: unknown: unreachable")
		assert.Equal(t, "unknown", p.state("east"))
		assert.Contains(t, p.Output(), "member cluster cannot be joined; retrying with back-off")
		back := time.Now()
		proxies["east"].resume(t)
		waitEndpoints(t, all, ns, "from-west", map[string][]string{"west": {"10.70.1.1"}})
		waitEndpoints(t, all, ns, "from-east", map[string][]string{"east": {"10.70.0.1"}})
		t.Logf("measured: east joined, imported into and exported from, %s after it answered", time.Since(back).Round(time.Millisecond))
		require.NoError(t, p.Stop())
	})

	t.Run("importing-only member", func(t *testing.T) {
		proxies["north"].pause()
		started := time.Now()
		p := startImporterProc(t, "importer", base...)
		exportIn(t, east, ns, "second", "10.70.2.1")
		waitEndpoints(t, []*cluster.Cluster{east, west}, ns, "second", map[string][]string{"east": {"10.70.2.1"}})
		t.Logf("measured: imported among east and west %s after start-up, north down", time.Since(started).Round(time.Millisecond))
		back := time.Now()
		proxies["north"].resume(t)
		waitEndpoints(t, all, ns, "second", map[string][]string{"east": {"10.70.2.1"}})
		t.Logf("measured: north joined and got the import %s after it answered", time.Since(back).Round(time.Millisecond))
		require.NoError(t, p.Stop())
	})

	t.Run("the Lease's cluster", func(t *testing.T) {
		proxies["west"].pause()
		args := append(base, "--leader-elect", "--leader-elect-context", "west", "--leader-elect-lease-duration", "4s",
			"--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms")
		p := startImporterProc(t, "importer", args...)
		exportIn(t, east, ns, "third", "10.70.3.1")
		// No replica can take the Lease: nothing is imported (documented).
		time.Sleep(5 * time.Second)
		_, err := getImport(north, ns, "third")
		assert.Error(t, err, "imported without holding the Lease")
		assert.Contains(t, p.Output(), "waiting for the leader Lease")
		code, _, err := p.get("/readyz")
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, code, "a replica without the Lease is not ready")
		back := time.Now()
		proxies["west"].resume(t)
		waitEndpoints(t, all, ns, "third", map[string][]string{"east": {"10.70.3.1"}})
		t.Logf("measured: led and imported %s after the Lease's cluster answered", time.Since(back).Round(time.Millisecond))
	})
}

// objectsState is, for every object the importer owns in cs (imports,
// mirrored slices, derived Services), its UID and resourceVersion, plus
// each import's and derived Service's VIPs.
func objectsState(t *testing.T, cs []*cluster.Cluster, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	owned := metav1.ListOptions{LabelSelector: mcsapi.LabelManagedBy + "=" + mcsapi.ManagedByImporter}
	for _, c := range cs {
		sis, err := c.MCS.MulticlusterV1beta1().ServiceImports(ns).List(bg(), owned)
		require.NoError(t, err)
		for _, si := range sis.Items {
			out[c.Name+"/ServiceImport/"+si.Name] = fmt.Sprintf("%s %s %v", si.UID, si.ResourceVersion, si.Spec.IPs)
		}
		sl, err := c.Kube.DiscoveryV1().EndpointSlices(ns).List(bg(), owned)
		require.NoError(t, err)
		for _, s := range sl.Items {
			out[c.Name+"/EndpointSlice/"+s.Name] = fmt.Sprintf("%s %s", s.UID, s.ResourceVersion)
		}
		svcs, err := c.Kube.CoreV1().Services(ns).List(bg(), metav1.ListOptions{LabelSelector: mcsapi.LabelDerivedFor})
		require.NoError(t, err)
		for _, s := range svcs.Items {
			out[c.Name+"/Service/"+s.Name] = fmt.Sprintf("%s %s %v", s.UID, s.ResourceVersion, s.Spec.ClusterIPs)
		}
	}
	return out
}

// Every member away from the importer past the grace period (its own
// connections cut; the members healthy all along), then back one at a
// time 20 s apart: nothing whose exporter is alive is deleted, recreated
// or rewritten, and no VIP changes.
func TestClustersetOutage(t *testing.T) {
	t.Parallel()
	set, proxies, kubeconfig := proxiedSet(t, "east", "west", "north")
	all := set.Clusters
	ns := "outage"
	mkNamespace(t, ns, all...)
	for i, c := range all {
		for j := range 5 {
			exportIn(t, c, ns, fmt.Sprintf("%s-%d", c.Name, j), fmt.Sprintf("10.71.%d.%d", i, j+1))
		}
	}
	// North is back 20 s after the disruption ends (when west is back):
	// 25 s short of its grace period, so that a slow probe on a loaded
	// machine does not withdraw it.
	const grace = 45 * time.Second
	p := startImporterProc(t, "importer", "--kubeconfig", kubeconfig, "--contexts", "east,west,north",
		"--health-probe-interval", "200ms", "--endpoint-grace-period", grace.String())
	require.Eventually(t, func() bool {
		st := objectsState(t, all, ns)
		imports, derived := 0, 0
		for k, v := range st {
			switch {
			case strings.Contains(k, "/ServiceImport/") && !strings.HasSuffix(v, "[]"):
				imports++
			case strings.Contains(k, "/Service/"):
				derived++
			}
		}
		return imports == 15*3 && derived == 15*3
	}, 2*waitFor, tick, "15 imports with VIPs in each of 3 members")
	quiesceProc(t, p)
	before := objectsState(t, all, ns)
	writesBefore := p.writesTo("east", "west", "north")

	cut := time.Now()
	for _, px := range proxies {
		px.pause()
	}
	require.Eventually(t, func() bool {
		return p.state("east") == "unreachable" && p.state("west") == "unreachable" && p.state("north") == "unreachable"
	}, waitFor, tick)
	time.Sleep(grace + 5*time.Second - time.Since(cut))
	for _, name := range []string{"east", "west", "north"} {
		assert.Equal(t, "unreachable", p.state(name), "%s withdrawn during a disruption", name)
	}
	for i, name := range []string{"east", "west", "north"} {
		if i > 0 {
			time.Sleep(20 * time.Second)
		}
		proxies[name].resume(t)
	}
	require.Eventually(t, func() bool {
		return p.state("east") == "up" && p.state("west") == "up" && p.state("north") == "up"
	}, waitFor, tick)
	quiesceProc(t, p)
	after := objectsState(t, all, ns)
	assert.Equal(t, before, after, "objects deleted, recreated, rewritten or VIPs changed")
	writes := p.writesTo("east", "west", "north") - writesBefore
	t.Logf("measured: %d objects checked; %.0f writes from the cut to the end (away %s, back 20 s apart)", len(after), writes, time.Since(cut).Round(time.Second))
	assert.Zero(t, writes)
	assert.Contains(t, p.Output(), "suspecting the importer's own network")
	assert.NotContains(t, p.Output(), "withdrawn after the grace period")
}

// quiesceProc waits until p has made no write for 3 s.
func quiesceProc(t *testing.T, p *importerProc) {
	t.Helper()
	last, since := p.writesTo("east", "west", "north"), time.Now()
	require.Eventually(t, func() bool {
		now := p.writesTo("east", "west", "north")
		if now != last {
			last, since = now, time.Now()
			return false
		}
		return time.Since(since) >= 3*time.Second
	}, 2*waitFor, 200*time.Millisecond, "the importer kept writing")
}

// One member flapping (down 5 s, up 5 s) for 30 s, with a grace period
// (12 s) longer than its absences: no write to the other members, no
// reconcile (nothing changed meanwhile), no withdrawal, no goroutine
// growth; what was exported while it was away reaches it when it is
// back. Then a member away for longer than the grace
// period is withdrawn once, logged with the number of services, counted,
// and dropped from status.clusters.
func TestFlappingMember(t *testing.T) {
	t.Parallel()
	set, proxies, kubeconfig := proxiedSet(t, "east", "west", "north")
	east, west, north := set.Get("east"), set.Get("west"), set.Get("north")
	all := set.Clusters
	ns := "flap"
	mkNamespace(t, ns, all...)
	exportIn(t, east, ns, "web", "10.72.0.1")
	exportIn(t, north, ns, "web", "10.72.2.1")
	exportIn(t, north, ns, "api", "10.72.2.2")
	p := startImporterProc(t, "importer", "--kubeconfig", kubeconfig, "--contexts", "east,west,north",
		"--health-probe-interval", "200ms", "--endpoint-grace-period", "12s")
	waitEndpoints(t, all, ns, "web", map[string][]string{"east": {"10.72.0.1"}, "north": {"10.72.2.1"}})
	waitEndpoints(t, all, ns, "api", map[string][]string{"north": {"10.72.2.2"}})
	quiesceProc(t, p)
	goroutines := func() float64 { return p.metrics("go_goroutines")[""] }
	g0 := goroutines()
	w0 := p.writesTo("east", "west")
	reconciles := func() float64 {
		var sum float64
		for _, v := range p.metrics("mcs_importer_reconciles_total") {
			sum += v
		}
		return sum
	}
	r0 := reconciles()

	for range 3 {
		proxies["north"].pause()
		time.Sleep(5 * time.Second)
		proxies["north"].resume(t)
		time.Sleep(5 * time.Second)
	}
	require.Eventually(t, func() bool { return p.state("north") == "up" }, waitFor, tick)
	quiesceProc(t, p)
	flapWrites := p.writesTo("east", "west") - w0
	flapReconciles := reconciles() - r0
	// Goroutines of the last reconnect (a watch being replaced) may still
	// be winding down: a leak stays above the bound, they do not.
	var g1 float64
	assert.Eventually(t, func() bool { g1 = goroutines(); return g1 <= g0+10 }, 10*time.Second, 200*time.Millisecond, "goroutines grew")
	t.Logf("measured: flapping 30 s: %.0f writes to east and west, %.0f reconciles; goroutines %.0f -> %.0f", flapWrites, flapReconciles, g0, g1)
	assert.Zero(t, flapWrites)
	// Nothing changed while it was away, so nothing was missed: its
	// going and coming back reconcile nothing.
	assert.Zero(t, flapReconciles, "reconciles while a member flapped and nothing changed")
	assert.NotContains(t, p.Output(), "withdrawn after the grace period")

	// Away within the grace period while a service is exported: the
	// reconciles it missed are made when it is back.
	proxies["north"].pause()
	require.Eventually(t, func() bool { return p.state("north") == "unreachable" }, waitFor, tick)
	exportIn(t, east, ns, "late", "10.72.0.9")
	waitEndpoints(t, []*cluster.Cluster{east, west}, ns, "late", map[string][]string{"east": {"10.72.0.9"}})
	require.Equal(t, "unreachable", p.state("north"), "withdrawn before it was back: the grace period is too short for this machine")
	proxies["north"].resume(t)
	waitEndpoints(t, all, ns, "late", map[string][]string{"east": {"10.72.0.9"}})

	// Away past the grace period: withdrawn once.
	proxies["north"].pause()
	waitEndpoints(t, []*cluster.Cluster{east, west}, ns, "web", map[string][]string{"east": {"10.72.0.1"}})
	waitNoImport(t, []*cluster.Cluster{east, west}, ns, "api")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		si, err := getImport(west, ns, "web")
		if assert.NoError(c, err) {
			assert.Equal(c, []string{"east"}, clusterIDs(si))
		}
	}, waitFor, tick)
	assert.Equal(t, 1.0, p.metrics("mcs_importer_member_withdrawals_total")[`cluster="north"`])
	assert.Equal(t, 1, strings.Count(p.Output(), "withdrawn after the grace period"))
	assert.Regexp(t, `withdrawn after the grace period.*cluster=north services=2`, p.Output())
	proxies["north"].resume(t)
	waitEndpoints(t, all, ns, "api", map[string][]string{"north": {"10.72.2.2"}})
}

// The leader SIGKILLed while a member is down: the standby takes the Lease
// over and keeps importing among the members that answer; the member joins
// when it answers.
func TestLeaderKilledWhileMemberDown(t *testing.T) {
	t.Parallel()
	set, proxies, kubeconfig := proxiedSet(t, "east", "west", "north")
	east, west := set.Get("east"), set.Get("west")
	all := set.Clusters
	ns := "failover"
	mkNamespace(t, ns, all...)
	proxies["north"].pause()
	// The Lease in east, reached directly (not through the proxies).
	args := []string{"--kubeconfig", kubeconfig, "--contexts", "east,west,north", "--health-probe-interval", "200ms",
		"--endpoint-grace-period", "30s", "--leader-elect", "--leader-elect-kubeconfig", set.Kubeconfig, "--leader-elect-context", "east",
		"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms"}
	a := startImporterProc(t, "importer-a", args...)
	b := startImporterProc(t, "importer-b", args...)
	leader, standby := a, b
	if l, _ := whoLeads(t, a.Process, b.Process); l == b.Process {
		leader, standby = b, a
	}
	exportIn(t, east, ns, "one", "10.73.0.1")
	waitEndpoints(t, []*cluster.Cluster{east, west}, ns, "one", map[string][]string{"east": {"10.73.0.1"}})
	killed := time.Now()
	leader.Kill()
	require.Eventually(t, func() bool { return strings.Contains(standby.Output(), "msg=leading") }, waitFor, tick)
	exportIn(t, west, ns, "two", "10.73.1.1")
	waitEndpoints(t, []*cluster.Cluster{east, west}, ns, "two", map[string][]string{"west": {"10.73.1.1"}})
	t.Logf("measured: the standby led and imported %s after the leader was killed", time.Since(killed).Round(time.Millisecond))
	assert.Equal(t, "unknown", standby.state("north"))
	proxies["north"].resume(t)
	waitEndpoints(t, all, ns, "one", map[string][]string{"east": {"10.73.0.1"}})
	waitEndpoints(t, all, ns, "two", map[string][]string{"west": {"10.73.1.1"}})
}

// The importer restarted while a member is away: what came from that member
// (its own import, and its endpoints in an import it shares with a live
// member) is left exactly as it is while it has not been seen, and rewritten
// not at all when it comes back within the grace period; a live member's
// own import is reconciled meanwhile. Restarted again with the member away
// past the grace period, what came from it is withdrawn, and said so once.
func TestRestartWithMemberAway(t *testing.T) {
	t.Parallel()
	set, proxies, kubeconfig := proxiedSet(t, "east", "west", "north")
	east, west, north := set.Get("east"), set.Get("west"), set.Get("north")
	all := set.Clusters
	ns := "restart-away"
	mkNamespace(t, ns, all...)
	exportIn(t, north, ns, "from-north", "10.74.2.1")
	exportIn(t, north, ns, "shared", "10.74.2.2")
	exportIn(t, east, ns, "shared", "10.74.0.2")
	exportIn(t, east, ns, "from-east", "10.74.0.1")
	args := []string{"--kubeconfig", kubeconfig, "--contexts", "east,west,north", "--health-probe-interval", "200ms", "--vip-mode", "none"}
	first := startImporterProc(t, "importer-1", append(args, "--endpoint-grace-period", "15s")...)
	waitEndpoints(t, all, ns, "from-north", map[string][]string{"north": {"10.74.2.1"}})
	waitEndpoints(t, all, ns, "shared", map[string][]string{"north": {"10.74.2.2"}, "east": {"10.74.0.2"}})
	waitEndpoints(t, all, ns, "from-east", map[string][]string{"east": {"10.74.0.1"}})
	quiesceProc(t, first)
	require.NoError(t, first.Stop())
	liveOnly := []*cluster.Cluster{east, west}
	// What came from north: its import, the shared import, and north's
	// slices in it (east's slices of the shared import are east's to say).
	fromNorth := map[string]bool{}
	for _, c := range liveOnly {
		ss, err := mirrored(c, ns, "shared")
		require.NoError(t, err)
		for _, s := range ss {
			if s.Labels[mcsapi.LabelSourceCluster] == "north" {
				fromNorth[c.Name+"/EndpointSlice/"+s.Name] = true
			}
		}
	}
	require.Len(t, fromNorth, 2)
	held := func(st map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range st {
			if strings.Contains(k, "from-north") || strings.HasSuffix(k, "/ServiceImport/shared") || fromNorth[k] {
				out[k] = v
			}
		}
		return out
	}
	before := held(objectsState(t, liveOnly, ns))
	require.NotEmpty(t, before)

	proxies["north"].pause()
	// A grace period no loaded machine outlasts: what is tested happens
	// within it.
	second := startImporterProc(t, "importer-2", append(args, "--endpoint-grace-period", "60s")...)
	require.Eventually(t, func() bool { return second.state("west") == "up" && second.state("east") == "up" }, waitFor, tick)
	// A live member's own import is reconciled while north is unknown.
	putSlice(t, east, ns, "from-east", "from-east-1", ep{ip: "10.74.0.9", ready: true})
	waitEndpoints(t, liveOnly, ns, "from-east", map[string][]string{"east": {"10.74.0.9"}})
	// So are a live member's endpoints in an import north may have a
	// say in (held as it is): east's endpoint stops being ready.
	putSlice(t, east, ns, "shared", "shared-1", ep{ip: "10.74.0.2", ready: false})
	waitEndpoints(t, liveOnly, ns, "shared", map[string][]string{"north": {"10.74.2.2"}, "east": {"10.74.0.2(unready)"}})
	time.Sleep(3 * time.Second)
	assert.Equal(t, before, held(objectsState(t, liveOnly, ns)), "what may have come from north changed while it was unknown")
	assert.Equal(t, "unknown", second.state("north"))
	proxies["north"].resume(t)
	require.Eventually(t, func() bool { return second.state("north") == "up" }, waitFor, tick)
	quiesceProc(t, second)
	assert.Equal(t, before, held(objectsState(t, liveOnly, ns)), "north's imports were rewritten when it joined")
	require.NoError(t, second.Stop())

	proxies["north"].pause()
	started := time.Now()
	third := startImporterProc(t, "importer-3", append(args, "--endpoint-grace-period", "5s")...)
	waitNoImport(t, liveOnly, ns, "from-north")
	waitEndpoints(t, liveOnly, ns, "shared", map[string][]string{"east": {"10.74.0.2(unready)"}})
	t.Logf("measured: withdrawn %s after a start-up with north away (grace 5s)", time.Since(started).Round(time.Millisecond))
	assert.GreaterOrEqual(t, time.Since(started), 5*time.Second)
	assert.Equal(t, 1, strings.Count(third.Output(), "not seen within the grace period since the start"))
	assert.Regexp(t, `not seen within the grace period since the start.*context=north services=2`, third.Output())
	assert.Equal(t, "down", third.state("north"))
	proxies["north"].resume(t)
	waitEndpoints(t, all, ns, "from-north", map[string][]string{"north": {"10.74.2.1"}})
}

// A member's kube-apiserver process stopped and started again (etcd keeps
// running, as when a control-plane node restarts): while it is gone the
// member is unreachable and nothing is withdrawn or rewritten; once it is
// back, an export created there is imported into both members, and what
// was there before is left as it was.
func TestMemberAPIServerRestart(t *testing.T) {
	set := cluster.Start(t, cluster.Names("east", "west")...)
	east, west := set.Get("east"), set.Get("west")
	all := set.Clusters
	ns := "apiserver-restart"
	mkNamespace(t, ns, all...)
	exportIn(t, east, ns, "web", "10.75.0.1")
	p := startImporterProc(t, "importer", "--kubeconfig", set.Kubeconfig, "--contexts", "east,west",
		"--health-probe-interval", "200ms", "--endpoint-grace-period", "60s", "--vip-mode", "none")
	waitEndpoints(t, all, ns, "web", map[string][]string{"east": {"10.75.0.1"}})
	quiesceProc(t, p)
	before := objectsState(t, []*cluster.Cluster{west}, ns)

	require.NoError(t, east.StopAPIServer())
	require.Eventually(t, func() bool { return p.state("east") == "unreachable" }, waitFor, tick)
	time.Sleep(3 * time.Second)
	assert.Equal(t, before, objectsState(t, []*cluster.Cluster{west}, ns), "west's objects changed while east was away")
	assert.Equal(t, "unreachable", p.state("east"))

	require.NoError(t, east.StartAPIServer(bg()))
	back := time.Now()
	exportIn(t, east, ns, "api", "10.75.0.2")
	exported := time.Now()
	waitEndpoints(t, all, ns, "api", map[string][]string{"east": {"10.75.0.2"}})
	t.Logf("measured: an export made right after east's API server was ready imported into both members %s after it was made (%s after ready)",
		time.Since(exported).Round(time.Millisecond), time.Since(back).Round(time.Millisecond))
	require.Eventually(t, func() bool { return p.state("east") == "up" }, waitFor, tick)
	quiesceProc(t, p)
	after := objectsState(t, []*cluster.Cluster{west}, ns)
	for k, v := range before {
		assert.Equal(t, v, after[k], "%s rewritten after east came back", k)
	}
	assert.NotContains(t, p.Output(), "withdrawn after the grace period")
}

// withdrawAt is when p withdraws context's last known state, from
// mcs_importer_member_withdraw_at_timestamp_seconds (zero when absent).
func (p *importerProc) withdrawAt(context string) time.Time {
	for labels, v := range p.metrics("mcs_importer_member_withdraw_at_timestamp_seconds") {
		if strings.Contains(labels, `context="`+context+`"`) {
			return time.UnixMilli(int64(math.Round(v * 1e3)))
		}
	}
	return time.Time{}
}

// A member that went away before a leader handover is withdrawn when the
// first leader would have withdrawn it: the new leader reads the member
// record next to the Lease and resumes the grace period where it was, it
// does not start it again.
func TestHandoverKeepsTheGracePeriod(t *testing.T) {
	t.Parallel()
	set, proxies, kubeconfig := proxiedSet(t, "east", "west", "north")
	east, west, north := set.Get("east"), set.Get("west"), set.Get("north")
	ns := "handover-grace"
	mkNamespace(t, ns, set.Clusters...)
	exportIn(t, north, ns, "from-north", "10.75.2.1")
	const grace = 20 * time.Second
	args := []string{"--kubeconfig", kubeconfig, "--contexts", "east,west,north", "--health-probe-interval", "200ms",
		"--endpoint-grace-period", grace.String(), "--vip-mode", "none",
		"--leader-elect", "--leader-elect-kubeconfig", set.Kubeconfig, "--leader-elect-context", "east",
		"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms"}
	a := startImporterProc(t, "importer-a", args...)
	b := startImporterProc(t, "importer-b", args...)
	leader, standby := a, b
	if l, _ := whoLeads(t, a.Process, b.Process); l == b.Process {
		leader, standby = b, a
	}
	waitEndpoints(t, []*cluster.Cluster{east, west}, ns, "from-north", map[string][]string{"north": {"10.75.2.1"}})

	cut := time.Now()
	proxies["north"].pause()
	var due time.Time
	require.Eventually(t, func() bool { due = leader.withdrawAt("north"); return !due.IsZero() }, waitFor, tick,
		"the leader never said when it withdraws north:\n%s", leader.Output())
	assert.WithinDuration(t, cut.Add(grace), due, 5*time.Second)
	// The record next to the Lease says so before the handover.
	require.Eventually(t, func() bool {
		cm, err := east.Kube.CoreV1().ConfigMaps("kube-system").Get(bg(), "mcs-importer-members", metav1.GetOptions{})
		return err == nil && strings.Contains(cm.Data["members.json"], `"north":{"cluster":"north","idSource":`) &&
			regexp.MustCompile(`"north":\{[^}]*"state":"unreachable"`).MatchString(cm.Data["members.json"])
	}, waitFor, tick, "the leader never recorded north as unreachable:\n%s", leader.Output())
	leader.Kill()
	require.Eventually(t, func() bool { return strings.Contains(standby.Output(), "msg=leading") }, waitFor, tick)
	require.Eventually(t, func() bool { return !standby.withdrawAt("north").IsZero() }, waitFor, tick,
		"the new leader never said when it withdraws north:\n%s", standby.Output())
	assert.Equal(t, due, standby.withdrawAt("north"), "the new leader started north's grace period again:\n%s", standby.Output())
	_, body, err := standby.get("/readyz")
	require.NoError(t, err)
	assert.Contains(t, body, "held since an earlier process or leader term")
	t.Logf("measured: the new leader led %s after north was cut, withdraws it %s after the cut",
		time.Since(cut).Round(time.Millisecond), due.Sub(cut).Round(time.Millisecond))

	waitNoImport(t, []*cluster.Cluster{east, west}, ns, "from-north")
	withdrawn := time.Now()
	t.Logf("measured: withdrawn %s after the cut (grace %s, first leader's deadline %s after the cut)",
		withdrawn.Sub(cut).Round(time.Millisecond), grace, due.Sub(cut).Round(time.Millisecond))
	assert.False(t, withdrawn.Before(due), "withdrawn before the deadline")
	// A new term that started the grace period again would withdraw at
	// takeover + grace, several seconds later.
	assert.WithinDuration(t, due, withdrawn, 3*time.Second, "withdrawn late: the grace period was started again")
	proxies["north"].resume(t)
	waitEndpoints(t, set.Clusters, ns, "from-north", map[string][]string{"north": {"10.75.2.1"}})
}

// clusterset-cidr: an address only a down member's import holds stays
// claimed across a restart. north's export is withdrawn from the others
// while north is down, but north's own import keeps its VIP; a new
// process (north still down) must not give that address to a new import,
// or north's older claim would renumber that import when north returns.
// The pool has two addresses: one for an import every member holds, one
// for north's.
func TestClusterSetCIDRClaimsOfDownMemberKept(t *testing.T) {
	t.Parallel()
	set, proxies, kubeconfig := proxiedSet(t, "east", "west", "north")
	east, west, north := set.Get("east"), set.Get("west"), set.Get("north")
	all := set.Clusters
	live := []*cluster.Cluster{east, west}
	ns := "cidr-down"
	mkNamespace(t, ns, all...)
	args := []string{"--kubeconfig", kubeconfig, "--contexts", "east,west,north", "--health-probe-interval", "200ms",
		"--endpoint-grace-period", "3s", "--connect-timeout", "5s", "--vip-mode", "clusterset-cidr",
		"--clusterset-cidr", "10.251.0.0/30", "--clusterset-ip-default", "--member-record", "kube-system/cidr-down-members"}
	vipIn := func(cs []*cluster.Cluster, name string) string {
		got := importIPs(t, cs, ns, name, func(c *cluster.Cluster, si *mcsv1beta1.ServiceImport) error {
			if len(si.Spec.IPs) != 1 {
				return fmt.Errorf("ips %v", si.Spec.IPs)
			}
			return nil
		})
		for _, c := range cs[1:] {
			require.Equal(t, got[cs[0].Name], got[c.Name], name)
		}
		return got[cs[0].Name][0]
	}
	exportIn(t, east, ns, "everywhere", "10.75.0.1")
	exportIn(t, north, ns, "from-north", "10.75.2.1")
	first := startImporterProc(t, "importer-1", args...)
	vEverywhere := vipIn(all, "everywhere")
	vNorth := vipIn(all, "from-north")
	require.NotEqual(t, vEverywhere, vNorth)
	quiesceProc(t, first)

	proxies["north"].pause()
	require.Eventually(t, func() bool { return first.state("north") == "down" }, waitFor, tick)
	waitNoImport(t, live, ns, "from-north")
	si, err := getImport(north, ns, "from-north")
	require.NoError(t, err)
	require.Equal(t, []string{vNorth}, si.Spec.IPs, "north's own import keeps its VIP")
	require.NoError(t, first.Stop(), "stops while north refuses connections")

	second := startImporterProc(t, "importer-2", args...)
	require.Eventually(t, func() bool { return second.state("east") == "up" && second.state("west") == "up" }, waitFor, tick)
	require.Eventually(t, func() bool { return second.state("north") == "down" }, waitFor, tick, "recorded as withdrawn: down from the start")
	exportIn(t, east, ns, "late", "10.75.0.2")
	// late waits for an address: the only one not held by everywhere is
	// north's.
	require.Eventually(t, func() bool {
		for _, c := range live {
			si, err := getImport(c, ns, "late")
			if err != nil {
				return false
			}
			cond := meta.FindStatusCondition(si.Status.Conditions, "Ready")
			if len(si.Spec.IPs) != 0 || cond == nil || cond.Reason != vip.ReasonClusterSetIPExhausted {
				return false
			}
		}
		return true
	}, waitFor, tick)
	quiesceProc(t, second)
	for _, c := range live {
		si, err := getImport(c, ns, "late")
		require.NoError(t, err)
		require.Empty(t, si.Spec.IPs, "%s: late was given an address north's import holds", c.Name)
	}

	proxies["north"].resume(t)
	require.Eventually(t, func() bool { return second.state("north") == "up" }, waitFor, tick)
	require.Equal(t, vNorth, vipIn(all, "from-north"), "north's import keeps its VIP when north returns")
	require.Equal(t, vEverywhere, vipIn(all, "everywhere"))
	quiesceProc(t, second)
	for _, c := range all {
		si, err := getImport(c, ns, "late")
		require.NoError(t, err)
		require.Empty(t, si.Spec.IPs, c.Name)
	}
}

// A member withdrawn while its API server refuses connections must not
// stall the decisions about the others: a second member that goes away
// later is withdrawn after its own grace period, although the first one
// still refuses (its caches' watches wait for it, and stopping them must
// not wait for it). Four members, so that two away is no disruption.
func TestWithdrawalsGoOnWhileAMemberRefuses(t *testing.T) {
	t.Parallel()
	set, proxies, kubeconfig := proxiedSet(t, "east", "west", "north", "south")
	east, west, north, south := set.Get("east"), set.Get("west"), set.Get("north"), set.Get("south")
	ns := "refusing"
	mkNamespace(t, ns, set.Clusters...)
	exportIn(t, north, ns, "from-north", "10.76.2.1")
	exportIn(t, south, ns, "from-south", "10.76.3.1")
	p := startImporterProc(t, "importer", "--kubeconfig", kubeconfig, "--contexts", "east,west,north,south",
		"--health-probe-interval", "200ms", "--endpoint-grace-period", "3s", "--connect-timeout", "5s", "--vip-mode", "none")
	live := []*cluster.Cluster{east, west}
	waitEndpoints(t, live, ns, "from-north", map[string][]string{"north": {"10.76.2.1"}})
	waitEndpoints(t, live, ns, "from-south", map[string][]string{"south": {"10.76.3.1"}})

	proxies["north"].pause()
	require.Eventually(t, func() bool { return p.state("north") == "down" }, waitFor, tick)
	waitNoImport(t, live, ns, "from-north")
	proxies["south"].pause()
	started := time.Now()
	require.Eventually(t, func() bool { return p.state("south") == "down" }, waitFor, tick, "south withdrawn while north still refuses")
	waitNoImport(t, live, ns, "from-south")
	t.Logf("measured: south withdrawn %s after it went away (grace 3s)", time.Since(started).Round(time.Millisecond))
	require.NoError(t, p.Stop(), "stops while two members refuse connections")
}

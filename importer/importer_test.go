package importer_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer"
	"github.com/mcs-dns/mcs-dns/importer/aggregate"
	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// The tests below run the whole importer on three real member clusters
// (see newTestbed); each starts from an empty clusterset and makes its own
// objects in its own namespaces.

func TestHealthAndMetricsEndpoints(t *testing.T) {
	_, a := importing(t)
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ok", "/metrics": "mcs_importer_queue_depth"} {
		resp, err := http.Get("http://" + a.addr + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Contains(t, string(body), want, path)
	}
}

// populate makes a clusterset with something of everything the importer
// serves: imports with several exporters and several slices, an unready
// endpoint, a headless import with hostnames, a type conflict, exported
// labels and invalid exports. It returns once every import is served.
func populate(t *testing.T, w *testbed) {
	t.Helper()
	ns := "imp-world"
	mkNamespace(t, ns, w.all...)
	for i := range 5 {
		name := fmt.Sprintf("web-%d", i)
		for j, cl := range []*cluster.Cluster{w.east, w.west} {
			mkService(t, cl, ns, name, false, tcpPort("http", 80))
			putSlice(t, cl, ns, name, name+"-a", ips(2, fmt.Sprintf("10.90.%d", 10*j+i))...)
			mkExport(t, cl, ns, name)
		}
	}
	putSlice(t, w.east, ns, "web-0", "web-0-b", ep{"10.91.0.1", false, ""}, ep{"10.91.0.2", true, ""})
	mkService(t, w.east, ns, "db", true, tcpPort("pg", 5432))
	putSlice(t, w.east, ns, "db", "db-a", ep{"10.92.0.1", true, "db-0"}, ep{"10.92.0.2", true, "db-1"})
	mkExport(t, w.east, ns, "db")
	mkService(t, w.north, ns, "db", false, tcpPort("pg", 5432))
	mkExport(t, w.north, ns, "db")
	mkService(t, w.west, ns, "meta", false, tcpPort("http", 80))
	mkExport(t, w.west, ns, "meta", func(e *mcsv1beta1.ServiceExport) {
		e.Spec.ExportedLabels = map[string]string{"tier": "web"}
		e.Spec.ExportedAnnotations = map[string]string{"team": "a"}
	})
	_, err := w.east.Kube.CoreV1().Services(ns).Create(bg(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ext"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	mkExport(t, w.east, ns, "ext")
	mkExport(t, w.east, ns, "ghost")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, cl := range w.all {
			for _, name := range []string{"web-0", "web-1", "web-2", "web-3", "web-4", "db", "meta"} {
				_, err := getImport(cl, ns, name)
				assert.NoError(c, err, "%s in %s", name, cl.Name)
			}
			eps, err := endpointsBySource(cl, ns, "web-0")
			assert.NoError(c, err)
			assert.Len(c, eps["east-1"], 4, cl.Name)
		}
		for _, cl := range []*cluster.Cluster{w.east, w.north} {
			_, _, conflict, err := exportConditions(cl, ns, "db")
			assert.NoError(c, err)
			assert.Equal(c, "True/TypeConflict", conflict, cl.Name)
		}
		valid, _, _, err := exportConditions(w.east, ns, "ghost")
		assert.NoError(c, err)
		assert.Equal(c, "False/NoService", valid)
	}, waitFor, tick)
}

func TestSteadyStateMakesZeroWrites(t *testing.T) {
	w, a := importing(t)
	populate(t, w)
	before := a.quiesce(t, 3*time.Second)
	reconciles := func() float64 {
		mfs, err := a.reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "mcs_importer_reconciles_total" {
				var s float64
				for _, m := range mf.GetMetric() {
					s += m.GetCounter().GetValue()
				}
				return s
			}
		}
		return 0
	}
	r0 := reconciles()
	// Two more resyncs (1s each) reconcile every key and write nothing.
	require.Eventually(t, func() bool { return reconciles() >= r0+20 }, waitFor, tick)
	time.Sleep(2 * time.Second)
	assert.Empty(t, diff(before, a.writes(t)), "writes during resyncs of a world that matches")
}

func TestRestartAdoptsDeletesOrphansLeavesForeignObjects(t *testing.T) {
	w, a := importing(t)
	east, west, north, all := w.east, w.west, w.north, w.all
	// Objects made while the first importer runs.
	ns := "imp-restart"
	mkNamespace(t, ns, all...)
	for _, name := range []string{"keep", "drop"} {
		mkService(t, east, ns, name, false, tcpPort("http", 80))
		putSlice(t, east, ns, name, name+"-1", ips(2, "10.60.0")...)
		mkExport(t, east, ns, name)
	}
	for _, name := range []string{"keep", "drop"} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			for _, cl := range all {
				_, err := getImport(cl, ns, name)
				assert.NoError(c, err)
				eps, err := endpointsBySource(cl, ns, name)
				assert.NoError(c, err)
				assert.Len(c, eps["east-1"], 2)
			}
		}, waitFor, tick)
	}
	// Statuses follow the answers: read after the importer is done.
	a.quiesce(t, 2*time.Second)
	keepImport, err := getImport(west, ns, "keep")
	require.NoError(t, err)
	a.stop()

	// While no importer runs: an export goes, and an orphan slice we
	// own and objects we do not own appear.
	rmExport(t, east, ns, "drop")
	_, err = north.Kube.DiscoveryV1().EndpointSlices(ns).Create(bg(), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "orphan", Labels: aggregate.SliceLabels("nothing", "east-1", "")},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   endpoints(ips(1, "10.61.0")),
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	foreignImport, err := west.MCS.MulticlusterV1beta1().ServiceImports(ns).Create(bg(), &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	foreignSlice, err := west.Kube.DiscoveryV1().EndpointSlices(ns).Create(bg(), &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "hand-made", Labels: map[string]string{
			mcsapi.LabelServiceName: "keep", mcsapi.LabelSourceCluster: "elsewhere",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   endpoints(ips(1, "10.62.0")),
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	b := startImporter(t, baseOptions(w.kubeconfig, w.contexts...))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, cl := range all {
			_, err := getImport(cl, ns, "drop")
			assert.True(c, apierrors.IsNotFound(err), "orphaned import in %s: %v", cl.Name, err)
			s, err := mirrored(cl, ns, "drop")
			assert.NoError(c, err)
			assert.Empty(c, s, cl.Name)
		}
		_, err := north.Kube.DiscoveryV1().EndpointSlices(ns).Get(bg(), "orphan", metav1.GetOptions{})
		assert.True(c, apierrors.IsNotFound(err), "orphan slice: %v", err)
	}, waitFor, tick)

	writes := b.quiesce(t, 3*time.Second)
	for k := range writes {
		assert.True(t, strings.HasSuffix(k, "/delete"), "after a restart only orphans are written (deleted); got %s in %v", k, writes)
	}
	kept, err := getImport(west, ns, "keep")
	require.NoError(t, err)
	assert.Equal(t, keepImport.UID, kept.UID, "adopted, not recreated")
	assert.Equal(t, keepImport.ResourceVersion, kept.ResourceVersion, "adopted, not rewritten")
	fi, err := getImport(west, ns, "mine")
	require.NoError(t, err)
	assert.Equal(t, foreignImport.ResourceVersion, fi.ResourceVersion, "a ServiceImport we do not own is never touched")
	fs, err := west.Kube.DiscoveryV1().EndpointSlices(ns).Get(bg(), "hand-made", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, foreignSlice.ResourceVersion, fs.ResourceVersion, "an EndpointSlice we do not own is never touched")
}

func TestImportIntoGivesTheSameObjects(t *testing.T) {
	w, a := importing(t)
	east, west, north, all, contexts, kubeconfig := w.east, w.west, w.north, w.all, w.contexts, w.kubeconfig
	// What the default mode makes.
	populate(t, w)
	a.quiesce(t, 2*time.Second)
	a.stop()

	snapshot := worldSnapshot(t, all)
	var rs []*running
	for _, ctx := range contexts {
		o := baseOptions(kubeconfig, contexts...)
		o.ImportInto = []string{ctx}
		rs = append(rs, startImporter(t, o))
	}
	for i, r := range rs {
		w := r.quiesce(t, 3*time.Second)
		assert.Empty(t, w, "importer into %s rewrote what the default mode made", contexts[i])
	}
	assert.Equal(t, snapshot, worldSnapshot(t, all))

	// A new export while north's importer is away: Ready=Pending
	// until the import exists in every cluster with the namespace.
	rs[2].stop()
	ns := "imp-into"
	mkNamespace(t, ns, all...)
	mkService(t, west, ns, "fresh", false, tcpPort("http", 80))
	putSlice(t, west, ns, "fresh", "fresh-1", ips(2, "10.70.0")...)
	mkExport(t, west, ns, "fresh")
	waitEndpoints(t, []*cluster.Cluster{east, west}, ns, "fresh", map[string][]string{"west": {"10.70.0.1", "10.70.0.2"}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		e, err := getExport(west, ns, "fresh")
		if assert.NoError(c, err) {
			assert.Equal(c, "False/Pending", condition(e.Status.Conditions, "Ready"))
			if r := findCond(e.Status.Conditions, "Ready"); assert.NotNil(c, r) {
				assert.Contains(c, r.Message, "north")
			}
		}
	}, waitFor, tick)
	_, err := getImport(north, ns, "fresh")
	require.True(t, apierrors.IsNotFound(err), "nobody imports into north: %v", err)

	// North's importer returns; each importer writes its own cluster only.
	o := baseOptions(kubeconfig, contexts...)
	o.ImportInto = []string{"north"}
	rs[2] = startImporter(t, o)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, cl := range all {
			si, err := getImport(cl, ns, "fresh")
			if !assert.NoError(c, err, cl.Name) {
				continue
			}
			assert.Equal(c, []string{"west"}, clusterIDs(si))
			assert.Equal(c, []mcsv1beta1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}, si.Spec.Ports)
			eps, err := endpointsBySource(cl, ns, "fresh")
			assert.NoError(c, err)
			assert.Equal(c, map[string][]string{"west": {"10.70.0.1", "10.70.0.2"}}, eps, cl.Name)
		}
		_, ready, _, err := exportConditions(west, ns, "fresh")
		assert.NoError(c, err)
		assert.Equal(c, "True/Exported", ready)
	}, waitFor, tick)
	// Only west's importer wrote the conditions of west's export.
	for i, r := range rs {
		var n float64
		for k, v := range r.writes(t) {
			if strings.HasPrefix(k, west.ID+"/ServiceExportStatus/") {
				n += v
			}
		}
		if contexts[i] == "west" {
			assert.Positive(t, n, "west's importer wrote its export's conditions")
		} else {
			assert.Zero(t, n, "importer into %s wrote conditions of an export in west", contexts[i])
		}
	}
	ids := map[string]string{"east": "east-1", "west": "west", "north": "north"}
	for i, r := range rs {
		for k := range r.writes(t) {
			if strings.Contains(k, "/ServiceExportStatus/") {
				continue
			}
			assert.True(t, strings.HasPrefix(k, ids[contexts[i]]+"/"), "importer into %s wrote %s", contexts[i], k)
		}
	}
}

func TestRacingImportersWriteNothingTwice(t *testing.T) {
	w := newTestbed(t)
	east, north, all := w.east, w.north, w.all
	ns := "imp-race"
	mkNamespace(t, ns, all...)
	r1 := startImporter(t, baseOptions(w.kubeconfig, w.contexts...))
	r2 := startImporter(t, baseOptions(w.kubeconfig, w.contexts...))
	mkService(t, east, ns, "web", false, tcpPort("http", 80))
	mkService(t, north, ns, "web", false, tcpPort("http", 80))
	for i := range 3 {
		putSlice(t, east, ns, "web", fmt.Sprintf("web-e%d", i), ips(2, fmt.Sprintf("10.80.%d", i))...)
	}
	for i := range 2 {
		putSlice(t, north, ns, "web", fmt.Sprintf("web-n%d", i), ips(1, fmt.Sprintf("10.81.%d", i))...)
	}
	mkExport(t, east, ns, "web")
	mkExport(t, north, ns, "web")
	waitEndpoints(t, all, ns, "web", map[string][]string{
		"east-1": {"10.80.0.1", "10.80.0.2", "10.80.1.1", "10.80.1.2", "10.80.2.1", "10.80.2.2"},
		"north":  {"10.81.0.1", "10.81.1.1"},
	})
	for _, cl := range all {
		ss, err := mirrored(cl, ns, "web")
		require.NoError(t, err)
		assert.Len(t, ss, 5, "one mirror per source slice, no duplicates, in %s", cl.Name)
		sis, err := cl.MCS.MulticlusterV1beta1().ServiceImports(ns).List(bg(), metav1.ListOptions{})
		require.NoError(t, err)
		assert.Len(t, sis.Items, 1)
	}
	r1.quiesce(t, 2*time.Second)
	r2.quiesce(t, 2*time.Second)
}

func TestVIPSeam(t *testing.T) {
	w := newTestbed(t)
	east, all := w.east, w.all
	ns := "imp-vip"
	mkNamespace(t, ns, all...)
	p := &fakeVIP{ns: ns}
	o := baseOptions(w.kubeconfig, w.contexts...)
	o.VIP = p
	startImporter(t, o)
	mkService(t, east, ns, "web", false, tcpPort("http", 80))
	putSlice(t, east, ns, "web", "web-1", ips(1, "10.85.0")...)
	mkExport(t, east, ns, "web")
	mkService(t, east, ns, "nova", false, tcpPort("http", 80))
	mkExport(t, east, ns, "nova")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, cl := range all {
			id := map[string]string{"east": "east-1"}[cl.Name]
			if id == "" {
				id = cl.Name
			}
			si, err := getImport(cl, ns, "web")
			if assert.NoError(c, err) {
				assert.Equal(c, []string{"240.0.0.1"}, si.Spec.IPs)
				assert.Equal(c, id, si.Annotations["test/vip-cluster"])
				assert.Equal(c, "True/Ready", condition(si.Status.Conditions, "Ready"))
			}
			ss, err := mirrored(cl, ns, "web")
			if assert.NoError(c, err) && assert.Len(c, ss, 1) {
				assert.Equal(c, "derived-web", ss[0].Labels["kubernetes.io/service-name"])
				assert.Equal(c, mcsapi.ManagedByImporter, ss[0].Labels[mcsapi.LabelManagedBy])
			}
			si, err = getImport(cl, ns, "nova")
			if assert.NoError(c, err) {
				assert.Empty(c, si.Spec.IPs)
				assert.Equal(c, "False/NoVIP", condition(si.Status.Conditions, "Ready"))
			}
		}
	}, waitFor, tick)
	rmExport(t, east, ns, "web")
	waitNoImport(t, all, ns, "web")
	require.Eventually(t, func() bool { return p.released(3) }, waitFor, tick, "Release in every cluster")
}

// A replica that never leads never runs the controller; what it made at
// start-up (the controller's queue) must still stop with Run.
func TestStandbyThatNeverLeadsStopsEverything(t *testing.T) {
	w := newTestbed(t)
	now := metav1.NewMicroTime(time.Now())
	_, err := w.east.Kube.CoordinationV1().Leases("kube-system").Create(bg(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "held-elsewhere"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("another-replica"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	o := baseOptions(w.kubeconfig, w.contexts...)
	o.Log = testLogger()
	o.LeaderElect, o.LeaderElectName = true, "held-elsewhere"
	ctx, cancel := context.WithTimeout(bg(), 2*time.Second)
	defer cancel()
	require.NoError(t, importer.Run(ctx, o))
	requireNothingOutlivesRun(t)
}

// A leader whose Lease is taken over stops: Run returns (so that the
// process exits and is restarted), with the metrics server running.
func TestLeaderThatLosesItsLeaseReturns(t *testing.T) {
	w := newTestbed(t)
	o := baseOptions(w.kubeconfig, w.contexts...)
	o.Log = testLogger()
	o.LeaderElect, o.LeaderElectName = true, "taken-over"
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 3*time.Second, 2*time.Second, 500*time.Millisecond
	ready := make(chan string, 1)
	o.OnReady = func(addr string) { ready <- addr }
	done := make(chan error, 1)
	go func() { done <- importer.Run(bg(), o) }()
	select {
	case <-ready: // leading: it only syncs and runs as the leader
	case err := <-done:
		t.Fatalf("Run returned before leading: %v", err)
	case <-time.After(waitFor):
		t.Fatal("never led")
	}
	leases := w.east.Kube.CoordinationV1().Leases("kube-system")
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(bg(), "taken-over", metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.AcquireTime, l.Spec.RenewTime = ptr.To("another-replica"), ptr.To[int32](3600), &now, &now
		_, err = leases.Update(bg(), l, metav1.UpdateOptions{})
		return err
	}))
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "lost leadership")
	case <-time.After(waitFor):
		t.Fatal("Run did not return after its Lease was taken over")
	}
	requireNothingOutlivesRun(t)
}

// requireNothingOutlivesRun: once Run has returned (and no other importer
// runs), everything it started must have stopped.
func requireNothingOutlivesRun(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		buf := make([]byte, 1<<22)
		stacks := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(stacks, "\n\n") {
			for _, pkg := range []string{"mcs-dns/mcs-dns/importer.", "mcs-dns/mcs-dns/importer/", "k8s.io/client-go/tools/cache.", "k8s.io/client-go/util/workqueue.", "controller-runtime/pkg/controller/priorityqueue."} {
				if strings.Contains(g, pkg) {
					t.Logf("still running:\n%s", g)
					return false
				}
			}
		}
		return true
	}, 2*time.Second, 100*time.Millisecond, "Run returned, so everything it started must have stopped")
}

func TestBadOrDuplicateClusterIDIsKeptOut(t *testing.T) {
	w := newTestbed(t)
	for name, tc := range map[string]struct {
		contexts []string
		want     string
	}{
		"duplicate": {[]string{"east", "west", "east-again"}, `have the same cluster ID "east-1"`},
		"invalid":   {[]string{"east", "west", "Bad_ID"}, `cluster ID "Bad_ID" is not valid`},
	} {
		r := startImporter(t, baseOptions(w.kubeconfig, tc.contexts...))
		code, body := readyz(t, r)
		assert.Equal(t, http.StatusOK, code, name)
		assert.Contains(t, body, tc.want, name)
		assert.Contains(t, body, "unknown: cluster ID rejected", name)
		assert.Regexp(t, `member west: up`, body, name)
		r.stop()
	}
	// A context the kubeconfig does not have is a configuration error.
	o := baseOptions(w.kubeconfig, "east", "nowhere")
	o.Log = testLogger()
	err := importer.Run(bg(), o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"nowhere"`)
}

func TestMemberDownAtStartJoinsWhenItAnswers(t *testing.T) {
	w := newTestbed(t)
	east, west, all := w.east, w.west, w.all
	w.northProxy.pause()
	o := baseOptions(w.kubeconfig, w.contexts...)
	o.ConnectTimeout = 2 * time.Second
	// North stays "unknown" (not withdrawn) for the whole test, however
	// long a loaded machine takes to join the other two.
	o.EndpointGracePeriod = waitFor
	started := time.Now()
	r := startImporter(t, o)
	code, body := readyz(t, r)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "member north: unknown: unreachable")
	assert.Equal(t, "unknown", memberState(t, r, "north"))
	ns := "imp-down-at-start"
	mkNamespace(t, ns, all...)
	mkService(t, east, ns, "web", false, tcpPort("http", 80))
	putSlice(t, east, ns, "web", "web-1", ips(1, "10.61.0")...)
	mkExport(t, east, ns, "web")
	waitEndpoints(t, []*cluster.Cluster{east, west}, ns, "web", map[string][]string{"east-1": {"10.61.0.1"}})
	t.Logf("imported among the members that answer %s after start-up", time.Since(started).Round(time.Millisecond))
	back := time.Now()
	w.northProxy.resume(t)
	waitEndpoints(t, all, ns, "web", map[string][]string{"east-1": {"10.61.0.1"}})
	t.Logf("north joined and got the import %s after it answered", time.Since(back).Round(time.Millisecond))
	assert.Equal(t, "up", memberState(t, r, "north"))
}

// readyz returns the status code and body of the importer's /readyz.
func readyz(t *testing.T, r *running) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + r.addr + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// worldSnapshot is every object mcs-importer owns, without server-set metadata.
func worldSnapshot(t *testing.T, cs []*cluster.Cluster) map[string]any {
	out := map[string]any{}
	sel := metav1.ListOptions{LabelSelector: mcsapi.LabelManagedBy + "=" + mcsapi.ManagedByImporter}
	for _, c := range cs {
		sis, err := c.MCS.MulticlusterV1beta1().ServiceImports("").List(bg(), sel)
		require.NoError(t, err)
		for _, si := range sis.Items {
			out[c.Name+"/ServiceImport/"+si.Namespace+"/"+si.Name] = []any{si.UID, si.ResourceVersion, si.Labels, si.Annotations, si.Spec, si.Status}
		}
		ss, err := c.Kube.DiscoveryV1().EndpointSlices("").List(bg(), sel)
		require.NoError(t, err)
		for _, s := range ss.Items {
			out[c.Name+"/EndpointSlice/"+s.Namespace+"/"+s.Name] = []any{s.UID, s.ResourceVersion, s.Labels, s.AddressType, s.Endpoints, s.Ports}
		}
	}
	require.NotEmpty(t, out)
	return out
}

func TestImportFollowsExportsAndEndpoints(t *testing.T) {
	w, _ := importing(t)
	east, west, north := w.east, w.west, w.north
	all := []*cluster.Cluster{east, west, north}
	ns := "imp-life"
	mkNamespace(t, ns, all...)
	mkService(t, east, ns, "web", false, tcpPort("http", 80))
	putSlice(t, east, ns, "web", "web-a", ep{"10.1.0.1", true, "web-0"}, ep{"10.1.0.2", true, "web-1"}, ep{"10.1.0.3", true, "web-2"})
	mkExport(t, east, ns, "web")

	sliceName := aggregate.SliceName("web", "east-1", "web-a")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, cl := range all {
			si, err := getImport(cl, ns, "web")
			if !assert.NoError(c, err, cl.Name) {
				continue
			}
			assert.Equal(c, mcsv1beta1.ClusterSetIP, si.Spec.Type)
			assert.Empty(c, si.Spec.IPs, "no VIP with --vip-mode=none (the tests' base options)")
			assert.Equal(c, []mcsv1beta1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}, si.Spec.Ports)
			assert.Equal(c, []string{"east-1"}, clusterIDs(si), "the ClusterProperty ID, not the context name")
			assert.Equal(c, mcsv1beta1.EndpointSliceObjectsPresent, si.Status.EndpointSliceObjects)
			assert.Equal(c, "True/Ready", condition(si.Status.Conditions, "Ready"))
			assert.Equal(c, mcsapi.ManagedByImporter, si.Labels[mcsapi.LabelManagedBy])
			ss, err := mirrored(cl, ns, "web")
			assert.NoError(c, err)
			if assert.Len(c, ss, 1) {
				s := ss[0]
				assert.Equal(c, sliceName, s.Name)
				assert.Equal(c, map[string]string{
					"multicluster.kubernetes.io/service-name":   "web",
					"multicluster.kubernetes.io/source-cluster": "east-1",
					"endpointslice.kubernetes.io/managed-by":    "mcs-importer.mcs-dns.io",
					"mcs-dns.io/source-managed-by":              "endpointslice-controller.k8s.io",
				}, s.Labels, "the source slice's manager is recorded for the plugin's endpointslice_managers")
				assert.Equal(c, discoveryv1.AddressTypeIPv4, s.AddressType)
				assert.Equal(c, []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}, s.Ports)
				if assert.Len(c, s.Endpoints, 3) {
					assert.Equal(c, "web-0", ptr.Deref(s.Endpoints[0].Hostname, ""))
					assert.True(c, *s.Endpoints[0].Conditions.Ready)
					assert.True(c, *s.Endpoints[0].Conditions.Serving)
					assert.False(c, *s.Endpoints[0].Conditions.Terminating)
					assert.Nil(c, s.Endpoints[0].NodeName)
				}
			}
		}
		e, err := getExport(east, ns, "web")
		if assert.NoError(c, err) {
			for _, typ := range []string{"Valid", "Ready", "Conflict"} {
				cond := findCond(e.Status.Conditions, typ)
				if assert.NotNil(c, cond, typ) {
					assert.Equal(c, e.Generation, cond.ObservedGeneration)
				}
			}
			assert.Equal(c, "True/Valid", condition(e.Status.Conditions, "Valid"))
			assert.Equal(c, "True/Exported", condition(e.Status.Conditions, "Ready"))
			assert.Equal(c, "False/NoConflicts", condition(e.Status.Conditions, "Conflict"))
		}
	}, waitFor, tick)
	validSince := findCond(mustExport(t, east, ns, "web").Status.Conditions, "Valid").LastTransitionTime

	// A second exporter.
	mkService(t, west, ns, "web", false, tcpPort("http", 80))
	putSlice(t, west, ns, "web", "web-w", ips(2, "10.2.0")...)
	mkExport(t, west, ns, "web")
	waitEndpoints(t, all, ns, "web", map[string][]string{
		"east-1": {"10.1.0.1", "10.1.0.2", "10.1.0.3"}, "west": {"10.2.0.1", "10.2.0.2"},
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		si, err := getImport(north, ns, "web")
		if assert.NoError(c, err) {
			assert.Equal(c, []string{"east-1", "west"}, clusterIDs(si))
		}
	}, waitFor, tick)

	// A pod turns unready; scale 3 -> 10 (a second slice) -> 0.
	putSlice(t, east, ns, "web", "web-a", ep{"10.1.0.1", false, "web-0"}, ep{"10.1.0.2", true, "web-1"}, ep{"10.1.0.3", true, "web-2"})
	waitEndpoints(t, all, ns, "web", map[string][]string{
		"east-1": {"10.1.0.1(unready)", "10.1.0.2", "10.1.0.3"}, "west": {"10.2.0.1", "10.2.0.2"},
	})
	ten := ips(10, "10.1.0")
	putSlice(t, east, ns, "web", "web-a", ten[:6]...)
	putSlice(t, east, ns, "web", "web-b", ten[6:]...)
	var want []string
	for _, e := range ten {
		want = append(want, e.ip)
	}
	sortStrings(want)
	waitEndpoints(t, all, ns, "web", map[string][]string{"east-1": want, "west": {"10.2.0.1", "10.2.0.2"}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ss, err := mirrored(west, ns, "web")
		assert.NoError(c, err)
		assert.Len(c, ss, 3, "one mirror per source slice")
	}, waitFor, tick)
	require.NoError(t, east.Kube.DiscoveryV1().EndpointSlices(ns).Delete(bg(), "web-b", metav1.DeleteOptions{}))
	putSlice(t, east, ns, "web", "web-a")
	waitEndpoints(t, all, ns, "web", map[string][]string{"east-1": {}, "west": {"10.2.0.1", "10.2.0.2"}})

	// The Valid condition did not move all along.
	assert.Equal(t, validSince, findCond(mustExport(t, east, ns, "web").Status.Conditions, "Valid").LastTransitionTime)

	// Unexport in west: its slices disappear everywhere, the import is recomputed.
	rmExport(t, west, ns, "web")
	waitEndpoints(t, all, ns, "web", map[string][]string{"east-1": {}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, cl := range all {
			si, err := getImport(cl, ns, "web")
			if assert.NoError(c, err) {
				assert.Equal(c, []string{"east-1"}, clusterIDs(si))
			}
		}
	}, waitFor, tick)

	// Last export gone: the import and its slices are deleted everywhere.
	rmExport(t, east, ns, "web")
	waitNoImport(t, all, ns, "web")
}

// TestSlicePlansCompareWhatChanged: with every member holding a key's
// slices, a change is planned from the slices it changed alone; a mirrored
// slice someone else edits is compared and put right all the same, and the
// next change is planned from what changed again.
func TestSlicePlansCompareWhatChanged(t *testing.T) {
	w := newTestbed(t)
	o := baseOptions(w.kubeconfig, w.contexts...)
	// A resync compares everything: none here, so that only the change
	// itself can have north's copy put right.
	o.Resync = time.Hour
	r := startImporter(t, o)
	east, west, north := w.east, w.west, w.north
	all := []*cluster.Cluster{east, west, north}
	ns := "imp-plans"
	mkNamespace(t, ns, all...)
	for _, c := range []*cluster.Cluster{east, west} {
		mkService(t, c, ns, "web", false, tcpPort("http", 80))
	}
	putSlice(t, east, ns, "web", "web-e", ips(2, "10.1.0")...)
	putSlice(t, west, ns, "web", "web-w", ips(2, "10.2.0")...)
	mkExport(t, east, ns, "web")
	mkExport(t, west, ns, "web")
	waitEndpoints(t, all, ns, "web", map[string][]string{"east-1": {"10.1.0.1", "10.1.0.2"}, "west": {"10.2.0.1", "10.2.0.2"}})
	r.quiesce(t, 2*time.Second)

	plans := func() map[string]float64 { return r.counters(t, "mcs_importer_slice_plans_total") }
	before := plans()
	putSlice(t, east, ns, "web", "web-e", ips(3, "10.1.0")...)
	waitEndpoints(t, all, ns, "web", map[string][]string{"east-1": {"10.1.0.1", "10.1.0.2", "10.1.0.3"}, "west": {"10.2.0.1", "10.2.0.2"}})
	r.quiesce(t, 2*time.Second)
	d := diff(before, plans())
	assert.Positive(t, d["changes"], "members holding the last pass's slices compare only the changed one: %v", d)

	// Someone empties north's copy of west's slice: nothing of ours
	// changed, yet it is compared and rewritten.
	name := aggregate.SliceName("web", "west", "web-w")
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := north.Kube.DiscoveryV1().EndpointSlices(ns).Get(bg(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Endpoints = nil
		_, err = north.Kube.DiscoveryV1().EndpointSlices(ns).Update(bg(), s, metav1.UpdateOptions{})
		return err
	}))
	waitEndpoints(t, all, ns, "web", map[string][]string{"east-1": {"10.1.0.1", "10.1.0.2", "10.1.0.3"}, "west": {"10.2.0.1", "10.2.0.2"}})

	// And the next change again goes by what changed, everywhere right.
	r.quiesce(t, 2*time.Second)
	before = plans()
	putSlice(t, west, ns, "web", "web-w", ips(1, "10.2.0")...)
	waitEndpoints(t, all, ns, "web", map[string][]string{"east-1": {"10.1.0.1", "10.1.0.2", "10.1.0.3"}, "west": {"10.2.0.1"}})
	r.quiesce(t, 2*time.Second)
	d = diff(before, plans())
	assert.Positive(t, d["changes"], "%v", d)
}

func TestPortsUnionOldestExportWins(t *testing.T) {
	w, _ := importing(t)
	east, west, north := w.east, w.west, w.north
	all := []*cluster.Cluster{east, west, north}
	ns := "imp-ports"
	mkNamespace(t, ns, all...)
	// west's export is the oldest, although "east-1" sorts first.
	mkService(t, west, ns, "web", false, tcpPort("http", 80))
	mkExport(t, west, ns, "web")
	time.Sleep(1100 * time.Millisecond) // creationTimestamps have second precision
	mkService(t, east, ns, "web", false, tcpPort("http", 8080), tcpPort("https", 443))
	mkExport(t, east, ns, "web")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, cl := range all {
			si, err := getImport(cl, ns, "web")
			if assert.NoError(c, err) {
				assert.Equal(c, []mcsv1beta1.ServicePort{
					{Name: "http", Protocol: "TCP", Port: 80}, // the oldest export's definition
					{Name: "https", Protocol: "TCP", Port: 443},
				}, si.Spec.Ports)
				assert.Equal(c, []string{"east-1", "west"}, clusterIDs(si))
			}
		}
		for _, cl := range []*cluster.Cluster{east, west} {
			_, _, conflict, err := exportConditions(cl, ns, "web")
			assert.NoError(c, err)
			assert.Equal(c, "True/PortConflict", conflict, "Conflict on every export involved, the oldest (%s) included", west.Name)
		}
	}, waitFor, tick)

	// The oldest goes: the conflict clears.
	rmExport(t, west, ns, "web")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		si, err := getImport(north, ns, "web")
		if assert.NoError(c, err) {
			assert.Equal(c, []mcsv1beta1.ServicePort{{Name: "http", Protocol: "TCP", Port: 8080}, {Name: "https", Protocol: "TCP", Port: 443}}, si.Spec.Ports)
		}
		_, _, conflict, err := exportConditions(east, ns, "web")
		assert.NoError(c, err)
		assert.Equal(c, "False/NoConflicts", conflict)
	}, waitFor, tick)
}

func TestHeadlessAndClusterSetIP(t *testing.T) {
	w, _ := importing(t)
	east, west, north := w.east, w.west, w.north
	all := []*cluster.Cluster{east, west, north}
	ns := "imp-type"
	mkNamespace(t, ns, all...)
	for _, cl := range []*cluster.Cluster{east, west} {
		mkService(t, cl, ns, "db", true, tcpPort("pg", 5432))
		mkExport(t, cl, ns, "db")
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, cl := range all {
			si, err := getImport(cl, ns, "db")
			if assert.NoError(c, err) {
				assert.Equal(c, mcsv1beta1.Headless, si.Spec.Type, "every export headless")
				assert.Len(c, si.Status.Clusters, 2)
			}
		}
		_, _, conflict, err := exportConditions(west, ns, "db")
		assert.NoError(c, err)
		assert.Equal(c, "False/NoConflicts", conflict)
	}, waitFor, tick)

	// A StatefulSet's governing Service exported for long; a ClusterIP
	// Service of the same name exported later changes nothing (the
	// oldest export decides headlessness): the per-endpoint names stay.
	putSlice(t, east, ns, "db", "db-a", ep{"10.93.0.1", true, "db-0"})
	mkService(t, north, ns, "db", false, tcpPort("pg", 5432))
	putSlice(t, north, ns, "db", "db-n", ep{"10.93.1.1", true, ""})
	mkExport(t, north, ns, "db")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, cl := range all {
			_, _, conflict, err := exportConditions(cl, ns, "db")
			assert.NoError(c, err)
			assert.Equal(c, "True/TypeConflict", conflict, cl.Name)
			si, err := getImport(cl, ns, "db")
			if assert.NoError(c, err) {
				assert.Equal(c, mcsv1beta1.Headless, si.Spec.Type, "the oldest export is headless")
				assert.Empty(c, si.Spec.IPs)
				assert.Len(c, si.Status.Clusters, 3)
			}
			eps, err := endpointsBySource(cl, ns, "db")
			assert.NoError(c, err)
			assert.Len(c, eps["east-1"], 1, cl.Name)
			assert.Len(c, eps["north"], 1, cl.Name)
		}
	}, waitFor, tick)

	// The other way round: the oldest is ClusterIP, a newer headless one
	// takes part (conflict raised) but the import stays ClusterSetIP.
	mkService(t, north, ns, "api", false, tcpPort("http", 80))
	mkExport(t, north, ns, "api")
	time.Sleep(1100 * time.Millisecond) // creationTimestamps have second precision
	mkService(t, east, ns, "api", true, tcpPort("http", 80))
	mkExport(t, east, ns, "api")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, cl := range all {
			si, err := getImport(cl, ns, "api")
			if assert.NoError(c, err) {
				assert.Equal(c, mcsv1beta1.ClusterSetIP, si.Spec.Type, "the oldest export is ClusterIP")
			}
		}
		for _, cl := range []*cluster.Cluster{east, north} {
			_, _, conflict, err := exportConditions(cl, ns, "api")
			assert.NoError(c, err)
			assert.Equal(c, "True/TypeConflict", conflict, cl.Name)
		}
	}, waitFor, tick)
}

func TestInvalidExports(t *testing.T) {
	w, _ := importing(t)
	east, west, north := w.east, w.west, w.north
	all := []*cluster.Cluster{east, west, north}
	ns := "imp-invalid"
	mkNamespace(t, ns, all...)

	// ExternalName: Valid=False, no import.
	_, err := east.Kube.CoreV1().Services(ns).Create(bg(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ext"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	mkExport(t, east, ns, "ext")
	// No Service at all: Valid=False, no import.
	mkExport(t, east, ns, "ghost")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		valid, ready, _, err := exportConditions(east, ns, "ext")
		assert.NoError(c, err)
		assert.Equal(c, "False/InvalidServiceType", valid)
		assert.Equal(c, "False/Failed", ready)
		valid, _, _, err = exportConditions(east, ns, "ghost")
		assert.NoError(c, err)
		assert.Equal(c, "False/NoService", valid)
	}, waitFor, tick)
	for _, cl := range all {
		for _, name := range []string{"ext", "ghost"} {
			_, err := getImport(cl, ns, name)
			assert.True(t, apierrors.IsNotFound(err), "%s has an import for invalid export %s: %v", cl.Name, name, err)
		}
	}
	// The Service appears: the import follows.
	mkService(t, east, ns, "ghost", false, tcpPort("http", 80))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, cl := range all {
			_, err := getImport(cl, ns, "ghost")
			assert.NoError(c, err)
		}
		valid, _, _, err := exportConditions(east, ns, "ghost")
		assert.NoError(c, err)
		assert.Equal(c, "True/Valid", valid)
	}, waitFor, tick)

	// Service deleted in one of two exporting clusters: Valid=False/NoService,
	// its endpoints withdrawn, the import stays.
	for _, cl := range []*cluster.Cluster{east, west} {
		mkService(t, cl, ns, "api", false, tcpPort("http", 80))
		putSlice(t, cl, ns, "api", "api-1", ips(1, map[string]string{"east": "10.3.1", "west": "10.3.2"}[cl.Name])...)
		mkExport(t, cl, ns, "api")
	}
	waitEndpoints(t, all, ns, "api", map[string][]string{"east-1": {"10.3.1.1"}, "west": {"10.3.2.1"}})
	require.NoError(t, east.Kube.CoreV1().Services(ns).Delete(bg(), "api", metav1.DeleteOptions{}))
	waitEndpoints(t, all, ns, "api", map[string][]string{"west": {"10.3.2.1"}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		valid, ready, _, err := exportConditions(east, ns, "api")
		assert.NoError(c, err)
		assert.Equal(c, "False/NoService", valid)
		assert.Equal(c, "False/Failed", ready)
		si, err := getImport(north, ns, "api")
		if assert.NoError(c, err) {
			assert.Equal(c, []string{"west"}, clusterIDs(si))
		}
	}, waitFor, tick)

	// The last valid one made ExternalName: the import goes everywhere.
	svc, err := west.Kube.CoreV1().Services(ns).Get(bg(), "api", metav1.GetOptions{})
	require.NoError(t, err)
	svc.Spec.Type = corev1.ServiceTypeExternalName
	svc.Spec.ExternalName = "api.example.com"
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs, svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = "", nil, nil, nil
	svc.Spec.Selector = nil
	_, err = west.Kube.CoreV1().Services(ns).Update(bg(), svc, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitNoImport(t, all, ns, "api")
	// Conditions follow the imports (a full pass after the serve pass).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		valid, _, _, err := exportConditions(west, ns, "api")
		assert.NoError(c, err)
		assert.Equal(c, "False/InvalidServiceType", valid)
	}, waitFor, tick)
}

func TestNamespaceAppearingLater(t *testing.T) {
	w, _ := importing(t)
	east, west, north := w.east, w.west, w.north
	ns := "imp-late"
	mkNamespace(t, ns, east, west)
	mkService(t, east, ns, "web", false, tcpPort("http", 80))
	putSlice(t, east, ns, "web", "web-1", ips(1, "10.4.0")...)
	mkExport(t, east, ns, "web")
	waitEndpoints(t, []*cluster.Cluster{east, west}, ns, "web", map[string][]string{"east-1": {"10.4.0.1"}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, ready, _, err := exportConditions(east, ns, "web")
		assert.NoError(c, err)
		assert.Equal(c, "True/Exported", ready, "only clusters with the namespace count")
	}, waitFor, tick)
	_, err := north.Kube.CoreV1().Namespaces().Get(bg(), ns, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the importer never creates namespaces: %v", err)

	mkNamespace(t, ns, north)
	waitEndpoints(t, []*cluster.Cluster{north}, ns, "web", map[string][]string{"east-1": {"10.4.0.1"}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := getImport(north, ns, "web")
		assert.NoError(c, err)
	}, waitFor, tick)
}

func TestExportedLabelsAndAnnotations(t *testing.T) {
	w, _ := importing(t)
	east, west, north := w.east, w.west, w.north
	all := []*cluster.Cluster{east, west, north}
	ns := "imp-meta"
	mkNamespace(t, ns, all...)
	mkService(t, east, ns, "web", false, tcpPort("http", 80))
	mkExport(t, east, ns, "web", func(e *mcsv1beta1.ServiceExport) {
		e.Spec.ExportedLabels = map[string]string{"tier": "web"}
		e.Spec.ExportedAnnotations = map[string]string{"team": "a"}
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, cl := range all {
			si, err := getImport(cl, ns, "web")
			if assert.NoError(c, err) {
				assert.Equal(c, map[string]string{"tier": "web", mcsapi.LabelManagedBy: mcsapi.ManagedByImporter}, si.Labels)
				assert.Equal(c, map[string]string{"team": "a",
					aggregate.AnnotationExportedLabels: "tier", aggregate.AnnotationExportedAnnotations: "team"}, si.Annotations)
			}
		}
	}, waitFor, tick)
	mkService(t, west, ns, "web", false, tcpPort("http", 80))
	mkExport(t, west, ns, "web", func(e *mcsv1beta1.ServiceExport) {
		e.Spec.ExportedLabels = map[string]string{"tier": "api"}
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, cl := range []*cluster.Cluster{east, west} {
			_, _, conflict, err := exportConditions(cl, ns, "web")
			assert.NoError(c, err)
			assert.Equal(c, "True/LabelsConflict,AnnotationsConflict", conflict, cl.Name)
		}
		si, err := getImport(north, ns, "web")
		if assert.NoError(c, err) {
			assert.Equal(c, "web", si.Labels["tier"], "the oldest export's labels")
			assert.Equal(c, []string{"east-1", "west"}, clusterIDs(si))
		}
	}, waitFor, tick)

	// A spec change: observedGeneration follows, lastTransitionTime of
	// unchanged statuses does not, the import follows the oldest export.
	e := mustExport(t, east, ns, "web")
	validSince := findCond(e.Status.Conditions, "Valid").LastTransitionTime
	e.Spec.ExportedLabels = map[string]string{"tier": "api"}
	e.Spec.ExportedAnnotations = nil
	upd, err := east.MCS.MulticlusterV1beta1().ServiceExports(ns).Update(bg(), e, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Greater(t, upd.Generation, e.Generation)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		e, err := getExport(east, ns, "web")
		if assert.NoError(c, err) {
			for _, typ := range []string{"Valid", "Ready", "Conflict"} {
				if cond := findCond(e.Status.Conditions, typ); assert.NotNil(c, cond) {
					assert.Equal(c, upd.Generation, cond.ObservedGeneration, typ)
				}
			}
			assert.Equal(c, validSince, findCond(e.Status.Conditions, "Valid").LastTransitionTime)
			assert.Equal(c, "False/NoConflicts", condition(e.Status.Conditions, "Conflict"), "west has the same labels now and neither has annotations")
		}
		for _, cl := range all {
			si, err := getImport(cl, ns, "web")
			if assert.NoError(c, err) {
				assert.Equal(c, "api", si.Labels["tier"])
				assert.Equal(c, map[string]string{aggregate.AnnotationExportedLabels: "tier", aggregate.AnnotationExportedAnnotations: ""},
					si.Annotations, "only the records of what was copied")
			}
		}
	}, waitFor, tick)
}

func TestForeignObjectsAreLeftAlone(t *testing.T) {
	w, _ := importing(t)
	east, west, north := w.east, w.west, w.north
	all := []*cluster.Cluster{east, west, north}
	ns := "imp-foreign"
	mkNamespace(t, ns, all...)
	theirs, err := north.MCS.MulticlusterV1beta1().ServiceImports(ns).Create(bg(), &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"owner": "someone"}},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{{Port: 1}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	handMade, err := west.Kube.DiscoveryV1().EndpointSlices(ns).Create(bg(), &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-by-hand", Labels: map[string]string{
			mcsapi.LabelServiceName: "web", mcsapi.LabelSourceCluster: "elsewhere", mcsapi.LabelManagedBy: "someone-else",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   endpoints(ips(1, "10.5.9")),
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// In west, someone else's slice holds the name of the mirror of
	// east's web-2: that mirror waits, the import and the rest are served.
	heldName := aggregate.SliceName("web", "east-1", "web-2")
	held, err := west.Kube.DiscoveryV1().EndpointSlices(ns).Create(bg(), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: heldName},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   endpoints(ips(1, "10.5.8")),
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	mkService(t, east, ns, "web", false, tcpPort("http", 80))
	putSlice(t, east, ns, "web", "web-1", ips(1, "10.5.0")...)
	putSlice(t, east, ns, "web", "web-2", ips(1, "10.5.1")...)
	mkExport(t, east, ns, "web")
	waitEndpoints(t, []*cluster.Cluster{east}, ns, "web", map[string][]string{"east-1": {"10.5.0.1", "10.5.1.1"}})
	waitEndpoints(t, []*cluster.Cluster{west}, ns, "web", map[string][]string{"east-1": {"10.5.0.1"}, "elsewhere": {"10.5.9.1"}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		e, err := getExport(east, ns, "web")
		if assert.NoError(c, err) {
			assert.Equal(c, "False/Failed", condition(e.Status.Conditions, "Ready"))
			if r := findCond(e.Status.Conditions, "Ready"); assert.NotNil(c, r) {
				assert.Contains(c, r.Message, "north: ServiceImport "+ns+"/web")
				assert.Contains(c, r.Message, "west: EndpointSlice "+ns+"/"+heldName)
			}
		}
		si, err := getImport(west, ns, "web")
		if assert.NoError(c, err) {
			assert.Equal(c, mcsapi.ManagedByImporter, si.Labels[mcsapi.LabelManagedBy])
			if r := findCond(si.Status.Conditions, "Ready"); assert.NotNil(c, r) {
				assert.Equal(c, "False/Pending", string(r.Status)+"/"+r.Reason)
				assert.Contains(c, r.Message, heldName)
			}
		}
	}, waitFor, tick)
	si, err := getImport(north, ns, "web")
	require.NoError(t, err)
	assert.Equal(t, theirs.ResourceVersion, si.ResourceVersion, "their ServiceImport is left alone")
	ss, err := mirrored(north, ns, "web")
	require.NoError(t, err)
	assert.Empty(t, ss, "no slices for an import we do not own")
	hm, err := west.Kube.DiscoveryV1().EndpointSlices(ns).Get(bg(), "web-by-hand", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, handMade.ResourceVersion, hm.ResourceVersion, "their EndpointSlice is left alone")
	hs, err := west.Kube.DiscoveryV1().EndpointSlices(ns).Get(bg(), heldName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, held.ResourceVersion, hs.ResourceVersion, "the slice holding our mirror's name is left alone")

	// The name is freed: the mirror follows (the key is retried, their
	// slice's events are not ours), and west's import is Ready.
	require.NoError(t, west.Kube.DiscoveryV1().EndpointSlices(ns).Delete(bg(), heldName, metav1.DeleteOptions{}))
	waitEndpoints(t, []*cluster.Cluster{west}, ns, "web", map[string][]string{"east-1": {"10.5.0.1", "10.5.1.1"}, "elsewhere": {"10.5.9.1"}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		si, err := getImport(west, ns, "web")
		if assert.NoError(c, err) {
			assert.Equal(c, "True/Ready", condition(si.Status.Conditions, "Ready"))
		}
	}, waitFor, tick)

	// Their import goes: ours takes its place.
	require.NoError(t, north.MCS.MulticlusterV1beta1().ServiceImports(ns).Delete(bg(), "web", metav1.DeleteOptions{}))
	waitEndpoints(t, []*cluster.Cluster{north}, ns, "web", map[string][]string{"east-1": {"10.5.0.1", "10.5.1.1"}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		si, err := getImport(north, ns, "web")
		if assert.NoError(c, err) {
			assert.Equal(c, mcsapi.ManagedByImporter, si.Labels[mcsapi.LabelManagedBy])
		}
		_, ready, _, err := exportConditions(east, ns, "web")
		assert.NoError(c, err)
		assert.Equal(c, "True/Exported", ready)
	}, waitFor, tick)
}

func TestUnreachableMember(t *testing.T) {
	w, a := importing(t)
	east, west, north, p := w.east, w.west, w.north, w.northProxy
	all := []*cluster.Cluster{east, west, north}
	ns := "imp-grace"
	mkNamespace(t, ns, all...)
	for _, cl := range []*cluster.Cluster{east, north} {
		mkService(t, cl, ns, "web", false, tcpPort("http", 80))
		mkExport(t, cl, ns, "web")
	}
	putSlice(t, east, ns, "web", "web-1", ips(1, "10.8.1")...)
	putSlice(t, north, ns, "web", "web-1", ips(2, "10.8.3")...)
	mkService(t, north, ns, "gone", false, tcpPort("http", 80))
	putSlice(t, north, ns, "gone", "gone-1", ips(1, "10.8.4")...)
	mkExport(t, north, ns, "gone")
	both := map[string][]string{"east-1": {"10.8.1.1"}, "north": {"10.8.3.1", "10.8.3.2"}}
	waitEndpoints(t, all, ns, "web", both)
	waitEndpoints(t, all, ns, "gone", map[string][]string{"north": {"10.8.4.1"}})
	westImport, err := getImport(west, ns, "web")
	require.NoError(t, err)
	eastSlice, err := west.Kube.DiscoveryV1().EndpointSlices(ns).Get(bg(), aggregate.SliceName("web", "east-1", "web-1"), metav1.GetOptions{})
	require.NoError(t, err)

	cut := time.Now()
	p.pause()
	// Within the grace period north's last known endpoints stay served.
	require.Eventually(t, func() bool { return memberState(t, a, "north") == "unreachable" }, waitFor, 20*time.Millisecond)
	for _, cl := range []*cluster.Cluster{east, west} {
		eps, err := endpointsBySource(cl, ns, "web")
		require.NoError(t, err)
		assert.Equal(t, both, eps, "within the grace period, in %s", cl.Name)
	}
	// After it, they are withdrawn; east's export is unaffected.
	waitEndpoints(t, []*cluster.Cluster{east, west}, ns, "web", map[string][]string{"east-1": {"10.8.1.1"}})
	assert.GreaterOrEqual(t, time.Since(cut), 3*time.Second, "withdrawn only after the grace period")
	waitNoImport(t, []*cluster.Cluster{east, west}, ns, "gone")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		si, err := getImport(west, ns, "web")
		if assert.NoError(c, err) {
			assert.Equal(c, []string{"east-1"}, clusterIDs(si))
		}
		_, ready, _, err := exportConditions(east, ns, "web")
		assert.NoError(c, err)
		assert.Equal(c, "True/Exported", ready)
	}, waitFor, tick)

	// Meanwhile, behind the importer's back: north's "gone" is unexported
	// and its web gains an endpoint.
	rmExport(t, north, ns, "gone")
	putSlice(t, north, ns, "web", "web-1", ips(3, "10.8.3")...)

	// North returns: a full resync converges without resurrecting "gone".
	var resurrected atomic.Bool
	stopWatch := make(chan struct{})
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := getImport(west, ns, "gone"); err == nil {
				resurrected.Store(true)
			}
		}
	}()
	p.resume(t)
	waitEndpoints(t, all, ns, "web", map[string][]string{"east-1": {"10.8.1.1"}, "north": {"10.8.3.1", "10.8.3.2", "10.8.3.3"}})
	waitNoImport(t, all, ns, "gone")
	close(stopWatch)
	<-watchDone
	assert.False(t, resurrected.Load(), "a stale cache resurrected an unexported service")
	si, err := getImport(west, ns, "web")
	require.NoError(t, err)
	assert.Equal(t, westImport.UID, si.UID, "the import lived on throughout")
	s, err := west.Kube.DiscoveryV1().EndpointSlices(ns).Get(bg(), eastSlice.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, eastSlice.UID, s.UID, "east's endpoints were never withdrawn")
	assert.Equal(t, eastSlice.ResourceVersion, s.ResourceVersion, "east's endpoints were never rewritten")
	require.Eventually(t, func() bool { return memberState(t, a, "north") == "up" }, waitFor, tick)
}

func memberState(t *testing.T, r *running, cluster string) string {
	mfs, err := r.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "mcs_importer_member_state" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["cluster"] == cluster && m.GetGauge().GetValue() == 1 {
				return l["state"]
			}
		}
	}
	return ""
}

func waitEndpoints(t *testing.T, cs []*cluster.Cluster, ns, svc string, want map[string][]string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, cl := range cs {
			got, err := endpointsBySource(cl, ns, svc)
			assert.NoError(c, err)
			assert.Equal(c, want, got, "endpoints of %s/%s in %s", ns, svc, cl.Name)
		}
	}, waitFor, tick)
}

func waitNoImport(t *testing.T, cs []*cluster.Cluster, ns, name string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, cl := range cs {
			_, err := getImport(cl, ns, name)
			assert.True(c, apierrors.IsNotFound(err), "import %s/%s in %s: %v", ns, name, cl.Name, err)
			ss, err := mirrored(cl, ns, name)
			assert.NoError(c, err)
			assert.Empty(c, ss, "slices of %s/%s in %s", ns, name, cl.Name)
		}
	}, waitFor, tick)
}

func findCond(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

func mustExport(t *testing.T, c *cluster.Cluster, ns, name string) *mcsv1beta1.ServiceExport {
	e, err := getExport(c, ns, name)
	require.NoError(t, err)
	return e
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// fakeVIP assigns 240.0.0.1 to "web" in its namespace, none to others, and
// says so in the import's Ready condition.
type fakeVIP struct {
	ns       string
	mu       sync.Mutex
	releases map[string]bool
}

func (f *fakeVIP) Assign(_ context.Context, cluster string, si *mcsv1beta1.ServiceImport) (vip.Assignment, error) {
	if si.Namespace != f.ns {
		return vip.Assignment{}, nil
	}
	if si.Name != "web" {
		return vip.Assignment{Ready: &metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NoVIP", Message: "none left"}}, nil
	}
	return vip.Assignment{
		IPs:         []string{"240.0.0.1"},
		Annotations: map[string]string{"test/vip-cluster": cluster},
		SliceLabels: map[string]string{"kubernetes.io/service-name": "derived-web"},
	}, nil
}

func (f *fakeVIP) Release(_ context.Context, cluster, ns, name string) error {
	if ns == f.ns && name == "web" {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.releases == nil {
			f.releases = map[string]bool{}
		}
		f.releases[cluster] = true
	}
	return nil
}

func (f *fakeVIP) released(n int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.releases) == n
}

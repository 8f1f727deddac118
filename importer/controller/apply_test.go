package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"

	"github.com/mcs-dns/mcs-dns/importer/aggregate"
	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/importer/write"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// The writer against a fake clientset: the API server's answers a real
// one gives rarely (conflicts, races with other writers, quotas, webhook
// denials), injected.

var slicesResource = schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}

// actions lists the verb and name of every write the clientset saw.
func actions(f *k8stesting.Fake) []string {
	var out []string
	for _, a := range f.Actions() {
		if n, ok := writtenName(a); ok {
			out = append(out, a.GetVerb()+" "+n)
		}
	}
	return out
}

// writtenName is the name of the object a create, update or delete writes.
func writtenName(a k8stesting.Action) (string, bool) {
	switch a.GetVerb() {
	case "create", "update":
		return a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName(), true
	case "delete":
		return a.(k8stesting.DeleteAction).GetName(), true
	}
	return "", false
}

// refuse makes verb on resource fail with err for the objects named.
func refuse(f *k8stesting.Fake, verb, resource string, err error, names ...string) {
	f.PrependReactor(verb, resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		n, _ := writtenName(a)
		for _, want := range names {
			if n == want {
				return true, nil, err
			}
		}
		return false, nil, nil
	})
}

func TestWriteSlicesInjectedFaults(t *testing.T) {
	// In the member: "stale" (ours, out of date), "old" (ours, no longer
	// wanted), "taken" (someone else's, with a name we want).
	stale := mirrored("stale", "east", "10.0.0.1", false)
	old := mirrored("old", "east", "10.0.0.9", true)
	taken := mirrored("taken", "east", "10.0.0.7", true)
	taken.Labels[mcsapi.LabelManagedBy] = "someone-else"
	kube := fake.NewClientset(stale, old, taken)
	c := newTestController(t)
	v := view{m: &members.Member{ID: "east", Kube: kube}}

	want := []*discoveryv1.EndpointSlice{
		mirrored("stale", "east", "10.0.0.1", true),
		mirrored("quota", "east", "10.0.0.2", true),
		mirrored("taken", "east", "10.0.0.3", true),
		mirrored("fresh", "east", "10.0.0.4", true),
	}
	// The cache has ours but not theirs (it only holds what we manage).
	plan := planSlices(want, []*discoveryv1.EndpointSlice{stale, old}, vip.Assignment{})

	conflicts := 0
	kube.PrependReactor("update", "endpointslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			conflicts++
			return true, nil, apierrors.NewConflict(slicesResource, "stale", errors.New("modified"))
		}
		return false, nil, nil
	})
	refuse(&kube.Fake, "create", "endpointslices",
		apierrors.NewForbidden(slicesResource, "quota", errors.New("exceeded quota: q")), "quota")
	refuse(&kube.Fake, "delete", "endpointslices", &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 400, Reason: metav1.StatusReasonBadRequest,
		Message: `admission webhook "keep.example.com" denied the request`,
	}}, "old")

	held, err := c.writeSlices(t.Context(), v, "ns", plan)
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(errors.Unwrap(err)) || containsForbidden(err), "the quota is reported: %v", err)
	assert.Contains(t, err.Error(), "denied the request", "the webhook too")
	require.Len(t, held, 1)
	assert.Equal(t, "taken", held[0].Name)

	// Every other write went through: the writes (in parallel, in any
	// order), then the removals.
	wrote := actions(&kube.Fake)
	require.NotEmpty(t, wrote)
	assert.ElementsMatch(t, []string{
		"update stale", "update stale", // a conflict, then from the live object
		"create quota",
		"create taken", // already exists: theirs, left alone
		"create fresh",
	}, wrote[:len(wrote)-1])
	assert.Equal(t, "delete old", wrote[len(wrote)-1], "removals last")
	live, err := kube.DiscoveryV1().EndpointSlices("ns").Get(t.Context(), "taken", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "someone-else", live.Labels[mcsapi.LabelManagedBy])
	assert.Equal(t, "10.0.0.7", live.Endpoints[0].Addresses[0], "theirs is never written")
	got, err := kube.DiscoveryV1().EndpointSlices("ns").Get(t.Context(), "stale", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, *got.Endpoints[0].Conditions.Ready)
	assert.Equal(t, 1.0, testutil.ToFloat64(c.metrics.Errors.WithLabelValues("east", "create EndpointSlice")))
	assert.Equal(t, 1.0, testutil.ToFloat64(c.metrics.Errors.WithLabelValues("east", "delete EndpointSlice")))
	assert.Equal(t, 2.0, testutil.ToFloat64(c.metrics.WriteConflicts.WithLabelValues("east", kindSlice)), "the update's conflict and the create of theirs")

	// Next time the held name is looked up before any create: no
	// failing write is counted while it stays theirs.
	kube.ClearActions()
	plan = planSlices([]*discoveryv1.EndpointSlice{mirrored("taken", "east", "10.0.0.3", true)}, nil, vip.Assignment{})
	held, err = c.writeSlices(t.Context(), v, "ns", plan)
	require.NoError(t, err)
	require.Len(t, held, 1)
	assert.Empty(t, actions(&kube.Fake))

	// Once it is free, ours is made.
	require.NoError(t, kube.DiscoveryV1().EndpointSlices("ns").Delete(t.Context(), "taken", metav1.DeleteOptions{}))
	kube.ClearActions()
	held, err = c.writeSlices(t.Context(), v, "ns", plan)
	require.NoError(t, err)
	assert.Empty(t, held)
	assert.Equal(t, []string{"create taken"}, actions(&kube.Fake))
}

// newTestController is a controller without members, for the writer's
// tests (its queue stopped at the end).
func newTestController(t *testing.T) *Controller {
	c := New(Options{})
	t.Cleanup(c.ShutDown)
	return c
}

func containsForbidden(err error) bool {
	type multi interface{ Unwrap() []error }
	var m multi
	if !errors.As(err, &m) {
		return false
	}
	for _, e := range m.Unwrap() {
		if apierrors.IsForbidden(e) {
			return true
		}
	}
	return false
}

func TestWriteSlicesHeldImportEndpointsOnly(t *testing.T) {
	cur := mirrored("east-a", "east", "10.0.0.1", true)
	kube := fake.NewClientset(cur)
	c := newTestController(t)
	v := view{m: &members.Member{ID: "east", Kube: kube}}
	d := mirrored("east-a", "east", "10.0.0.1", false)
	d.Labels["extra"] = "x"
	plan := planSeenEndpoints(members.HoldAllBut("east"), []*discoveryv1.EndpointSlice{d}, []*discoveryv1.EndpointSlice{cur})
	_, err := c.writeSlices(t.Context(), v, "ns", plan)
	require.NoError(t, err)
	got, err := kube.DiscoveryV1().EndpointSlices("ns").Get(t.Context(), "east-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, *got.Endpoints[0].Conditions.Ready)
	assert.NotContains(t, got.Labels, "extra", "only endpoints change under a hold")

	// Deleted meanwhile (the cache is behind): never made anew.
	require.NoError(t, kube.DiscoveryV1().EndpointSlices("ns").Delete(t.Context(), "east-a", metav1.DeleteOptions{}))
	kube.ClearActions()
	_, err = c.writeSlices(t.Context(), v, "ns", plan)
	require.NoError(t, err)
	assert.Equal(t, []string{"update east-a"}, actions(&kube.Fake))
}

func TestWriteImportYieldsAndAdopts(t *testing.T) {
	desired := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: map[string]string{
			mcsapi.LabelManagedBy: mcsapi.ManagedByImporter,
		}},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.9.0.1"}},
	}
	t.Run("theirs has the name", func(t *testing.T) {
		theirs := desired.DeepCopy()
		theirs.Labels = nil
		theirs.Spec.IPs = []string{"10.1.1.1"}
		mcs := mcsfake.NewSimpleClientset(theirs)
		c := newTestController(t)
		m := &members.Member{ID: "east", MCS: mcs}
		_, out, err := c.writeImport(t.Context(), m, desired, nil)
		require.NoError(t, err)
		assert.Equal(t, "yielded", out.String())
		live, err := mcs.MulticlusterV1beta1().ServiceImports("ns").Get(t.Context(), "web", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, []string{"10.1.1.1"}, live.Spec.IPs, "theirs is never written")
	})
	t.Run("ours, the cache behind", func(t *testing.T) {
		ours := desired.DeepCopy()
		ours.Spec.IPs = []string{"10.9.0.2"}
		mcs := mcsfake.NewSimpleClientset(ours)
		c := newTestController(t)
		m := &members.Member{ID: "east", MCS: mcs}
		got, out, err := c.writeImport(t.Context(), m, desired, nil)
		require.NoError(t, err)
		assert.Equal(t, "updated", out.String())
		assert.Equal(t, []string{"10.9.0.1"}, got.Spec.IPs)
	})
	t.Run("a webhook denies the update", func(t *testing.T) {
		ours := desired.DeepCopy()
		ours.Spec.IPs = []string{"10.9.0.2"}
		mcs := mcsfake.NewSimpleClientset(ours)
		refuse(&mcs.Fake, "update", "serviceimports", apierrors.NewForbidden(schema.GroupResource{Resource: "serviceimports"}, "web", errors.New("denied by policy")), "web")
		c := newTestController(t)
		m := &members.Member{ID: "east", MCS: mcs}
		_, _, err := c.writeImport(t.Context(), m, desired, ours)
		require.Error(t, err)
		assert.Equal(t, 1.0, testutil.ToFloat64(c.metrics.Errors.WithLabelValues("east", "update ServiceImport")))
	})
}

// derivedFixture is a member "east" whose API server holds our import
// ns/web (ClusterSetIP, VIP 10.96.0.10) and its derived Service, and whose
// cache holds the derived Service and whatever cached says.
func derivedFixture(t *testing.T, cached ...runtime.Object) (*Controller, *members.Member, *fake.Clientset, *mcsfake.Clientset) {
	t.Helper()
	dn := vip.DerivedName("ns", "web")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: dn, UID: "svc-uid", Labels: map[string]string{
			mcsapi.LabelAppManagedBy: mcsapi.ManagedByImporter, mcsapi.LabelDerivedFor: "web",
		}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	imp := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "imp-uid", Labels: map[string]string{
			mcsapi.LabelManagedBy: mcsapi.ManagedByImporter,
		}, Annotations: map[string]string{mcsapi.AnnotationDerivedService: dn}},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.96.0.10"},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	kube := fake.NewClientset(svc)
	mcs := mcsfake.NewSimpleClientset(imp)
	m := &members.Member{ID: "east", Kube: kube, MCS: mcs, Importing: true}
	m.UseFixedCaches(append([]runtime.Object{svc}, cached...)...)
	c := New(Options{Members: members.Static{m}, VIP: vip.NewDerived(members.Static{m})})
	t.Cleanup(c.ShutDown)
	return c, m, kube, mcs
}

// A removal whose cache has not seen the import yet must not give up the
// VIP the import names: the import is read, and deleted, first.
func TestRemoveImportCacheBehind(t *testing.T) {
	t.Run("the import is deleted before its VIP", func(t *testing.T) {
		c, m, kube, mcs := derivedFixture(t)
		require.NoError(t, c.removeImport(t.Context(), view{m: m, c: m.Caches(), up: true}, "ns", "web", nil))
		assert.Equal(t, []string{"delete web"}, actions(&mcs.Fake))
		assert.Equal(t, []string{"delete " + vip.DerivedName("ns", "web")}, actions(&kube.Fake))
		_, err := mcs.MulticlusterV1beta1().ServiceImports("ns").Get(t.Context(), "web", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "the import is gone: %v", err)
	})
	t.Run("the import cannot be read: the VIP stays", func(t *testing.T) {
		c, m, kube, mcs := derivedFixture(t)
		mcs.PrependReactor("get", "serviceimports", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewServiceUnavailable("the API server is going away")
		})
		require.Error(t, c.removeImport(t.Context(), view{m: m, c: m.Caches(), up: true}, "ns", "web", nil))
		assert.Empty(t, actions(&kube.Fake), "no derived Service deleted under an import that may name it")
	})
	t.Run("the import cannot be deleted: the VIP stays", func(t *testing.T) {
		c, m, kube, mcs := derivedFixture(t)
		refuse(&mcs.Fake, "delete", "serviceimports", apierrors.NewForbidden(schema.GroupResource{Resource: "serviceimports"}, "web", errors.New("denied")), "web")
		require.Error(t, c.removeImport(t.Context(), view{m: m, c: m.Caches(), up: true}, "ns", "web", nil))
		assert.Empty(t, actions(&kube.Fake))
	})
}

// An import that becomes Headless says so before its derived Service (and
// VIP) goes, and keeps both when that write fails.
func TestHeadlessReleasesVIPAfterTheImport(t *testing.T) {
	headless := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: map[string]string{
			mcsapi.LabelManagedBy: mcsapi.ManagedByImporter,
		}},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless,
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	target := func() importTarget {
		return importTarget{ns: "ns", name: "web", res: &aggregate.Result{Import: headless.DeepCopy()}, active: true, pass: passServe}
	}
	// settled: the fixture with its import cached, and the type change
	// to Headless settled.
	settled := func(t *testing.T) (*Controller, *members.Member, *fake.Clientset, *mcsfake.Clientset) {
		c, m, kube, mcs := derivedFixture(t, ns)
		cur, err := mcs.MulticlusterV1beta1().ServiceImports("ns").Get(t.Context(), "web", metav1.GetOptions{})
		require.NoError(t, err)
		m.UseFixedCaches(ns, cur, mustGetService(t, kube))
		settleTypes(t, c, m, target())
		return c, m, kube, mcs
	}
	t.Run("written, then released", func(t *testing.T) {
		c, m, kube, mcs := settled(t)
		_, err := c.applyImport(t.Context(), view{m: m, c: m.Caches(), up: true}, target())
		require.NoError(t, err)
		live, err := mcs.MulticlusterV1beta1().ServiceImports("ns").Get(t.Context(), "web", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, mcsv1beta1.Headless, live.Spec.Type)
		assert.Empty(t, live.Spec.IPs)
		assert.Equal(t, []string{"delete " + vip.DerivedName("ns", "web")}, actions(&kube.Fake))
	})
	t.Run("the import write fails: the VIP stays", func(t *testing.T) {
		c, m, kube, mcs := settled(t)
		refuse(&mcs.Fake, "update", "serviceimports", apierrors.NewForbidden(schema.GroupResource{Resource: "serviceimports"}, "web", errors.New("denied")), "web")
		_, err := c.applyImport(t.Context(), view{m: m, c: m.Caches(), up: true}, target())
		require.Error(t, err)
		assert.Empty(t, actions(&kube.Fake), "the import still names the VIP: its Service stays")
	})
}

func mustGetService(t *testing.T, kube *fake.Clientset) *corev1.Service {
	t.Helper()
	svc, err := kube.CoreV1().Services("ns").Get(t.Context(), vip.DerivedName("ns", "web"), metav1.GetOptions{})
	require.NoError(t, err)
	return svc
}

// settleTypes runs applyImport of t once, which finds a type change and
// leaves the import as it is (checked: the VIP and its Service stay),
// then moves c's clock past typeChangeSettle, so that the next
// applyImport makes the change.
func settleTypes(t *testing.T, c *Controller, m *members.Member, tg importTarget) {
	t.Helper()
	now := time.Now()
	c.now = func() time.Time { return now }
	kube := m.Kube.(*fake.Clientset)
	mcs := m.MCS.(*mcsfake.Clientset)
	_, err := c.applyImport(t.Context(), view{m: m, c: m.Caches(), up: true}, tg)
	require.NoError(t, err)
	live, err := mcs.MulticlusterV1beta1().ServiceImports(tg.ns).Get(t.Context(), tg.name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, mcsv1beta1.ClusterSetIP, live.Spec.Type, "the type waits to settle")
	assert.Equal(t, []string{"10.96.0.10"}, live.Spec.IPs, "and the VIP stays")
	assert.Empty(t, actions(&kube.Fake), "the derived Service stays")
	kube.ClearActions()
	mcs.ClearActions()
	now = now.Add(typeChangeSettle)
}

// A decided type that flips back before it has settled changes nothing;
// one that lasts is taken.
func TestTypeChangeSettles(t *testing.T) {
	var s typeSettle
	t0 := time.Now()
	ok, wait := s.settled("east/ns/web", mcsv1beta1.ClusterSetIP, mcsv1beta1.Headless, t0)
	assert.False(t, ok)
	assert.Equal(t, typeChangeSettle, wait)
	ok, _ = s.settled("east/ns/web", mcsv1beta1.ClusterSetIP, mcsv1beta1.ClusterSetIP, t0.Add(50*time.Millisecond))
	assert.True(t, ok, "back to what it holds: nothing to do")
	ok, _ = s.settled("east/ns/web", mcsv1beta1.ClusterSetIP, mcsv1beta1.Headless, t0.Add(typeChangeSettle))
	assert.False(t, ok, "the flip back started the wait again")
	ok, wait = s.settled("east/ns/web", mcsv1beta1.ClusterSetIP, mcsv1beta1.Headless, t0.Add(typeChangeSettle+time.Second))
	assert.False(t, ok)
	assert.Equal(t, time.Second, wait)
	ok, _ = s.settled("east/ns/web", mcsv1beta1.ClusterSetIP, mcsv1beta1.Headless, t0.Add(2*typeChangeSettle))
	assert.True(t, ok)
}

// A cache behind the import's last type change must not decide the type:
// the import was just written ClusterSetIP (with its VIP), the cache still
// shows it Headless, and the exports still want ClusterSetIP. Taking the
// cache's type as the one held would write Headless (without the settle
// the change needs) or release the VIP the live import names.
func TestTypeDecidedOnTheLiveImport(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	c, m, kube, mcs := derivedFixture(t, ns)
	live, err := mcs.MulticlusterV1beta1().ServiceImports("ns").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	stale := live.DeepCopy()
	stale.Spec.Type, stale.Spec.IPs = mcsv1beta1.Headless, nil
	m.UseFixedCaches(ns, stale, mustGetService(t, kube))
	want := live.DeepCopy()
	want.UID, want.Annotations = "", nil
	want.Spec.IPs = nil
	tg := importTarget{ns: "ns", name: "web", res: &aggregate.Result{Import: want}, active: true, pass: passServe}

	_, err = c.applyImport(t.Context(), view{m: m, c: m.Caches(), up: true}, tg)
	require.NoError(t, err)
	got, err := mcs.MulticlusterV1beta1().ServiceImports("ns").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, mcsv1beta1.ClusterSetIP, got.Spec.Type, "the type the exports want, which the import has")
	assert.Equal(t, []string{"10.96.0.10"}, got.Spec.IPs, "and its VIP")
	for _, a := range actions(&kube.Fake) {
		assert.NotEqual(t, "delete "+vip.DerivedName("ns", "web"), a, "the VIP the live import names stays")
	}
}

// One member's slow API server delays its own copies only: the import is
// written into the others while it hangs. The first member's create
// blocks until the second's has been made, which a reconcile writing the
// members in turn never does (the first would time out).
func TestSlowMemberDelaysOnlyItself(t *testing.T) {
	ns, export, svc := webExport()
	slow, fast := mcsfake.NewSimpleClientset(), mcsfake.NewSimpleClientset()
	fastCreated := make(chan struct{})
	var once sync.Once
	fast.PrependReactor("create", "serviceimports", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(fastCreated) })
		return false, nil, nil
	})
	var waited atomic.Bool
	slow.PrependReactor("create", "serviceimports", func(k8stesting.Action) (bool, runtime.Object, error) {
		select {
		case <-fastCreated:
		case <-time.After(5 * time.Second):
			waited.Store(true)
			return true, nil, apierrors.NewTimeoutError("the slow member", 1)
		}
		return false, nil, nil
	})
	east := &members.Member{ID: "east", Kube: fake.NewClientset(), MCS: slow, Importing: true}
	east.UseFixedCaches(ns, export, svc)
	west := &members.Member{ID: "west", Kube: fake.NewClientset(), MCS: fast, Importing: true}
	west.UseFixedCaches(ns)
	c := New(Options{Members: members.Static{east, west}})
	t.Cleanup(c.ShutDown)

	require.NoError(t, c.Reconcile(t.Context(), "ns/web"))
	assert.False(t, waited.Load(), "west's import was written while east's create hung")
	for _, cs := range []*mcsfake.Clientset{slow, fast} {
		si, err := cs.MulticlusterV1beta1().ServiceImports("ns").Get(t.Context(), "web", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, mcsv1beta1.ClusterSetIP, si.Spec.Type)
	}
}

// A member that stops answering gives up its part at the first slice
// write that times out: the key's other slices are not each sent to wait
// out their own timeout (a service every member exports has a slice per
// exporter), and what is not written is left for the retry.
func TestTimedOutSliceWriteStopsMembersPart(t *testing.T) {
	ns, export, svc := webExport()
	objs := []runtime.Object{ns, export, svc}
	const sources = 12
	for i := range sources {
		objs = append(objs, webSource(fmt.Sprintf("web-%02d", i), fmt.Sprintf("10.1.0.%d", i+1)))
	}
	east := &members.Member{ID: "east", Kube: fake.NewClientset(), MCS: mcsfake.NewSimpleClientset(export), Importing: true}
	east.UseFixedCaches(objs...)
	westKube, westMCS := fake.NewClientset(), mcsfake.NewSimpleClientset()
	var creates atomic.Int32
	westKube.PrependReactor("create", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		creates.Add(1)
		return true, nil, apierrors.NewTimeoutError("the member is not answering", 1)
	})
	west := &members.Member{ID: "west", Kube: westKube, MCS: westMCS, Importing: true}
	west.UseFixedCaches(ns)
	c := New(Options{Members: members.Static{east, west}})
	t.Cleanup(c.ShutDown)

	err := c.Reconcile(t.Context(), "ns/web")
	require.Error(t, err, "the key is retried")
	assert.True(t, write.TimedOut(err), "with the timeout: %v", err)
	assert.LessOrEqual(t, int(creates.Load()), sliceWriteParallelism, "west's slice creates stop at the first that timed out")
	assert.Positive(t, int(creates.Load()))
	_, err = westMCS.MulticlusterV1beta1().ServiceImports("ns").Get(t.Context(), "web", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no import without its endpoints")
	si, err := east.MCS.MulticlusterV1beta1().ServiceImports("ns").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err, "east's part is written all the same")
	assert.Equal(t, mcsv1beta1.ClusterSetIP, si.Spec.Type)
	got, err := east.Kube.DiscoveryV1().EndpointSlices("ns").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, got.Items, sources, "every slice of east's part, written in parallel")
}

// A member's part that runs out of its time while the member answers
// (slowly) keeps what it wrote, and is not a failure: the key goes on in
// the next pass, which writes only what is left; nothing is sent twice.
func TestUnfinishedPartGoesOnInTheNextPass(t *testing.T) {
	old := memberTimeout
	memberTimeout = 600 * time.Millisecond
	t.Cleanup(func() { memberTimeout = old })
	ns, export, svc := webExport()
	objs := []runtime.Object{ns, export, svc}
	const sources = 24
	for i := range sources {
		objs = append(objs, webSource(fmt.Sprintf("web-%02d", i), fmt.Sprintf("10.1.0.%d", i+1)))
	}
	east := &members.Member{ID: "east", Kube: fake.NewClientset(), MCS: mcsfake.NewSimpleClientset(export)}
	east.UseFixedCaches(objs...)
	// West's EndpointSlices are served over HTTP (so that a request
	// cut short is cancelled as client-go's are): slow, but answering,
	// each create taking 100 ms and applied even when its client has
	// gone, so the 24 slices (four at a time) need about 600 ms.
	slow := newSlowObjectServer(t, slicesResource, 100*time.Millisecond)
	westKube, err := kubernetes.NewForConfig(slow.jsonConfig())
	require.NoError(t, err)
	westMCS := mcsfake.NewSimpleClientset()
	west := &members.Member{ID: "west", Kube: westKube, MCS: westMCS, Importing: true}
	west.UseFixedCaches(ns)
	c := New(Options{Members: members.Static{east, west}})
	t.Cleanup(c.ShutDown)

	passes := 0
	for {
		passes++
		require.Less(t, passes, 10, "the passes make progress")
		err := c.Reconcile(t.Context(), "ns/web")
		if err == nil {
			break
		}
		require.True(t, onlyUnfinished(err), "an unfinished part is not a failure: %v", err)
		memberTimeout = 300 * time.Millisecond // each pass from here writes a few
	}
	assert.Greater(t, passes, 1, "the first pass ran out of time")
	creates := int(slow.creates.Load())
	t.Logf("%d passes, %d slice creates", passes, creates)
	assert.Equal(t, sources, slow.stored(), "every slice written in the end")
	assert.LessOrEqual(t, creates, sources+sliceWriteParallelism*(passes-1), "only the writes cut short are sent again")
	_, err = westMCS.MulticlusterV1beta1().ServiceImports("ns").Get(t.Context(), "web", metav1.GetOptions{})
	assert.NoError(t, err, "the import, once its slices are all there")
}

// slowObjectServer serves one resource's creates, gets and updates (of
// the object or its status) over HTTP, in JSON, each create answered
// after delay and applied even when its client has gone.
type slowObjectServer struct {
	*httptest.Server
	creates atomic.Int32
	mu      sync.Mutex
	objects map[string][]byte // by the object's path
}

func newSlowObjectServer(t *testing.T, gr schema.GroupResource, delay time.Duration) *slowObjectServer {
	s := &slowObjectServer{objects: map[string][]byte{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		var obj map[string]any
		if r.Method == http.MethodPost || r.Method == http.MethodPut {
			if err := json.NewDecoder(r.Body).Decode(&obj); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		at := strings.TrimSuffix(r.URL.Path, "/status")
		switch r.Method {
		case http.MethodPost:
			s.creates.Add(1)
			md, _ := obj["metadata"].(map[string]any)
			name, _ := md["name"].(string)
			at = path.Join(at, name)
			time.Sleep(delay) // applied even if the client has gone
			s.mu.Lock()
			_, exists := s.objects[at]
			var b []byte
			if !exists {
				md["resourceVersion"], md["uid"] = strconv.Itoa(len(s.objects)+1), "uid-"+name
				b, _ = json.Marshal(obj)
				s.objects[at] = b
			}
			s.mu.Unlock()
			if exists {
				answerStatus(w, apierrors.NewAlreadyExists(gr, name))
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(b)
		case http.MethodPut:
			b, _ := json.Marshal(obj)
			s.mu.Lock()
			_, exists := s.objects[at]
			if exists {
				s.objects[at] = b
			}
			s.mu.Unlock()
			if !exists {
				answerStatus(w, apierrors.NewNotFound(gr, path.Base(at)))
				return
			}
			_, _ = w.Write(b)
		case http.MethodGet:
			s.mu.Lock()
			cur, exists := s.objects[at]
			s.mu.Unlock()
			if !exists {
				answerStatus(w, apierrors.NewNotFound(gr, path.Base(at)))
				return
			}
			_, _ = w.Write(cur)
		default:
			http.Error(w, "not served", http.StatusMethodNotAllowed)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// answerStatus answers with err's code and Status, as an API server does.
func answerStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	w.WriteHeader(int(err.Status().Code))
	_ = json.NewEncoder(w).Encode(err.Status())
}

func (s *slowObjectServer) stored() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.objects)
}

// jsonConfig reaches s in JSON.
func (s *slowObjectServer) jsonConfig() *rest.Config {
	return &rest.Config{Host: s.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"}}
}

// A part whose time runs out while its import is being created, its
// slices having just been written, is unfinished, not failed: the
// create is let finish (cut short, the API server may apply it all the
// same), and the next pass writes what is left.
func TestImportCreateAtThePartsDeadlineIsUnfinished(t *testing.T) {
	old := memberTimeout
	memberTimeout = 300 * time.Millisecond
	t.Cleanup(func() { memberTimeout = old })
	ns, export, svc := webExport()
	source := webSource("web-a", "10.1.0.1")
	east := &members.Member{ID: "east", Kube: fake.NewClientset(), MCS: mcsfake.NewSimpleClientset(export)}
	east.UseFixedCaches(ns, export, svc, source)
	// West answers: its slice create at once, its import's create in
	// 600 ms, past the part's 300.
	slices := newSlowObjectServer(t, slicesResource, 0)
	imports := newSlowObjectServer(t, schema.GroupResource{Group: mcsv1beta1.GroupName, Resource: "serviceimports"}, 600*time.Millisecond)
	westKube, err := kubernetes.NewForConfig(slices.jsonConfig())
	require.NoError(t, err)
	westMCS, err := mcsclient.NewForConfig(imports.jsonConfig())
	require.NoError(t, err)
	west := &members.Member{ID: "west", Kube: westKube, MCS: westMCS, Importing: true}
	west.UseFixedCaches(ns)
	c := New(Options{Members: members.Static{east, west}})
	t.Cleanup(c.ShutDown)

	err = c.Reconcile(t.Context(), "ns/web")
	require.Error(t, err, "the import's status is not written yet")
	require.True(t, onlyUnfinished(err), "not a failure: %v", err)
	assert.Equal(t, 1, imports.stored(), "the import's create was let finish")
	assert.Equal(t, 1, slices.stored())

	require.NoError(t, c.Reconcile(t.Context(), "ns/web"), "the next pass writes what is left")
	assert.Equal(t, 1, int(imports.creates.Load()), "the import created once")
	si, err := westMCS.MulticlusterV1beta1().ServiceImports("ns").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, si.Status.Clusters, "its status written")
}

func TestOnlyUnfinished(t *testing.T) {
	assert.False(t, onlyUnfinished(nil))
	assert.True(t, onlyUnfinished(errUnfinished))
	assert.True(t, onlyUnfinished(fmt.Errorf("cluster a: %w", errUnfinished)))
	assert.True(t, onlyUnfinished(errors.Join(fmt.Errorf("cluster a: %w", errUnfinished), nil, errors.Join(errUnfinished))))
	assert.False(t, onlyUnfinished(errors.Join(errUnfinished, errors.New("refused"))))
	assert.False(t, onlyUnfinished(errors.New("refused")))
}

// A reconcile that runs again before the caches have seen the first one's
// writes sends none of them a second time: it reads through what it
// wrote. (The fixed caches here never see a write.)
func TestNoWriteSentTwice(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	export := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", CreationTimestamp: metav1.Now(), ResourceVersion: "1"}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.0.0.1",
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	source := webSource("web-a", "10.1.0.1")
	eastKube, eastMCS := fake.NewClientset(), mcsfake.NewSimpleClientset(export)
	westKube, westMCS := fake.NewClientset(), mcsfake.NewSimpleClientset()
	east := &members.Member{ID: "east", Kube: eastKube, MCS: eastMCS, Importing: true, ExportConditions: true}
	east.UseFixedCaches(ns, export, svc, source)
	west := &members.Member{ID: "west", Kube: westKube, MCS: westMCS, Importing: true}
	west.UseFixedCaches(ns)
	stampResourceVersions(&eastKube.Fake, &eastMCS.Fake, &westKube.Fake, &westMCS.Fake)
	c := New(Options{Members: members.Static{east, west}, VIP: vip.NewDerived(members.Static{east, west})})
	t.Cleanup(c.ShutDown)

	require.NoError(t, c.Reconcile(t.Context(), "ns/web"))
	first := map[string][]string{}
	for id, f := range map[string][]*k8stesting.Fake{"east": {&eastKube.Fake, &eastMCS.Fake}, "west": {&westKube.Fake, &westMCS.Fake}} {
		for _, ff := range f {
			first[id] = append(first[id], actions(ff)...)
			ff.ClearActions()
		}
	}
	t.Logf("first reconcile wrote: %v", first)
	require.Contains(t, first["west"], "create web", "the import was made")

	require.NoError(t, c.Reconcile(t.Context(), "ns/web"))
	for _, ff := range []*k8stesting.Fake{&eastKube.Fake, &eastMCS.Fake, &westKube.Fake, &westMCS.Fake} {
		var again []string
		for _, a := range ff.Actions() {
			if _, ok := writtenName(a); ok {
				again = append(again, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
			}
		}
		assert.Empty(t, again, "nothing written again")
	}
}

// stampResourceVersions makes the creates and updates of fs carry
// increasing resourceVersions, as an API server's do (the fake tracker
// leaves objects' own empty).
func stampResourceVersions(fs ...*k8stesting.Fake) {
	var rv atomic.Int64
	rv.Store(100)
	for _, f := range fs {
		f.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			// Creates and updates both carry their object; the two action
			// interfaces have the same method set, so one assertion serves.
			var obj runtime.Object
			if w, ok := a.(k8stesting.CreateAction); ok && (a.GetVerb() == "create" || a.GetVerb() == "update") {
				obj = w.GetObject()
			}
			if o, err := meta.Accessor(obj); obj != nil && err == nil {
				o.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
			}
			return false, nil, nil
		})
	}
}

// A full pass that fails (here: a mirrored slice's create refused once)
// is retried ahead of the full passes queued meanwhile, as a serve pass
// would be: it may have left members without their copies. (At priority
// 0 it waited behind every serve pass and full pass queued, minutes at
// 40 members.)
func TestFailedFullPassRetriedAsServe(t *testing.T) {
	ns, export, svc := webExport()
	source := webSource("web-a", "10.1.0.1")
	east := &members.Member{ID: "east", Kube: fake.NewClientset(), MCS: mcsfake.NewSimpleClientset(export)}
	east.UseFixedCaches(ns, export, svc, source)
	westKube := fake.NewClientset()
	var refused atomic.Bool
	westKube.PrependReactor("create", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refused.CompareAndSwap(false, true) {
			return true, nil, apierrors.NewForbidden(slicesResource, "web", errors.New("exceeded quota"))
		}
		return false, nil, nil
	})
	west := &members.Member{ID: "west", Kube: westKube, MCS: mcsfake.NewSimpleClientset(), Importing: true}
	west.UseFixedCaches(ns)
	c := New(Options{Members: members.Static{east, west}})
	t.Cleanup(c.ShutDown) // never Run
	var mu sync.Mutex
	var order []string
	c.afterPass = func(k string, _ pass) error {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, k)
		return nil
	}

	c.queue.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(0)}, item{"ns/web", passFull})
	require.True(t, c.processNext(t.Context()))
	require.True(t, refused.Load(), "the full pass failed")
	// Full passes of other keys (nothing to write) queued meanwhile,
	// before the retry's back-off has passed.
	for i := range 3 {
		c.queue.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(0)}, item{fmt.Sprintf("ns/other-%d", i), passFull})
	}
	time.Sleep(100 * time.Millisecond) // the retry's back-off (10 ms)
	require.True(t, c.processNext(t.Context()))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"ns/web", "ns/web"}, order, "the failed pass retried first")
	_, err := west.MCS.MulticlusterV1beta1().ServiceImports("ns").Get(t.Context(), "web", metav1.GetOptions{})
	assert.NoError(t, err, "and the import written")
}

// webExport returns what a member holds of an exported ClusterIP
// Service ns/web: its namespace, its export and the Service.
func webExport() (*corev1.Namespace, *mcsv1beta1.ServiceExport, *corev1.Service) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	export := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", CreationTimestamp: metav1.Now()}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.0.0.1",
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	return ns, export, svc
}

// webSource is a source EndpointSlice of ns/web with one ready endpoint
// at addr.
func webSource(name, addr string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}

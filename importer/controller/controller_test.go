package controller

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/test/cluster"
)

type passRecord struct {
	key  string
	pass pass
}

// Serve passes of every queued key come before any key's full pass, and
// each serve pass is followed by a full pass of the same key.
func TestPassOrder(t *testing.T) {
	c := New(Options{})
	var mu sync.Mutex
	var got []passRecord
	c.reconciled = func(k string, p pass) {
		mu.Lock()
		got = append(got, passRecord{k, p})
		mu.Unlock()
	}
	c.addServe("ns/a")
	c.addServe("ns/b")
	c.addServe("ns/a") // deduplicated
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx, 1, 0); close(done) }()
	defer func() { cancel(); <-done }()

	want := []passRecord{{"ns/a", passServe}, {"ns/b", passServe}, {"ns/a", passFull}, {"ns/b", passFull}}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= len(want)
	}, 5*time.Second, 5*time.Millisecond)
	// A change to a key whose full pass is pending makes it a serve pass
	// again, ahead of full passes queued before it.
	c.queue.Add(item{"ns/c", passFull}) // a full pass (as a retry would be)
	c.addServe("ns/d")
	want = append(want, passRecord{"ns/d", passServe}, passRecord{"ns/c", passFull}, passRecord{"ns/d", passFull})
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= len(want)
	}, 5*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond) // nothing more comes
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, want, got)
}

// A stream of changes to a key (say, a resync every second) does not
// postpone its full pass, and promoteOverdue pulls full passes owed
// fullPassMaxWait ahead of the serve passes.
func TestFullPassNotPostponed(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c := New(Options{Now: clock})
	var got []passRecord
	c.reconciled = func(k string, p pass) {
		mu.Lock()
		got = append(got, passRecord{k, p})
		mu.Unlock()
	}
	records := func() []passRecord { mu.Lock(); defer mu.Unlock(); return slices.Clone(got) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx, 2, 0); close(done) }()
	defer func() { cancel(); <-done }()

	full := func() int {
		n := 0
		for _, r := range records() {
			if r == (passRecord{"ns/x", passFull}) {
				n++
			}
		}
		return n
	}
	began := time.Now()
	for time.Since(began) < fullPassDelay+time.Second && full() == 0 {
		c.addServe("ns/x")
		time.Sleep(20 * time.Millisecond)
	}
	assert.Equal(t, 1, full(), "the full pass ran while serve passes kept coming")
	assert.Greater(t, len(records()), 10)
	require.Eventually(t, func() bool {
		c.fullMu.Lock()
		defer c.fullMu.Unlock()
		return len(c.fullSince) == 0
	}, 5*time.Second, time.Millisecond, "the last full pass ran")
	n := len(records())

	// A full pass queued and overdue, never reached by a worker: the
	// ticker's promoteOverdue queues it at serve priority.
	c.fullMu.Lock()
	c.fullSince["ns/y"] = clock()
	c.fullMu.Unlock()
	c.promoteOverdue()
	time.Sleep(20 * time.Millisecond)
	assert.Len(t, records(), n, "not overdue yet: nothing queued")
	advance(fullPassMaxWait)
	c.promoteOverdue()
	require.Eventually(t, func() bool { return len(records()) == n+1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, passRecord{"ns/y", passFull}, records()[n])
}

// A serve pass writes the import and its slices, no status; the full pass
// writes the statuses.
func TestServePassWritesNoStatus(t *testing.T) {
	set := cluster.Start(t, cluster.Names("east")...)
	east := set.Get("east")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns, name = "pass", "web"
	_, err := east.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = east.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = east.Kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = east.MCS.MulticlusterV1beta1().ServiceExports(ns).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)

	m, err := members.Connect(ctx, east.Config, "east")
	require.NoError(t, err)
	m.Importing = true
	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	require.NoError(t, m.Start(mctx, members.HealthOptions{ProbeInterval: time.Second, ProbeTimeout: time.Second, Grace: time.Minute, SyncTimeout: 30 * time.Second, Notify: func(members.Event) {}, OnChange: func(*members.Member, members.State, *members.Caches) {}}))
	defer m.Stop()
	reg := prometheus.NewRegistry()
	c := New(Options{Members: []*members.Member{m}, Registerer: reg})
	writes := func(kind string) float64 {
		n := 0.0
		for _, verb := range []string{"create", "update"} {
			n += testutil.ToFloat64(c.metrics.Writes.WithLabelValues("east", kind, verb))
		}
		return n
	}
	// The caches see the export once it is there.
	require.Eventually(t, func() bool { return m.Caches().Export(ns, name) != nil && len(m.Caches().SourceSlices(ns, name)) == 1 }, 10*time.Second, 10*time.Millisecond)

	require.NoError(t, c.reconcile(ctx, ns+"/"+name, passServe))
	assert.Equal(t, 1.0, writes(kindImport))
	assert.Equal(t, 1.0, writes(kindSlice))
	assert.Zero(t, writes(kindImportStatus))
	assert.Zero(t, writes(kindExportStatus))
	si, err := east.MCS.MulticlusterV1beta1().ServiceImports(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, mcsv1beta1.Headless, si.Spec.Type)
	assert.Empty(t, si.Status.Clusters)
	se, err := east.MCS.MulticlusterV1beta1().ServiceExports(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, se.Status.Conditions)

	require.Eventually(t, func() bool {
		return m.Caches().Import(ns, name) != nil && len(m.Caches().MirroredSlices(ns, name)) == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, c.reconcile(ctx, ns+"/"+name, passFull))
	assert.Equal(t, 1.0, writes(kindImport), "nothing new to create")
	assert.Equal(t, 1.0, writes(kindSlice))
	assert.Equal(t, 1.0, writes(kindImportStatus))
	assert.Equal(t, 1.0, writes(kindExportStatus))
	si, err = east.MCS.MulticlusterV1beta1().ServiceImports(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, si.Status.Clusters, 1)
	assert.Equal(t, "east", si.Status.Clusters[0].Cluster)
	se, err = east.MCS.MulticlusterV1beta1().ServiceExports(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, metav1.ConditionTrue, findCondition(se.Status.Conditions, "Ready"))
}

func findCondition(conds []metav1.Condition, typ string) metav1.ConditionStatus {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

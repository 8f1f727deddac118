package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
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

// passLog runs a controller without members (its passes write nothing)
// and records every pass; hook, if set, runs in the pass (its key claimed)
// and can fail it.
type passLog struct {
	mu   sync.Mutex
	got  []passRecord
	hook func(k string, p pass) error
}

func (l *passLog) records() []passRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

func (l *passLog) count(r passRecord) int {
	n := 0
	for _, x := range l.records() {
		if x == r {
			n++
		}
	}
	return n
}

func runPassLog(t *testing.T, c *Controller, workers int, hook func(k string, p pass) error) *passLog {
	l := &passLog{hook: hook}
	c.afterPass = func(k string, p pass) error {
		l.mu.Lock()
		l.got = append(l.got, passRecord{k, p})
		l.mu.Unlock()
		if l.hook != nil {
			return l.hook(k, p)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx, workers, 0); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

// waitQuiet waits until no pass has run for fullPassDelay and two more
// seconds (timers fire late on a loaded machine).
func (l *passLog) waitQuiet(t *testing.T) {
	t.Helper()
	n, since := len(l.records()), time.Now()
	require.Eventually(t, func() bool {
		if m := len(l.records()); m != n {
			n, since = m, time.Now()
		}
		return time.Since(since) > fullPassDelay+2*time.Second
	}, 20*time.Second, 10*time.Millisecond)
}

// Serve passes of every queued key come before any key's full pass, and
// each serve pass is followed by a full pass of the same key.
func TestPassOrder(t *testing.T) {
	c := New(Options{})
	c.addServe("ns/a")
	c.addServe("ns/b")
	c.addServe("ns/a") // deduplicated
	gate, entered := make(chan struct{}), make(chan struct{})
	l := runPassLog(t, c, 1, func(k string, p pass) error {
		if k == "gate" && p == passServe {
			close(entered)
			<-gate
		}
		return nil
	})
	l.waitQuiet(t)
	assert.Equal(t, []passRecord{{"ns/a", passServe}, {"ns/b", passServe}, {"ns/a", passFull}, {"ns/b", passFull}}, l.records())

	// While the one worker is held: a full pass queued (as a retry would
	// be), then a change to another key. The serve pass goes first.
	c.addServe("gate")
	<-entered
	c.queue.Add(item{"ns/c", passFull})
	c.addServe("ns/d")
	close(gate)
	l.waitQuiet(t)
	var got []passRecord
	for _, r := range l.records()[4:] {
		if r.key != "gate" {
			got = append(got, r)
		}
	}
	assert.Equal(t, []passRecord{{"ns/d", passServe}, {"ns/c", passFull}, {"ns/d", passFull}}, got)
}

// A stream of changes to a key whose passes are slow (so that each change
// arrives while a pass runs, and one worker always finds a serve pass
// queued) does not hold back its full pass for more than fullPassMaxWait;
// promoteOverdue pulls full passes owed that long ahead of other keys'
// serve passes.
func TestFullPassNotHeldBack(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c := New(Options{Now: clock})
	var changing atomic.Bool
	changing.Store(true)
	gate, entered := make(chan struct{}), make(chan struct{})
	l := runPassLog(t, c, 1, func(k string, p pass) error {
		if k == "ns/x" && p == passServe && changing.Load() {
			c.addServe(k) // a change during every serve pass
		}
		if k == "gate" && p == passServe {
			close(entered)
			<-gate
		}
		time.Sleep(30 * time.Millisecond)
		return nil
	})
	full := passRecord{"ns/x", passFull}
	c.addServe("ns/x")
	time.Sleep(fullPassDelay + time.Second)
	assert.Zero(t, l.count(full), "changes keep coming: the serve passes go first")
	assert.Greater(t, l.count(passRecord{"ns/x", passServe}), 20)
	advance(fullPassMaxWait)
	require.Eventually(t, func() bool { return l.count(full) > 0 }, 5*time.Second, time.Millisecond,
		"owed fullPassMaxWait: a full pass in the serve pass's place")
	changing.Store(false) // (the serve pass queued meanwhile runs, then its full pass)
	l.waitQuiet(t)

	// Other keys' serve passes keep a worker busy; an overdue full pass
	// is raised above them. (Queued while the one worker is held, so that
	// it cannot take the full pass before the serve passes are queued.)
	c.addServe("gate")
	<-entered
	c.passes.oweFull("ns/y", clock())
	c.queue.Add(item{"ns/y", passFull})
	for i := range 100 {
		c.addServe(fmt.Sprintf("ns/s%d", i))
	}
	close(gate)
	time.Sleep(100 * time.Millisecond)
	assert.Zero(t, l.count(passRecord{"ns/y", passFull}))
	advance(fullPassMaxWait)
	c.promoteOverdue()
	require.Eventually(t, func() bool { return l.count(passRecord{"ns/y", passFull}) == 1 }, 5*time.Second, time.Millisecond)
	assert.Zero(t, l.count(passRecord{"ns/s99", passServe}), "ahead of the serve passes queued before it")
}

// A serve pass that fails is retried as a full pass (conditions then say
// what is wrong), and a failing full pass is not promoted past its backoff.
func TestFailedServePassRetriesFull(t *testing.T) {
	c := New(Options{})
	var fail atomic.Bool
	fail.Store(true)
	l := runPassLog(t, c, 1, func(k string, p pass) error {
		if fail.Load() {
			return errors.New("the API said no")
		}
		return nil
	})
	c.addServe("ns/x")
	require.Eventually(t, func() bool { return l.count(passRecord{"ns/x", passFull}) >= 2 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, 1, l.count(passRecord{"ns/x", passServe}))
	assert.Zero(t, c.passes.owed(), "a full pass that ran is owed no longer, failed or not")
	fail.Store(false)
	l.waitQuiet(t)
	assert.Equal(t, passRecord{"ns/x", passFull}, l.records()[len(l.records())-1])
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
	m.Importing, m.ExportConditions = true, true
	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	require.NoError(t, m.Start(mctx, func(members.Event) {}, 30*time.Second))
	defer m.Stop()
	reg := prometheus.NewRegistry()
	c := New(Options{Members: members.Static{m}, Registerer: reg})
	defer c.ShutDown() // never Run
	writes := func(kind string) float64 {
		n := 0.0
		for _, verb := range []string{"create", "update"} {
			n += testutil.ToFloat64(c.metrics.Writes.WithLabelValues("east", kind, verb))
		}
		return n
	}
	// The caches see the export once it is there.
	require.Eventually(t, func() bool { return m.Caches().Export(ns, name) != nil && len(m.Caches().SourceSlices(ns, name)) == 1 }, 10*time.Second, 10*time.Millisecond)

	// Through processNext, as the workers run it: the serve pass queues a
	// full pass, which the statuses_owed gauge shows.
	c.addServe(ns + "/" + name)
	require.True(t, c.processNext(ctx))
	assert.Equal(t, 1.0, gauge(t, reg, "mcs_importer_statuses_owed"))
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
	require.True(t, c.processNext(ctx), "the full pass, after fullPassDelay")
	assert.Zero(t, gauge(t, reg, "mcs_importer_statuses_owed"))
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

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func findCondition(conds []metav1.Condition, typ string) metav1.ConditionStatus {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

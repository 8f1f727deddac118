package mcs

import (
	"bytes"
	"context"
	stdlog "log"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/compact"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// storeOnly is a source whose informers are never run: the test fills
// their stores directly, to exercise controller.sync without an API.
func storeOnly() *source {
	lw := &cache.ListWatch{}
	src := &source{slices: cache.NewSharedIndexInformer(lw, &discoveryv1.EndpointSlice{}, 0, cache.Indexers{byService: indexByService})}
	src.imports.Store(&importInformer{SharedIndexInformer: cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})})
	return src
}

func importObj(t *testing.T, ns, name string, spec, status map[string]any) *compact.Import {
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}}
	if status != nil {
		u.Object["status"] = status
	}
	obj, err := transformImport(u)
	require.NoError(t, err)
	return obj.(*compact.Import)
}

func sliceObj(t *testing.T, ns, name, svc, cluster string, eps ...discoveryv1.Endpoint) *compact.Slice {
	obj, err := transformSlice(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{mcsapi.LabelServiceName: svc, mcsapi.LabelSourceCluster: cluster}},
		AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
	})
	require.NoError(t, err)
	return obj.(*compact.Slice)
}

func captureLog(t *testing.T) *bytes.Buffer {
	var buf bytes.Buffer
	out := stdlog.Writer()
	stdlog.SetOutput(&buf)
	t.Cleanup(func() { stdlog.SetOutput(out) })
	return &buf
}

func TestControllerSync(t *testing.T) {
	p := newMCS(&config{zones: []string{"clusterset.local."}, ttl: 5}, nil)
	c := newController(&rest.Config{}, nil, nil, p.index, answers.Config{Zones: []string{"clusterset.local."}, TTL: 5})
	p.ctl = c
	src := storeOnly()
	c.sources = map[string]*source{metav1.NamespaceAll: src}
	imports, slices := src.imports.Load().GetIndexer(), src.slices.GetIndexer()

	// Before the informers have synced, events only note their service;
	// it is built once, when the initial lists are in.
	require.NoError(t, imports.Add(importObj(t, "demo", "early", map[string]any{"type": "ClusterSetIP", "ips": []any{"10.96.0.9"}}, nil)))
	c.sync("demo", "early", time.Now())
	c.sync("demo", "early", time.Now())
	assert.Nil(t, p.index.Service("early.demo"), "not built at once")
	// While the lists stream in, prebuild builds what they touched.
	stop := make(chan struct{})
	builds := make(chan int)
	go func() { builds <- c.prebuild(context.Background(), stop) }()
	require.Eventually(t, func() bool { return p.index.Service("early.demo") != nil }, 5*time.Second, 5*time.Millisecond)
	close(stop)
	assert.Equal(t, 1, <-builds)
	// Touched again after its build: built again at sync, with the rest.
	require.NoError(t, imports.Add(importObj(t, "demo", "late", map[string]any{"type": "ClusterSetIP", "ips": []any{"10.96.0.8"}}, nil)))
	c.sync("demo", "early", time.Now())
	c.sync("demo", "late", time.Now())
	assert.Nil(t, p.index.Service("late.demo"))
	assert.Equal(t, 2, c.buildInitial(context.Background()))
	assert.NotNil(t, p.index.Service("late.demo"), "built once the lists are in")
	require.NoError(t, imports.Delete(importObj(t, "demo", "late", map[string]any{"type": "ClusterSetIP"}, nil)))
	c.synced.Store(true)
	c.sync("demo", "late", time.Now())
	assert.Nil(t, p.index.Service("late.demo"), "live: events build their service")
	c.synced.Store(true)
	require.NoError(t, imports.Delete(importObj(t, "demo", "early", map[string]any{"type": "ClusterSetIP"}, nil)))
	c.sync("demo", "early", time.Now())
	assert.Nil(t, p.index.Service("early.demo"), "live: events build their service")
	logs := captureLog(t)

	// A headless import and its slice: answers appear.
	require.NoError(t, imports.Add(importObj(t, "demo", "db", map[string]any{"type": "Headless",
		"ports": []any{map[string]any{"name": "pg", "protocol": "TCP", "port": int64(5432)}}}, nil)))
	c.sync("demo", "db", time.Now())
	assert.Nil(t, p.index.Service("db.demo"), "no endpoints yet")
	require.NoError(t, slices.Add(sliceObj(t, "demo", "db-east", "db", "east",
		discoveryv1.Endpoint{Addresses: []string{"10.1.0.5"}, Hostname: ptr.To("db-0")})))
	c.sync("demo", "db", time.Now())
	r := query(t, p, "db-0.east.db.demo.svc.clusterset.local.", dns.TypeA)
	assert.Equal(t, []string{"db-0.east.db.demo.svc.clusterset.local. A 10.1.0.5"}, rrs(r.Answer))

	// Absent: logged once however often the service is rebuilt.
	require.NoError(t, imports.Update(importObj(t, "demo", "db", map[string]any{"type": "Headless"},
		map[string]any{"endpointSliceObjects": "Absent"})))
	for range 3 {
		c.sync("demo", "db", time.Now())
	}
	assert.Nil(t, p.index.Service("db.demo"))
	assert.Equal(t, 1, strings.Count(logs.String(), "endpointSliceObjects is Absent"), logs.String())

	// Present again: answers come back; Absent again logs again.
	require.NoError(t, imports.Update(importObj(t, "demo", "db", map[string]any{"type": "Headless"}, nil)))
	c.sync("demo", "db", time.Now())
	assert.NotNil(t, p.index.Service("db.demo"))
	require.NoError(t, imports.Update(importObj(t, "demo", "db", map[string]any{"type": "Headless"},
		map[string]any{"endpointSliceObjects": "Absent"})))
	c.sync("demo", "db", time.Now())
	assert.Equal(t, 2, strings.Count(logs.String(), "endpointSliceObjects is Absent"))
	require.NoError(t, imports.Update(importObj(t, "demo", "db", map[string]any{"type": "Headless"}, nil)))
	c.sync("demo", "db", time.Now())
	assert.NotNil(t, p.index.Service("db.demo"))

	// A malformed import replaces a good one: its answers go, others stay.
	require.NoError(t, imports.Add(importObj(t, "demo", "web", map[string]any{"type": "ClusterSetIP", "ips": []any{"10.96.0.1"}}, nil)))
	c.sync("demo", "web", time.Now())
	require.NotNil(t, p.index.Service("web.demo"))
	// One bad ips entry is left out (and counted); the other still answers.
	before := counter(t, kindImportEntry)
	require.NoError(t, imports.Update(importObj(t, "demo", "web", map[string]any{"type": "ClusterSetIP", "ips": []any{"nope", "10.96.0.2"}}, nil)))
	assert.Equal(t, before+1, counter(t, kindImportEntry))
	c.sync("demo", "web", time.Now())
	r = query(t, p, "web.demo.svc.clusterset.local.", dns.TypeA)
	assert.Equal(t, []string{"web.demo.svc.clusterset.local. A 10.96.0.2"}, rrs(r.Answer))
	before = counter(t, kindServiceImport)
	bad := importObj(t, "demo", "web", map[string]any{"type": "LoadBalancer", "ips": []any{"10.96.0.1"}}, nil)
	assert.Equal(t, before+1, counter(t, kindServiceImport))
	require.NoError(t, imports.Update(bad))
	c.sync("demo", "web", time.Now())
	assert.Nil(t, p.index.Service("web.demo"))
	assert.NotNil(t, p.index.Service("db.demo"))

	// Deleting the import removes its answers; stop() takes the gauges back.
	require.NoError(t, imports.Delete(bad))
	c.sync("demo", "web", time.Now())
	require.NoError(t, imports.Delete(&compact.Import{Meta: compact.Meta{Name: "db", Namespace: "demo"}}))
	c.sync("demo", "db", time.Now())
	assert.Nil(t, p.index.Service("db.demo"))
	assert.False(t, p.index.HasNamespace("demo"))
	assert.Equal(t, [3]float64{}, c.published.imports)
	assert.Equal(t, 0.0, c.published.endpoints)
}

func TestHandlerKeys(t *testing.T) {
	p := newMCS(&config{zones: []string{"clusterset.local."}, ttl: 5}, nil)
	c := newController(&rest.Config{}, nil, nil, p.index, answers.Config{Zones: []string{"clusterset.local."}, TTL: 5})
	src := storeOnly()
	c.sources = map[string]*source{metav1.NamespaceAll: src}
	c.buildInitial(context.Background()) // live
	imp := importObj(t, "demo", "web", map[string]any{"type": "ClusterSetIP", "ips": []any{"10.96.0.1"}}, nil)
	require.NoError(t, src.imports.Load().GetIndexer().Add(imp))
	h := c.handler(true)
	h.OnAdd(imp, true)
	require.NotNil(t, p.index.Service("web.demo"))
	require.NoError(t, src.imports.Load().GetIndexer().Delete(imp))
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "demo/web", Obj: imp})
	assert.Nil(t, p.index.Service("web.demo"), "tombstones are handled")
}

// TestWaitSynced: start-up notices the lists are in within a poll or two
// (client-go's own wait polls every 100 ms), and gives up when stopped.
func TestWaitSynced(t *testing.T) {
	var a, b atomic.Bool
	done := make(chan bool, 1)
	go func() {
		done <- waitSynced(context.Background(), time.Millisecond, a.Load, b.Load)
	}()
	a.Store(true)
	select {
	case <-done:
		t.Fatal("returned with one registration not synced")
	case <-time.After(20 * time.Millisecond):
	}
	b.Store(true)
	select {
	case ok := <-done:
		assert.True(t, ok)
	case <-time.After(5 * time.Second):
		t.Fatal("did not notice the sync")
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- waitSynced(ctx, time.Millisecond, a.Load, func() bool { return false }) }()
	cancel()
	select {
	case ok := <-done:
		assert.False(t, ok, "stopped before sync")
	case <-time.After(5 * time.Second):
		t.Fatal("did not stop")
	}
}

package controller

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// countingQueue counts the adds made to the queue it wraps.
type countingQueue struct {
	priorityqueue.PriorityQueue[item]
	adds atomic.Int64
}

func (q *countingQueue) AddWithOpts(o priorityqueue.AddOpts, items ...item) {
	q.adds.Add(int64(len(items)))
	q.PriorityQueue.AddWithOpts(o, items...)
}

// A resync, and a member's state change, queue each key once however many
// members know it: with M members each holding every import, M adds of
// every key per change cost the queue M times the work (and, at 40
// members flapping under load, hundreds of MB in its add buffer). Real
// API server; three members reading it, so every key is known three
// times.
func TestResyncQueuesEachKeyOnce(t *testing.T) {
	set := cluster.Start(t, cluster.Names("east")...)
	east := set.Get("east")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns, n = "demo", 4
	_, err := east.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range n {
		_, err := east.MCS.MulticlusterV1beta1().ServiceExports(ns).Create(ctx,
			&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i)}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	var c *Controller
	var cfgs []members.Config
	for _, name := range []string{"a", "b", "c"} {
		cfgs = append(cfgs, members.Config{Context: name, REST: rest.CopyConfig(east.Config)})
	}
	ms := members.NewSet(members.SetOptions{
		Members:        cfgs,
		ConnectTimeout: 10 * time.Second, SyncTimeout: 30 * time.Second,
		ProbeInterval: time.Second, ProbeTimeout: 5 * time.Second, Grace: time.Minute,
		Notify:   func(ev members.Event) {},
		OnChange: func(ch members.Change) {},
	})
	c = New(Options{Members: ms, Registerer: prometheus.NewRegistry()})
	defer c.ShutDown() // never Run: only what is queued is looked at
	done := make(chan struct{})
	go func() { ms.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	require.Eventually(t, func() bool {
		known := 0
		for _, m := range ms.Members() {
			if mc := m.Caches(); mc != nil && m.State() == members.Up {
				known += len(mc.ExportKeys())
			}
		}
		return known == 3*n
	}, time.Minute, 20*time.Millisecond, "the members never all showed every export")

	q := &countingQueue{PriorityQueue: c.queue}
	c.queue = q
	// The periodic resync: one full pass of each key, behind any serve
	// pass (a full pass does all a serve pass would, and is followed by
	// nothing).
	c.resyncAll()
	assert.EqualValues(t, n, q.adds.Load(), "adds of one periodic resync")
	seen := map[string]bool{}
	for range n {
		it, priority, shutdown := c.queue.GetWithPriority()
		require.False(t, shutdown)
		assert.Equal(t, passFull, it.pass, "a periodic resync queues full passes")
		assert.Zero(t, priority, "behind every serve pass")
		seen[it.key] = true
		c.queue.Done(it)
	}
	assert.Len(t, seen, n, "every key once")
	q.adds.Store(0)

	c.EnqueueAll()
	assert.EqualValues(t, n, q.adds.Load(), "adds of one resync")
	c.OnChange(members.Change{Context: "b", Member: ms.Members()[1], State: members.Up})
	assert.EqualValues(t, 2*n, q.adds.Load(), "adds of a resync and a member's state change")
	assert.Equal(t, n, c.queue.Len(), "keys queued")
}

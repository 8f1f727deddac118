package members_test

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/netcut"
)

// A member back within its grace period is Up again only with caches that
// hold what its API server held when it answered again: what changed
// while it was away (a Service made, one deleted) is in them, and told,
// and what did not change is not told again. Its old caches' watches
// come back on their own schedule, after the probe that finds it back;
// the importer must not decide from them meanwhile. Real API server,
// reached through a TCP proxy that is cut (connections refused) while
// the objects change.
func TestMemberBackWithinGraceIsUpWithFreshCaches(t *testing.T) {
	set := cluster.Start(t, cluster.Names("east")...)
	east := set.Get("east")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	upstream, err := url.Parse(east.Config.Host)
	require.NoError(t, err)
	p, err := netcut.Start(upstream.Host)
	require.NoError(t, err)
	defer p.Close()
	cfg := rest.CopyConfig(east.Config)
	cfg.Host = "https://" + p.Addr()

	const ns = "back"
	_, err = east.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	mkService := func(name string) {
		_, err := east.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	mkService("kept")
	mkService("deleted")

	var mu sync.Mutex
	var told []string // Services told since recording began
	recording := false
	type atReturn struct{ added, deleted, kept bool }
	returns := make(chan atReturn, 4)
	s := members.NewSet(members.SetOptions{
		Members:        []members.Config{{Context: "east", REST: cfg}},
		ConnectTimeout: 5 * time.Second, SyncTimeout: 10 * time.Second,
		ProbeInterval: 100 * time.Millisecond, ProbeTimeout: time.Second,
		Grace: time.Hour,
		Notify: func(e members.Event) {
			mu.Lock()
			defer mu.Unlock()
			if recording && e.Kind == members.KindService && e.Namespace == ns {
				told = append(told, e.Name)
			}
		},
		OnChange: func(ch members.Change) {
			if ch.State != members.Up || !ch.Returned {
				return
			}
			c := ch.Member.Caches()
			returns <- atReturn{added: c.Service(ns, "added") != nil, deleted: c.Service(ns, "deleted") != nil, kept: c.Service(ns, "kept") != nil}
		},
	})
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(rctx); close(done) }()
	defer func() { rcancel(); <-done }()
	state := func() members.State { return s.Statuses()[0].State }
	require.Eventually(t, func() bool {
		ms := s.Members()
		return state() == members.Up && len(ms) == 1 && ms[0].Caches().Service(ns, "deleted") != nil
	}, time.Minute, 10*time.Millisecond)
	mu.Lock()
	recording = true
	mu.Unlock()

	p.Cut()
	require.Eventually(t, func() bool { return state() == members.Unreachable }, 10*time.Second, 10*time.Millisecond)
	mkService("added")
	require.NoError(t, east.Kube.CoreV1().Services(ns).Delete(ctx, "deleted", metav1.DeleteOptions{}))
	// Long enough for its caches' watches to be retried on their slowest
	// schedule (once a second) when it is back.
	time.Sleep(3 * time.Second)
	require.NoError(t, p.Resume())

	select {
	case r := <-returns:
		assert.True(t, r.added, "a Service made while it was away is in its caches when it is Up again")
		assert.False(t, r.deleted, "a Service deleted while it was away is not")
		assert.True(t, r.kept, "an unchanged one is")
	case <-time.After(30 * time.Second):
		t.Fatalf("not Up again: %s", s.Statuses()[0].Reason)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, told, "added", "what changed is told")
	assert.Contains(t, told, "deleted")
	assert.NotContains(t, told, "kept", "what did not change is not told again")
}

package members_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// A member whose API server is too busy to answer a probe or two in time
// stays Up (its writes only take longer); one that answers no probe
// slowProbeThreshold times in a row becomes Unreachable, and Up again
// when it answers. The API server is really stopped (SIGSTOP) and
// resumed, its connections left open.
func TestSlowMemberStaysUp(t *testing.T) {
	set := cluster.Start(t, cluster.Names("east")...)
	east := set.Get("east")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var changes []string
	s := members.NewSet(members.SetOptions{
		Members:        []members.Config{{Context: "east", REST: rest.CopyConfig(east.Config)}},
		ConnectTimeout: 5 * time.Second, SyncTimeout: 5 * time.Second,
		ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 500 * time.Millisecond,
		Grace:  time.Hour,
		Notify: func(members.Event) {},
		OnChange: func(ch members.Change) {
			mu.Lock()
			defer mu.Unlock()
			changes = append(changes, ch.State.String())
		},
	})
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(rctx); close(done) }()
	defer func() { rcancel(); <-done }()
	state := func() members.State { return s.Statuses()[0].State }
	require.Eventually(t, func() bool { return state() == members.Up }, time.Minute, 20*time.Millisecond)
	mu.Lock()
	changes = nil
	mu.Unlock()

	// Frozen for 0.9 s: at most two probes time out.
	resume, err := east.FreezeAPIServer()
	require.NoError(t, err)
	deadline := time.Now().Add(900 * time.Millisecond)
	for time.Now().Before(deadline) {
		if state() != members.Up {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, resume())
	for range 50 { // a second after, too: probes that were under way
		assert.Equal(t, members.Up, state(), "a member too busy for a probe or two left Up")
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	assert.Empty(t, changes, "no state change reported")
	mu.Unlock()

	// Frozen for longer: Unreachable, saying why, then Up again.
	resume, err = east.FreezeAPIServer()
	require.NoError(t, err)
	defer func() { _ = resume() }()
	require.Eventually(t, func() bool { return state() == members.Unreachable }, 10*time.Second, 20*time.Millisecond)
	reason := s.Statuses()[0].Reason
	assert.True(t, strings.HasPrefix(reason, "unreachable"), "reason %q", reason)
	assert.Contains(t, reason, "deadline")
	require.NoError(t, resume())
	require.Eventually(t, func() bool { return state() == members.Up }, 10*time.Second, 20*time.Millisecond)
}

// A member whose probes all time out but which keeps answering the
// importer otherwise (its writes, its caches' watches) is busy, not
// gone: it stays Up. Once it answers nothing else while a probe waits, it
// becomes Unreachable after slowProbeThreshold probes, and Up again when
// its probes are answered. Real API server, reached through a proxy that
// holds the probe's one-item list of ServiceExports for longer than the
// probe timeout while it is to look busy, and passes everything else; a
// ServiceExport is created every 50 ms meanwhile.
func TestBusyMemberStaysUp(t *testing.T) {
	set := cluster.Start(t, cluster.Names("east")...)
	east := set.Get("east")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	upstream, err := url.Parse(east.Config.Host)
	require.NoError(t, err)
	tr, err := rest.TransportFor(east.Config)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(upstream)
	rp.Transport, rp.FlushInterval = tr, -1 // watches stream
	var holdProbes atomic.Bool
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if holdProbes.Load() && r.URL.Query().Get("limit") == "1" && strings.HasSuffix(r.URL.Path, "/serviceexports") {
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()

	s := members.NewSet(members.SetOptions{
		Members:        []members.Config{{Context: "east", REST: &rest.Config{Host: proxy.URL}}},
		ConnectTimeout: 5 * time.Second, SyncTimeout: 5 * time.Second,
		ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 2 * time.Second,
		Grace:    time.Hour,
		Notify:   func(members.Event) {},
		OnChange: func(members.Change) {},
	})
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(rctx); close(done) }()
	defer func() { rcancel(); <-done }()
	state := func() members.State { return s.Statuses()[0].State }
	_, err = east.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "busy"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return state() == members.Up }, time.Minute, 10*time.Millisecond)

	// Busy: every probe times out, while events keep arriving for 8 s
	// (some four probes: three unexcused would make it Unreachable).
	busy, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; busy.Err() == nil; i++ {
			_, err := east.MCS.MulticlusterV1beta1().ServiceExports("busy").Create(busy,
				&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i)}}, metav1.CreateOptions{})
			if busy.Err() == nil {
				assert.NoError(t, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	holdProbes.Store(true)
	for range 400 {
		require.Equal(t, members.Up, state(), "a member that answers the importer left Up because its probes timed out: %s", s.Statuses()[0].Reason)
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()

	// Idle: nothing answers while the probes wait.
	require.Eventually(t, func() bool { return state() == members.Unreachable }, 20*time.Second, 10*time.Millisecond)
	assert.Contains(t, s.Statuses()[0].Reason, "deadline")
	holdProbes.Store(false)
	require.Eventually(t, func() bool { return state() == members.Up }, 10*time.Second, 10*time.Millisecond)
}

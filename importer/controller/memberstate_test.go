package controller

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/netcut"
)

// slowStatuses is a members.Set whose Statuses, the first time it reports
// member context unreachable, returns that answer only after delay: as if
// the goroutine reporting the member unreachable were descheduled between
// reading the member's state and setting the gauge, for long enough that
// the member is withdrawn meanwhile and the withdrawal is reported from
// another goroutine.
type slowStatuses struct {
	*members.Set
	context string
	delay   time.Duration

	once     sync.Once
	returned chan struct{} // closed when the delayed answer has been returned
}

func (s *slowStatuses) Statuses() []members.Status {
	out := s.Set.Statuses()
	for _, st := range out {
		if st.Context == s.context && st.State == members.Unreachable {
			s.once.Do(func() {
				time.Sleep(s.delay)
				// The caller sets the gauge from this answer right after;
				// returned is closed a moment later, below.
				go func() { time.Sleep(100 * time.Millisecond); close(s.returned) }()
			})
		}
	}
	return out
}

// A member cut off from the importer goes unreachable, then down after the
// grace period, each change reported from its own goroutine (the member's
// probe loop, the Set's decisions). However late the report of the
// unreachable state sets the gauge, once the member is withdrawn the gauge
// says down, not unreachable. Real API server, real members.Set, the
// member's connection cut with a TCP proxy; the Set is wrapped only to
// hold the unreachable report back past the withdrawal.
func TestMemberStateAfterWithdrawal(t *testing.T) {
	set := cluster.Start(t, cluster.Names("east")...)
	east := set.Get("east")
	u, err := url.Parse(east.Config.Host)
	require.NoError(t, err)
	p, err := netcut.Start(u.Host)
	require.NoError(t, err)
	defer p.Close()
	// Two members on one API server: "cut" through the proxy, "direct"
	// not (one of two away is no disruption, so "cut" is withdrawn).
	cutCfg := rest.CopyConfig(east.Config)
	cutCfg.Host = "https://" + p.Addr()

	const grace = time.Second
	var c *Controller
	ms := members.NewSet(members.SetOptions{
		Members: []members.Config{
			{Context: "cut", REST: cutCfg},
			{Context: "direct", REST: rest.CopyConfig(east.Config)},
		},
		ConnectTimeout: 10 * time.Second, SyncTimeout: 30 * time.Second,
		ProbeInterval: 100 * time.Millisecond, ProbeTimeout: 300 * time.Millisecond,
		Grace:    grace,
		Notify:   func(ev members.Event) { c.Notify(ev) },
		OnChange: func(ch members.Change) { c.OnChange(ch) },
	})
	slow := &slowStatuses{Set: ms, context: "cut", delay: 4 * grace, returned: make(chan struct{})}
	reg := prometheus.NewRegistry()
	c = New(Options{Members: slow, Registerer: reg})
	defer c.ShutDown() // never Run: only the gauge is looked at
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ms.Run(ctx); close(done) }()
	defer func() {
		require.NoError(t, p.Resume())
		cancel()
		<-done
	}()

	gaugeSays := func(state members.State) bool {
		return testutil.ToFloat64(c.metrics.MemberState.WithLabelValues("cut", "cut", state.String())) == 1
	}
	require.Eventually(t, func() bool { return gaugeSays(members.Up) }, time.Minute, 20*time.Millisecond, "cut never joined")

	p.Cut()
	cutAt := time.Now()
	require.Eventually(t, func() bool { return ms.Statuses()[0].State == members.Down }, 30*time.Second, 20*time.Millisecond,
		"cut never withdrawn")
	t.Logf("measured: withdrawn %s after the cut", time.Since(cutAt).Round(time.Millisecond))
	select {
	case <-slow.returned:
	case <-time.After(30 * time.Second):
		t.Fatal("the unreachable report never read the member's state")
	}
	assert.Eventually(t, func() bool { return gaugeSays(members.Down) }, 5*time.Second, 20*time.Millisecond,
		"the gauge does not say down after the withdrawal")
	for _, st := range members.States {
		if st != members.Down {
			assert.False(t, gaugeSays(st), "the gauge says %s after the withdrawal", st)
		}
	}
	assert.Equal(t, members.Down, ms.Statuses()[0].State)
}

package members_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

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

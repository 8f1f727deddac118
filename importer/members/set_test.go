package members

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decisions is a Set of the named members, none joined, with a clock the
// test moves and the changes it was told of.
type decisions struct {
	*Set
	now     time.Time
	mu      sync.Mutex
	changes []string
}

func newDecisions(t *testing.T, grace time.Duration, names ...string) *decisions {
	d := &decisions{now: time.Unix(1000, 0)}
	var cfgs []Config
	for _, n := range names {
		cfgs = append(cfgs, Config{Context: n})
	}
	d.Set = NewSet(SetOptions{
		Members: cfgs, Grace: grace, ProbeInterval: time.Second,
		OnChange: func(ch Change) {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.changes = append(d.changes, ch.Cluster()+"="+ch.State.String())
		},
		now: func() time.Time { return d.now },
	})
	for _, sl := range d.slots {
		sl.awaySince = d.now
	}
	return d
}

func (d *decisions) slot(name string) *slot {
	for _, sl := range d.slots {
		if sl.cfg.Context == name {
			return sl
		}
	}
	panic(name)
}

// joined makes name a joined, Up member (ID = name) without any API.
func (d *decisions) joined(name string) *Member {
	m := &Member{Context: name, ID: name}
	m.setState(Up, d.now)
	d.mu.Lock()
	defer d.mu.Unlock()
	sl := d.slot(name)
	sl.member = m
	d.settle(sl)
	d.rebuild()
	return m
}

// away makes a never-joined member's attempts fail to reach it.
func (d *decisions) away(name string) {
	sl := d.slot(name)
	sl.netDown, sl.reason = true, "unreachable: connection refused"
	d.mu.Lock()
	defer d.mu.Unlock()
	d.settle(sl)
}

// cut makes a joined member Unreachable (network) now.
func (d *decisions) cut(name string) {
	sl := d.slot(name)
	sl.member.setState(Unreachable, d.now)
	sl.netDown, sl.reason = true, "unreachable: connection refused"
}

func (d *decisions) back(name string) {
	sl := d.slot(name)
	if sl.member == nil {
		d.joined(name)
		return
	}
	sl.member.setState(Up, d.now)
	sl.netDown, sl.reason = false, ""
}

func (d *decisions) step(by time.Duration) []string {
	d.now = d.now.Add(by)
	d.mu.Lock()
	d.changes = nil
	d.mu.Unlock()
	d.decide()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changes
}

func (d *decisions) state(name string) State {
	for _, st := range d.Statuses() {
		if st.Context == name {
			return st.State
		}
	}
	return -1
}

func TestSetHoldsUnknownMembersForTheGracePeriod(t *testing.T) {
	d := newDecisions(t, 10*time.Second, "east", "west", "north")
	d.joined("east")
	d.joined("west")
	d.away("north")
	h := d.Hold()
	require.True(t, h.Active())
	assert.True(t, h.Holds("north"), "a cluster no joined member has may be north's")
	assert.True(t, h.Holds("north-renamed"), "north's ID is not known before it answers")
	assert.False(t, h.Holds("east"))

	assert.Empty(t, d.step(9*time.Second), "within the grace period since the start")
	assert.Equal(t, Unknown, d.state("north"))
	assert.Equal(t, []string{"north=down"}, d.step(time.Second), "withdrawn when it has passed")
	assert.Equal(t, Down, d.state("north"))
	assert.False(t, d.Hold().Active(), "nothing is held once no member is unknown")
	assert.Empty(t, d.step(time.Minute), "withdrawn once")

	// Joining later ends the hold too.
	d2 := newDecisions(t, 10*time.Second, "east", "north")
	d2.joined("east")
	d2.away("north")
	assert.True(t, d2.Hold().Active())
	d2.joined("north")
	assert.False(t, d2.Hold().Active())
}

func TestSetWithdrawsAnUnreachableMemberAfterTheGracePeriod(t *testing.T) {
	d := newDecisions(t, 10*time.Second, "east", "west", "north")
	for _, n := range []string{"east", "west", "north"} {
		d.joined(n)
	}
	d.cut("north")
	assert.Empty(t, d.step(9*time.Second))
	assert.Equal(t, []string{"north=down"}, d.step(time.Second))
	assert.Nil(t, d.slot("north").member.Caches())
}

// A member flapping faster than the grace period is never withdrawn; one
// flapping slower is withdrawn at most once per grace period.
func TestSetBoundsWithdrawalsOfAFlappingMember(t *testing.T) {
	d := newDecisions(t, 10*time.Second, "east", "west", "north")
	for _, n := range []string{"east", "west", "north"} {
		d.joined(n)
	}
	for range 6 { // down 5 s, up 5 s
		d.cut("north")
		assert.Empty(t, d.step(5*time.Second))
		d.back("north")
		assert.Empty(t, d.step(5*time.Second))
	}
	var withdrawals int
	for range 20 { // down 11 s (past the grace period), up 1 s
		d.cut("north")
		for range 11 {
			withdrawals += len(d.step(time.Second))
		}
		d.back("north")
		withdrawals += len(d.step(time.Second))
	}
	// 240 s: one withdrawal per 12 s cycle would be 20; at most one per
	// grace period since the last, and each needs 10 s unreachable.
	assert.LessOrEqual(t, withdrawals, 20)
	assert.GreaterOrEqual(t, withdrawals, 1)
}

// Most members unreachable at once: nothing is withdrawn however long it
// lasts, and its length does not count towards anyone's grace period, so
// members coming back one by one lose nothing; a blip that starts and
// ends a disruption does not restart the others' grace periods.
func TestSetDisruptionWithdrawsNothing(t *testing.T) {
	d := newDecisions(t, 30*time.Second, "east", "west", "north")
	for _, n := range []string{"east", "west", "north"} {
		d.joined(n)
	}
	d.cut("east")
	d.cut("west")
	d.cut("north")
	for range 10 {
		assert.Empty(t, d.step(10*time.Second), "disrupted: no withdrawal")
	}
	d.back("east")
	assert.Empty(t, d.step(20*time.Second), "two of three still away: disrupted")
	d.back("west")
	assert.Empty(t, d.step(20*time.Second), "disruption over 20 s ago: north is within its grace period")
	d.back("north")
	assert.Empty(t, d.step(time.Minute))
	for _, n := range []string{"east", "west", "north"} {
		assert.Equal(t, Up, d.state(n))
	}

	// The same after a restart during the outage: every member unknown.
	r := newDecisions(t, 30*time.Second, "east", "west", "north")
	r.away("east")
	r.away("west")
	r.away("north")
	for range 10 {
		assert.Empty(t, r.step(10*time.Second))
	}
	r.joined("east")
	assert.Empty(t, r.step(20*time.Second))
	assert.True(t, r.Hold().Holds("north"), "east's imports from north are held")
	r.joined("west")
	// north was away 10 s before the disruption began (the first step):
	// its grace period runs out 20 s after the disruption ends.
	assert.Empty(t, r.step(time.Second), "the disruption ends now")
	assert.Empty(t, r.step(19*time.Second))
	assert.True(t, r.Hold().Holds("north"))
	assert.Equal(t, []string{"north=down"}, r.step(time.Second), "30 s away outside the disruption")

	// A one-probe blip of a third member, while two are really gone,
	// pauses their clocks for the blip only.
	b := newDecisions(t, 30*time.Second, "a", "b", "c", "d")
	for _, n := range []string{"a", "b", "c", "d"} {
		b.joined(n)
	}
	b.cut("b")
	b.cut("c")
	var got []string
	withdrawnAt := 0
	for i := range 60 { // a 1 s blip of d every 20 s
		switch i % 20 {
		case 0:
			b.cut("d")
		case 1:
			b.back("d")
		}
		ch := b.step(time.Second)
		if len(ch) > 0 && withdrawnAt == 0 {
			withdrawnAt = i + 1
		}
		got = append(got, ch...)
	}
	assert.ElementsMatch(t, []string{"b=down", "c=down"}, got, "withdrawn despite the blips")
	assert.GreaterOrEqual(t, withdrawnAt, 30)
	assert.LessOrEqual(t, withdrawnAt, 33, "the blips paused the clocks only while they lasted")

	// A growing outage: c and d go down for real and are withdrawn; then
	// the importer's own network fails (a and b unreachable too). Four
	// of four cannot be seen: nothing more is withdrawn, however long it
	// lasts, and a and b coming back one by one lose nothing.
	g := newDecisions(t, 30*time.Second, "a", "b", "c", "d")
	for _, n := range []string{"a", "b", "c", "d"} {
		g.joined(n)
	}
	g.cut("c")
	g.cut("d")
	assert.ElementsMatch(t, []string{"c=down", "d=down"}, g.step(30*time.Second))
	g.cut("a")
	g.cut("b")
	for range 10 {
		assert.Empty(t, g.step(10*time.Second), "the members already down count towards the disruption")
	}
	g.back("a")
	assert.Empty(t, g.step(40*time.Second), "three of four cannot be seen: still disrupted")
	g.back("b")
	assert.Empty(t, g.step(time.Minute))
	assert.Equal(t, Up, g.state("a"))
	assert.Equal(t, Up, g.state("b"))
	// A member never joined whose hold ran out counts too.
	u := newDecisions(t, 10*time.Second, "a", "b", "c")
	u.joined("a")
	u.joined("b")
	u.away("c")
	assert.Equal(t, []string{"c=down"}, u.step(10*time.Second))
	u.cut("a")
	assert.Empty(t, u.step(time.Minute), "two of three cannot be seen, c included")

	// Refusals (401/403) are answers, not a disruption.
	f := newDecisions(t, 10*time.Second, "east", "west", "north")
	for _, n := range []string{"east", "west", "north"} {
		f.joined(n)
	}
	for _, n := range []string{"west", "north"} {
		f.cut(n)
		f.slot(n).netDown = false
	}
	assert.ElementsMatch(t, []string{"west=down", "north=down"}, f.step(10*time.Second))
}

// TestSetKeepsAClusterIDWhoseClusterPropertyWent: a member that joined with
// a ClusterProperty ID and joins again without one (an About API CRD
// reinstalled) keeps that ID, not its context name; a ClusterProperty
// with another value renames it.
func TestSetKeepsAClusterIDWhoseClusterPropertyWent(t *testing.T) {
	d := newDecisions(t, 10*time.Second, "east")
	sl := d.slot("east")
	sl.knownID, sl.knownIDSource = "east-1", idFromProperty

	m := &Member{Context: "east", ID: "east", IDSource: idFromContext}
	d.keepID(sl, m)
	assert.Equal(t, "east-1", m.ID, "kept, not renamed after the context")
	assert.Equal(t, idKept, m.IDSource)

	m = &Member{Context: "east", ID: "east-2", IDSource: idFromProperty}
	d.keepID(sl, m)
	assert.Equal(t, "east-2", m.ID, "a new ClusterProperty value is a rename")

	sl.knownID, sl.knownIDSource = "east", idFromContext
	m = &Member{Context: "east", ID: "east", IDSource: idFromContext}
	d.keepID(sl, m)
	assert.Equal(t, idFromContext, m.IDSource, "never had a ClusterProperty: nothing to keep")
}

// restored is a Set of the named members, none joined, that took rec in
// at its start (as Run does with a Record an earlier process saved).
func restored(t *testing.T, grace time.Duration, rec Record, names ...string) *decisions {
	d := newDecisions(t, grace, names...)
	d.restore(rec, d.now)
	return d
}

func TestSetGoesOnFromARecord(t *testing.T) {
	start := time.Unix(1000, 0)
	rec := Record{Members: map[string]RecordedMember{
		"east":  {Cluster: "east", IDSource: idFromProperty, State: "up", Since: start.Add(-time.Hour)},
		"west":  {Cluster: "west", IDSource: idFromProperty, State: "unreachable", Since: start.Add(-15 * time.Second)},
		"north": {Cluster: "north", IDSource: idFromProperty, State: "down", Since: start.Add(-time.Minute)},
	}}
	d := restored(t, 20*time.Second, rec, "east", "west", "north", "south")
	assert.Equal(t, Down, d.state("north"), "withdrawn by an earlier process: not held again")
	assert.Equal(t, Unknown, d.state("west"))
	st := d.Statuses()[1]
	assert.Equal(t, start.Add(5*time.Second), st.WithdrawAt, "the grace period runs from when west went away, not from this start")
	assert.True(t, st.HeldSinceEarlier)
	d.joined("east")
	d.joined("south")
	d.away("west")
	d.away("north")
	assert.True(t, d.Hold().Holds("west"))
	assert.Empty(t, d.step(4*time.Second), "15 s + 4 s away: within the grace period")
	assert.Equal(t, []string{"west=down"}, d.step(time.Second), "20 s since it went away, however many processes ago")
	assert.False(t, d.Hold().Active())

	// What this Set would save is what it goes on from.
	d.mu.Lock()
	again := d.record()
	d.mu.Unlock()
	assert.Equal(t, "down", again.Members["west"].State)
	assert.Equal(t, "down", again.Members["north"].State)
	assert.Equal(t, "up", again.Members["east"].State)
	assert.Equal(t, "east", again.Members["east"].Cluster)
}

func TestSetKeepsARecordedClusterIDAcrossRestarts(t *testing.T) {
	rec := Record{Members: map[string]RecordedMember{
		"ctx-west": {Cluster: "west", IDSource: idFromProperty, State: "up", Since: time.Unix(1, 0)},
	}}
	d := restored(t, 20*time.Second, rec, "ctx-west")
	m := &Member{Context: "ctx-west", ID: "ctx-west", IDSource: idFromContext}
	d.keepID(d.slot("ctx-west"), m)
	assert.Equal(t, "west", m.ID, "the ClusterProperty went while no process ran: the recorded ID is kept, not the context's")
	assert.Equal(t, idKept, m.IDSource)
}

func TestSetDisruptionIsBounded(t *testing.T) {
	d := newDecisions(t, 20*time.Second, "east", "west", "north")
	d.MaxDisruptionForTest(60 * time.Second)
	d.joined("east")
	d.joined("west")
	d.joined("north")
	d.cut("west")
	d.cut("north")
	assert.Empty(t, d.step(time.Second), "two of three away: disrupted")
	assert.True(t, d.Disruption().Active)
	for range 5 {
		assert.Empty(t, d.step(10*time.Second), "within --max-disruption: no withdrawal")
	}
	assert.Empty(t, d.step(10*time.Second), "the limit is reached: grace periods run again from here")
	assert.True(t, d.Disruption().LimitReached)
	assert.Equal(t, time.Unix(1000+80, 0), d.Statuses()[1].WithdrawAt, "away 1 s before the disruption, then 60 s of it paused")
	assert.Empty(t, d.step(18*time.Second))
	assert.ElementsMatch(t, []string{"west=down", "north=down"}, d.step(time.Second), "withdrawn although the disruption lasts")

	// The record says the limit was reached: a next process does not
	// pause the grace periods a second time.
	d.mu.Lock()
	rec := d.record()
	d.mu.Unlock()
	require.NotNil(t, rec.DisruptedSince)
	assert.True(t, rec.LimitReached)
}

func TestSetDisruptionGoesOnAcrossRestarts(t *testing.T) {
	start := time.Unix(1000, 0)
	began := start.Add(-50 * time.Second)
	rec := Record{
		Members: map[string]RecordedMember{
			"east":  {Cluster: "east", IDSource: idFromProperty, State: "up", Since: start.Add(-time.Hour)},
			"west":  {Cluster: "west", IDSource: idFromProperty, State: "unreachable", Since: began.Add(-5 * time.Second)},
			"north": {Cluster: "north", IDSource: idFromProperty, State: "unreachable", Since: began.Add(-5 * time.Second)},
		},
		DisruptedSince: &began,
	}
	d := restored(t, 20*time.Second, rec, "east", "west", "north")
	d.MaxDisruptionForTest(60 * time.Second)
	d.joined("east")
	d.away("west")
	d.away("north")
	assert.Empty(t, d.step(time.Second), "still disrupted")
	assert.Equal(t, began, d.Disruption().Since, "the disruption began before this process")
	assert.Empty(t, d.step(9*time.Second), "60 s since it began: the limit, counted from then")
	assert.True(t, d.Disruption().LimitReached)
	assert.Empty(t, d.step(14*time.Second), "5 s before the disruption + 14 s after the limit")
	assert.ElementsMatch(t, []string{"west=down", "north=down"}, d.step(time.Second))
}

func TestSetDecidesNothingBeforeEveryMemberWasTried(t *testing.T) {
	start := time.Unix(1000, 0)
	rec := Record{Members: map[string]RecordedMember{
		"west": {Cluster: "west", State: "unreachable", Since: start.Add(-time.Minute)},
	}}
	d := restored(t, 20*time.Second, rec, "east", "west")
	d.joined("east")
	assert.Empty(t, d.step(time.Second), "west's first attempt has not ended: it may be about to join")
	d.away("west")
	assert.Equal(t, []string{"west=down"}, d.step(time.Second))
}

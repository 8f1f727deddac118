package vip

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-dns/mcs-dns/importer/members"
)

// TestClaimIndexTakeRelease: a claim taken is found by address and by
// key; taking it again replaces it; releasing it, or dropping its source,
// frees its addresses, unless another source shows the same claim.
func TestClaimIndexTakeRelease(t *testing.T) {
	x := newClaimIndex()
	a1, a2 := netip.MustParseAddr("10.250.0.1"), netip.MustParseAddr("10.250.0.2")
	owner := func(a netip.Addr, key string) string { o, _ := x.owner(a, key); return o }
	taken := func(a netip.Addr, key string) bool { _, tk := x.owner(a, key); return tk }

	x.take("east", Claim{Key: "ns/a", IPs: []netip.Addr{a1}, Since: t0})
	assert.Equal(t, "ns/a", owner(a1, "ns/b"))
	assert.True(t, taken(a1, "ns/b"))
	assert.False(t, taken(a1, "ns/a"), "its own address is not taken from it")
	assert.Equal(t, "", owner(a2, "ns/b"))
	assert.Equal(t, 1, x.addresses())

	x.take("west", Claim{Key: "ns/a", IPs: []netip.Addr{a1}, Since: t0.Add(time.Second)})
	assert.Len(t, x.claimsOf("ns/a"), 2, "one claim per source")
	assert.Equal(t, 1, x.addresses())
	x.release("east", "ns/a")
	assert.True(t, taken(a1, "ns/b"), "west still shows it")
	x.take("west", Claim{Key: "ns/a", IPs: []netip.Addr{a2}, Since: t0})
	assert.False(t, taken(a1, "ns/b"), "moved: the old address is free")
	assert.True(t, taken(a2, "ns/b"))
	x.release("west", "ns/a")
	x.release("west", "ns/a") // twice: nothing left to release
	assert.Zero(t, x.addresses())
	assert.Empty(t, x.claimsOf("ns/a"))
	assert.Empty(t, x.sources)

	x.take("east", Claim{Key: "ns/a", IPs: []netip.Addr{a1}, Since: t0})
	x.take("east", Claim{Key: "ns/b", IPs: []netip.Addr{a2}, Since: t0})
	x.take("west", Claim{Key: "ns/b", IPs: []netip.Addr{a2}, Since: t0})
	x.dropSource("east")
	assert.False(t, taken(a1, "ns/x"))
	assert.True(t, taken(a2, "ns/x"), "west's claim stays")
	assert.Equal(t, 1, x.addresses())

	x.hidden = func(src any, key string) bool { return src == "west" }
	assert.False(t, taken(a2, "ns/x"), "hidden claims are not seen")
	assert.Empty(t, x.claimsOf("ns/b"))
}

// TestClaimIndexCollision: an address two imports claim (racing
// importers) belongs to the earlier claim, whichever source shows which;
// the other import gets another address, and the winner keeps its own.
func TestClaimIndexCollision(t *testing.T) {
	p := mustPool(t, "10.250.0.0/29")
	a := netip.MustParseAddr("10.250.0.3")
	x := newClaimIndex()
	x.take("east", Claim{Key: "ns/young", IPs: []netip.Addr{a}, Since: t0.Add(time.Second)})
	x.take("west", Claim{Key: "ns/old", IPs: []netip.Addr{a}, Since: t0})
	x.take("north", Claim{Key: "ns/young", IPs: []netip.Addr{a}, Since: t0.Add(time.Second)})
	owner, taken := x.owner(a, "ns/young")
	assert.Equal(t, "ns/old", owner)
	assert.True(t, taken)

	ips, _, err := p.choose("ns/old", v4, x)
	require.NoError(t, err)
	assert.Equal(t, []netip.Addr{a}, ips, "the earlier claim keeps it")
	ips, _, err = p.choose("ns/young", v4, x)
	require.NoError(t, err)
	require.Len(t, ips, 1)
	assert.NotEqual(t, a, ips[0], "the later claim moves")

	x.release("west", "ns/old")
	ips, _, err = p.choose("ns/young", v4, x)
	require.NoError(t, err)
	assert.Equal(t, []netip.Addr{a}, ips, "no longer contested: kept")
}

// chooseByScan is Pool.Choose as it was before the index: every claim
// read and sorted on every call. The index must give the same answers.
func chooseByScan(p *Pool, key string, want []corev1.IPFamily, claims []Claim) ([]netip.Addr, []corev1.IPFamily, error) {
	if len(want) == 0 {
		want = p.Families()[:1]
	}
	sorted := slices.Clone(claims)
	slices.SortStableFunc(sorted, func(a, b Claim) int {
		if earlier(a, b) {
			return -1
		}
		if earlier(b, a) {
			return 1
		}
		return 0
	})
	owner := map[netip.Addr]string{}
	taken := map[netip.Addr]bool{}
	for _, c := range sorted {
		for _, a := range c.IPs {
			if _, ok := owner[a]; !ok {
				owner[a] = c.Key
			}
			if c.Key != key {
				taken[a] = true
			}
		}
	}
	var ips []netip.Addr
	var missing []corev1.IPFamily
	var err error
	for _, f := range want {
		pfx := p.prefix(f)
		if !pfx.IsValid() {
			missing = append(missing, f)
			continue
		}
		found := false
	keep:
		for _, c := range sorted {
			if c.Key != key {
				continue
			}
			for _, a := range c.IPs {
				if pfx.Contains(a) && owner[a] == key {
					ips, found = append(ips, a), true
					break keep
				}
			}
		}
		if found {
			continue
		}
		n := size(pfx)
		i := start(key, f, n)
		for step := 0; step <= len(taken) && big.NewInt(int64(step)).Cmp(n) < 0; step++ {
			if a := nth(pfx, i); !taken[a] {
				ips, found = append(ips, a), true
				break
			}
			i.Add(i, big.NewInt(1))
			if i.Cmp(n) >= 0 {
				i.SetInt64(0)
			}
		}
		if !found {
			err = fmt.Errorf("%w: no free %s address in %s", ErrExhausted, f, pfx)
		}
	}
	return ips, missing, err
}

// TestChooseSameAsScan: over random claims (collisions, several per key,
// full pools), Choose through the index answers as the scan did.
func TestChooseSameAsScan(t *testing.T) {
	p := mustPool(t, "10.250.0.0/29", "fd00:250::/125")
	r := rand.New(rand.NewPCG(1, 2))
	pick := func() netip.Addr {
		if r.IntN(2) == 0 {
			return netip.AddrFrom4([4]byte{10, 250, 0, byte(r.IntN(8))})
		}
		return netip.MustParseAddr(fmt.Sprintf("fd00:250::%d", r.IntN(8)))
	}
	fams := [][]corev1.IPFamily{nil, v4, v6, {corev1.IPv6Protocol, corev1.IPv4Protocol}}
	for range 3000 {
		var claims []Claim
		for range r.IntN(12) {
			c := Claim{Key: fmt.Sprintf("ns/%d", r.IntN(6)), Since: t0.Add(time.Duration(r.IntN(4)) * time.Second)}
			for range 1 + r.IntN(2) {
				c.IPs = append(c.IPs, pick())
			}
			claims = append(claims, c)
		}
		key, want := fmt.Sprintf("ns/%d", r.IntN(6)), fams[r.IntN(len(fams))]
		ips, missing, err := p.Choose(key, want, claims)
		wips, wmissing, werr := chooseByScan(p, key, want, claims)
		require.Equal(t, wips, ips, "%s %v %v", key, want, claims)
		require.Equal(t, wmissing, missing)
		require.Equal(t, werr, err)
	}
}

// TestCIDRIndexFollowsMembers: the index of a CIDR over member caches
// follows the import events (an import deleted frees its address and
// wakes the imports waiting for one), and reads a member's caches afresh
// when they are listed again (a relist, after which no event tells what
// went while the member was away); while the member is down its last
// claims stay.
func TestCIDRIndexFollowsMembers(t *testing.T) {
	ctx := context.Background()
	w := &wakes{}
	a := ownedImport("ns", "a", "10.250.0.1", t0)
	b := ownedImport("ns", "b", "10.250.0.2", t0)
	east := fakeMember(t, "east", w.notify, a, b)
	c := w.set(NewCIDR(mustPool(t, "10.250.0.0/30"), members.Static{east})) // 2 usable addresses

	got, err := c.Assign(ctx, "east", optedIn("ns", "x"))
	require.NoError(t, err)
	require.Empty(t, got.IPs, "a and b hold both addresses")
	assert.Equal(t, ReasonClusterSetIPExhausted, got.Ready.Reason)

	require.NoError(t, east.MCS.MulticlusterV1beta1().ServiceImports("ns").Delete(ctx, "a", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return w.woke("ns/x") }, 10*time.Second, 10*time.Millisecond,
		"a's deletion frees its address and wakes x")
	got, err = c.Assign(ctx, "east", optedIn("ns", "x"))
	require.NoError(t, err)
	assert.Equal(t, []string{"10.250.0.1"}, got.IPs)

	// The member goes and comes back listed afresh: meanwhile b went and
	// y took its address (events the CIDR never saw).
	holder := func(addr string) string {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.syncGens()
		owner, _ := c.index.owner(netip.MustParseAddr(addr), "")
		return owner
	}
	require.Equal(t, "ns/b", holder("10.250.0.2"))
	east.Stop()
	assert.Equal(t, "ns/b", holder("10.250.0.2"), "a member that is down keeps its claims: b's address is not given to another import while it is away")
	require.NoError(t, east.MCS.MulticlusterV1beta1().ServiceImports("ns").Delete(ctx, "b", metav1.DeleteOptions{}))
	_, err = east.MCS.MulticlusterV1beta1().ServiceImports("ns").Create(ctx, ownedImport("ns", "y", "10.250.0.2", t0), metav1.CreateOptions{})
	require.NoError(t, err)
	restart(t, east, w.notify)
	assert.Equal(t, "ns/y", holder("10.250.0.2"), "indexed afresh from the new caches")
}

// restart starts m's caches again (a new generation, listed afresh).
func restart(t *testing.T, m *members.Member, notify func(members.Event)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, m.Start(ctx, notify, time.Minute))
	t.Cleanup(m.Stop)
}

// TestCIDRTieBreakIsTheSameForEveryImporter: equally early claims of one
// import in two members are ordered by cluster ID, not by the order an
// importer lists its members in, so that two importers (--import-into,
// each with its own --contexts order) decide the same VIP.
func TestCIDRTieBreakIsTheSameForEveryImporter(t *testing.T) {
	ctx := context.Background()
	quiet := func(members.Event) {}
	east := fakeMember(t, "east", quiet, ownedImport("ns", "x", "10.250.0.1", t0))
	west := fakeMember(t, "west", quiet, ownedImport("ns", "x", "10.250.0.2", t0))
	for _, order := range []members.Static{{east, west}, {west, east}} {
		c := NewCIDR(mustPool(t, "10.250.0.0/29"), order)
		got, err := c.Assign(ctx, "east", optedIn("ns", "x"))
		require.NoError(t, err)
		assert.Equal(t, []string{"10.250.0.1"}, got.IPs, "members in the order %s, %s", order[0].ID, order[1].ID)
	}
}

// TestCIDRSteadyClaimFreedAtOnce: an import whose VIP every cache already
// shows, decided again (a resync, a restart), leaves no pending decision
// behind: when it is deleted, its address goes to the waiting import as
// soon as the cache shows it gone, not after the pending hold.
func TestCIDRSteadyClaimFreedAtOnce(t *testing.T) {
	ctx := context.Background()
	w := &wakes{}
	east := fakeMember(t, "east", w.notify, ownedImport("ns", "a", "10.250.0.1", t0), ownedImport("ns", "b", "10.250.0.2", t0))
	c := w.set(NewCIDR(mustPool(t, "10.250.0.0/30"), members.Static{east})) // 2 usable addresses

	got, err := c.Assign(ctx, "east", optedIn("ns", "a")) // decided again, as written
	require.NoError(t, err)
	require.Equal(t, []string{"10.250.0.1"}, got.IPs)
	got, err = c.Assign(ctx, "east", optedIn("ns", "x"))
	require.NoError(t, err)
	require.Empty(t, got.IPs)

	require.NoError(t, east.MCS.MulticlusterV1beta1().ServiceImports("ns").Delete(ctx, "a", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return w.woke("ns/x") }, 10*time.Second, 10*time.Millisecond)
	got, err = c.Assign(ctx, "east", optedIn("ns", "x"))
	require.NoError(t, err)
	assert.Equal(t, []string{"10.250.0.1"}, got.IPs, "a's address, freed at once")
}

// wakes passes a member's import events to a CIDR (once set) and records
// the imports its ImportChanged wakes.
type wakes struct {
	mu    sync.Mutex
	c     *CIDR
	woken []string
}

func (w *wakes) notify(ev members.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.c != nil && ev.Kind == members.KindImport {
		w.woken = append(w.woken, w.c.ImportChanged(ev)...)
	}
}

func (w *wakes) set(c *CIDR) *CIDR {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.c = c
	return c
}

func (w *wakes) woke(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.woken, key)
}

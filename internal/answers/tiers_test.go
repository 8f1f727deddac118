package answers

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// regions sets the source region of each cluster's slices.
func regions(sl []*Slice, byCluster map[string]string) []*Slice {
	for _, s := range sl {
		s.Region = byCluster[s.ClusterID]
	}
	return sl
}

// srvPriorities are the priority of each SRV answer's target, by the
// target's first label.
func srvPriorities(t *testing.T, s *Set, name string) (order []string, prio map[string]uint16) {
	t.Helper()
	m, _ := ringReply(t, s, name, dns.TypeSRV, dns.MaxMsgSize, false)
	prio = map[string]uint16{}
	for _, rr := range m.Answer {
		srv := rr.(*dns.SRV)
		host := srv.Target[:strings.IndexByte(srv.Target, '.')]
		order = append(order, host)
		prio[host] = srv.Priority
	}
	return order, prio
}

// Three tiers: this cluster's endpoints, then those of the clusters of
// its region, then the others; SRV priorities 0, 10, 20.
func TestTiersOrderAndPriorities(t *testing.T) {
	svc, sl := shapedService([]string{"east", "north", "south", "west"}, 2, true)
	regions(sl, map[string]string{"east": "eu", "north": "eu", "south": "us", "west": "eu"})
	sh := &Shaping{ClusterID: "north", Region: "eu", Locality: LocalityLocalFirst}
	s := Build(svc, sl, Config{Zones: []string{"clusterset.local."}, TTL: 5, Shaping: sh})
	require.True(t, s.LocalFirst())
	assert.Equal(t, []string{"east", "west"}, s.regional)

	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		m, _ := ringReply(t, s, dbName, qtype, dns.MaxMsgSize, false)
		assert.Equal(t, []string{"north-0", "north-1", "east-0", "east-1", "west-0", "west-1", "south-0", "south-1"},
			hosts(t, s, m.Answer), dns.TypeToString[qtype])
	}
	for _, name := range []string{dbName, "_pg._tcp." + dbName} {
		order, prio := srvPriorities(t, s, name)
		assert.Equal(t, []string{"north-0", "north-1", "east-0", "east-1", "west-0", "west-1", "south-0", "south-1"}, order)
		for host, p := range prio {
			want := map[string]uint16{"north": 0, "east": 10, "west": 10, "south": 20}[host[:strings.IndexByte(host, '-')]]
			assert.Equal(t, want, p, host)
		}
	}
	base := s.zones[0].top.owner
	for owner, want := range map[string]Tier{
		"north-0.north." + base: TierLocal, "east-1.east." + base: TierRegion, "south-0.south." + base: TierOther,
		"x.nowhere." + base: TierOther, "north." + base: TierOther, "north-0.north.other.": TierOther,
	} {
		assert.Equal(t, want, s.Tier(owner, base), owner)
	}
	assert.Equal(t, "local", TierLocal.String())
	assert.Equal(t, "region", TierRegion.String())
	assert.Equal(t, "other", TierOther.String())
}

// An empty tier is skipped: with no local endpoint the region's come
// first, with none in the region either the others; the priorities stay
// those of the tiers.
func TestTiersFailover(t *testing.T) {
	svc, sl := shapedService([]string{"east", "south", "west"}, 2, false)
	regions(sl, map[string]string{"east": "eu", "north": "eu", "south": "us", "west": "eu"})
	sh := &Shaping{ClusterID: "north", Region: "eu", Locality: LocalityLocalFirst}
	s := Build(svc, sl, Config{Zones: []string{"clusterset.local."}, TTL: 5, Shaping: sh})
	m, _ := ringReply(t, s, dbName, dns.TypeA, dns.MaxMsgSize, false)
	assert.Equal(t, []string{"east-0", "east-1", "west-0", "west-1", "south-0", "south-1"}, hosts(t, s, m.Answer))
	order, prio := srvPriorities(t, s, dbName)
	assert.Equal(t, "east-0", order[0])
	assert.Equal(t, uint16(RegionPriority), prio["east-0"])
	assert.Equal(t, uint16(OtherPriority), prio["south-0"])

	// Nothing in the region either: the others, at priority 20.
	svc, sl = shapedService([]string{"south"}, 2, false)
	regions(sl, map[string]string{"south": "us"})
	s = Build(svc, sl, Config{Zones: []string{"clusterset.local."}, TTL: 5, Shaping: sh})
	_, prio = srvPriorities(t, s, dbName)
	assert.Equal(t, map[string]uint16{"south-0": OtherPriority, "south-1": OtherPriority}, prio)

	// A UDP-sized reply takes the closest tiers first.
	svc, sl = shapedService([]string{"east", "north", "south"}, 40, false)
	regions(sl, map[string]string{"east": "eu", "north": "eu", "south": "us"})
	s = Build(svc, sl, Config{Zones: []string{"clusterset.local."}, TTL: 5, Shaping: sh})
	m, _ = ringReply(t, s, dbName, dns.TypeA, 512, false)
	got := hosts(t, s, m.Answer)
	require.Greater(t, len(got), 20)
	for i, h := range got {
		switch {
		case i < 40:
			assert.True(t, strings.HasPrefix(h, "north-"), h)
		default:
			assert.True(t, strings.HasPrefix(h, "east-"), h)
		}
	}
}

// Without a region the answers are exactly those of two tiers, as
// before regions (the others at RemotePriority); a region no other
// cluster has, or slices without regions, change nothing but the
// others' priority.
func TestTiersWithoutRegion(t *testing.T) {
	svc, sl := shapedService([]string{"east", "north", "west"}, 2, false)
	regions(sl, map[string]string{"east": "eu", "north": "eu", "west": "eu"})
	for _, sh := range []*Shaping{
		{ClusterID: "north", Locality: LocalityLocalFirst},
		{ClusterID: "north", Region: "us", Locality: LocalityLocalFirst},
	} {
		s := Build(svc, sl, Config{Zones: []string{"clusterset.local."}, TTL: 5, Shaping: sh})
		assert.Empty(t, s.regional)
		m, _ := ringReply(t, s, dbName, dns.TypeA, dns.MaxMsgSize, false)
		assert.Equal(t, []string{"north-0", "north-1", "east-0", "east-1", "west-0", "west-1"}, hosts(t, s, m.Answer))
		_, prio := srvPriorities(t, s, dbName)
		want := uint16(RemotePriority)
		if sh.Region != "" {
			want = OtherPriority
		}
		assert.Equal(t, uint16(LocalPriority), prio["north-0"])
		assert.Equal(t, want, prio["east-0"])
		assert.Equal(t, want, prio["west-1"])
	}
	assert.Equal(t, uint16(10), (*Shaping)(nil).Priority(TierOther))

	// Locality none: regions change nothing, all priority 0.
	s := Build(svc, sl, Config{Zones: []string{"clusterset.local."}, TTL: 5,
		Shaping: &Shaping{ClusterID: "north", Region: "eu", Locality: LocalityNone}})
	assert.Nil(t, s.regional)
	_, prio := srvPriorities(t, s, dbName)
	for h, p := range prio {
		assert.Zero(t, p, h)
	}
}

// A cluster whose slices disagree on the region (being rewritten) is in
// the region tier once one of them carries it.
func TestRegionalClusters(t *testing.T) {
	sh := &Shaping{ClusterID: "a", Region: "eu"}
	got := regionalClusters([]*Slice{
		{ClusterID: "a", Region: "eu"}, {ClusterID: "b", Region: "eu"}, {ClusterID: "b", Region: "eu"},
		{ClusterID: "c", Region: "us"}, {ClusterID: "c", Region: "eu"}, {ClusterID: "d"},
	}, sh)
	assert.Equal(t, []string{"b", "c"}, got)
	assert.Nil(t, regionalClusters([]*Slice{{ClusterID: "b", Region: "eu"}}, &Shaping{ClusterID: "a"}))
}

// Rotation turns each tier on its own: every reply still lists the
// tiers in order.
func TestTiersRotate(t *testing.T) {
	svc, sl := shapedService([]string{"east", "north", "south"}, 3, true)
	regions(sl, map[string]string{"east": "eu", "north": "eu", "south": "us"})
	sh := &Shaping{ClusterID: "north", Region: "eu", Locality: LocalityLocalFirst, Rotate: true}
	s := Build(svc, sl, Config{Zones: []string{"clusterset.local."}, TTL: 5, Shaping: sh})
	firsts := map[string]bool{}
	for range 6 {
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
			m, _ := ringReply(t, s, dbName, qtype, dns.MaxMsgSize, false)
			got := hosts(t, s, m.Answer)
			require.Len(t, got, 9)
			for i, h := range got {
				want := []string{"north-", "east-", "south-"}[i/3]
				assert.True(t, strings.HasPrefix(h, want), "%v", got)
			}
			firsts[got[0]] = true
		}
	}
	assert.Len(t, firsts, 3, "the local tier turns")
}

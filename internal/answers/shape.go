package answers

import (
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/mcs-dns/mcs-dns/internal/dnswire"
)

// Shaping a headless service's answers for the asker: the closest
// endpoints first (local-first: this cluster's, then those of clusters
// in its region, then the others), rotated, and cut to what fits the
// client's buffer. The answers of a headless service's name (A, AAAA,
// SRV) and of its SRV names are packed once, on first use, as a
// dnswire.Ring: a list of units (the records of one endpoint each) in
// groups, one per tier (local, region, other; an empty one is left
// out), that replies take rotations and prefixes of by copying bytes.

// Locality says which headless answers list the closest endpoints
// first (see Tier).
type Locality uint8

const (
	// LocalityDefault: the imports whose trafficDistribution asks for
	// closeness (PreferClose, PreferSameZone, PreferSameNode).
	LocalityDefault Locality = iota
	// LocalityNone: none; answers list the endpoints by source cluster.
	LocalityNone
	// LocalityLocalFirst: every headless import.
	LocalityLocalFirst
)

// Shaping is how headless answers are shaped (see Config).
type Shaping struct {
	// ClusterID is this cluster's ID ("" unknown: no endpoint is local).
	ClusterID string
	// Region is this cluster's region ("" unknown: no endpoint is in the
	// region tier, and local-first answers have two tiers, as before
	// regions).
	Region   string
	Locality Locality
	// Rotate rotates the endpoints of successive answers.
	Rotate bool
	// MaxAnswers caps the endpoints of an answer (0: none).
	MaxAnswers int
}

// Tier is how close an endpoint is to this cluster: local-first answers
// list the tiers in order.
type Tier uint8

const (
	// TierLocal: an endpoint of this cluster (its slice's source cluster
	// is Shaping.ClusterID).
	TierLocal Tier = iota
	// TierRegion: an endpoint of another cluster of this cluster's region
	// (its slice's source region is Shaping.Region, both known).
	TierRegion
	// TierOther: any other endpoint.
	TierOther
	numTiers
)

func (t Tier) String() string {
	switch t {
	case TierLocal:
		return "local"
	case TierRegion:
		return "region"
	}
	return "other"
}

// Priorities of the SRV records of local-first answers, by tier: clients
// try the targets of the lowest priority first (RFC 2782), so they fail
// over to the region's other clusters only when this cluster's endpoints
// are gone, and to the rest only when the region's are gone too; a tier
// without endpoints is skipped. Without a region (Shaping.Region "") the
// others keep RemotePriority, as before regions: answers are exactly
// those of two tiers.
const (
	LocalPriority  = 0
	RegionPriority = 10
	OtherPriority  = 20
	// RemotePriority is the others' priority when this cluster has no
	// region.
	RemotePriority = 10
)

// Priority is the SRV priority of the endpoints of tier t under sh.
func (sh *Shaping) Priority(t Tier) uint16 {
	switch {
	case t == TierLocal:
		return LocalPriority
	case t == TierRegion:
		return RegionPriority
	case sh == nil || sh.Region == "":
		return RemotePriority
	}
	return OtherPriority
}

// PrefersClose reports whether a Service trafficDistribution value asks
// for endpoints close to the client.
func PrefersClose(trafficDistribution string) bool {
	switch trafficDistribution {
	case "PreferClose", "PreferSameZone", "PreferSameNode":
		return true
	}
	return false
}

// localFirst reports whether a headless service's answers list the
// local endpoints first under sh.
func (sh *Shaping) localFirst(svc *Service) bool {
	if sh == nil || sh.ClusterID == "" {
		return false
	}
	switch sh.Locality {
	case LocalityLocalFirst:
		return true
	case LocalityDefault:
		return PrefersClose(svc.TrafficDistribution)
	}
	return false
}

// LocalFirst reports whether the set's headless answers list the
// closest endpoints first, by tier.
func (s *Set) LocalFirst() bool { return s.localFirst }

// Shapes reports whether the answers of qtype at n, a node of zone index
// zone, are shaped (the name or an SRV name of a headless service) and
// whether they are plain: in the order of Records, not rotated or
// capped, so that n's template (Packed) answers when it fits.
func (s *Set) Shapes(zone int, n *Node, qtype uint16) (shaped, plain bool) {
	if s == nil || s.typ != Headless || zone < 0 || zone >= len(s.zones) || n == emptyNode {
		return false, false
	}
	switch qtype {
	case dns.TypeA, dns.TypeAAAA:
		if n != s.zones[zone].top {
			return false, false
		}
	case dns.TypeSRV:
		if n.srv == nil {
			return false, false
		}
	default:
		return false, false
	}
	sh := s.shaping
	return true, !s.localFirst && (sh == nil || !sh.Rotate && sh.MaxAnswers == 0)
}

// Ring returns the ring of qtype at n (see Shapes), whose lower-case
// owner name is qname, packing it on first use; nil when n's answers are
// not shaped or cannot be packed. Safe for concurrent use.
func (s *Set) Ring(zone int, n *Node, qname string, qtype uint16) *dnswire.Ring {
	if shaped, _ := s.Shapes(zone, n, qtype); !shaped {
		return nil
	}
	slot := packedSlot(qtype)
	cur := n.packed.Load()
	if cur == nil || cur.rings[slot] == nil {
		var rings [3]*dnswire.Ring
		if qtype == dns.TypeSRV {
			rings[slot] = s.srvRing(zone, n, qname)
		} else {
			rings[0], rings[1] = s.addrRings(n, qname)
		}
		for i, r := range rings {
			if r == nil && (i == slot || qtype != dns.TypeSRV && i < 2) {
				rings[i] = unpackableRing
			}
		}
		cur = n.storeRings(cur, rings)
	}
	if r := cur.rings[slot]; r != unpackableRing {
		return r
	}
	return nil
}

// unpackableRing marks an answer that cannot be packed as a ring.
var unpackableRing = &dnswire.Ring{}

// ringOptions are the options of the set's rings with records of
// recLen octets (0: perUnit records per unit), rotating from start.
func (s *Set) ringOptions(recLen, perUnit int, start uint32) dnswire.RingOptions {
	o := dnswire.RingOptions{RecLen: recLen, PerUnit: perUnit, Start: start}
	if sh := s.shaping; sh != nil {
		o.Max, o.Rotate = sh.MaxAnswers, sh.Rotate
	}
	return o
}

// tier returns the tier of the endpoint named owner, "<host>.<cluster
// ID>.<base>": local when the cluster ID is this cluster's, region when
// it is one of s.regional, else other. It runs when a ring is packed
// (once per change of the service), never per query.
func (s *Set) tier(owner, base string) Tier {
	i := strings.IndexByte(owner, '.')
	if i < 0 || !strings.HasSuffix(owner, base) || len(owner)-len(base)-1 <= i+1 || owner[len(owner)-len(base)-1] != '.' {
		return TierOther
	}
	id := owner[i+1 : len(owner)-len(base)-1]
	switch {
	case id == s.shaping.ClusterID:
		return TierLocal
	case slices.Contains(s.regional, id):
		return TierRegion
	}
	return TierOther
}

// unitTier is the tier of the endpoint named owner ("" none) in a ring
// of the set: TierOther for all when the set is not local-first.
func (s *Set) unitTier(owner, base string) Tier {
	if !s.localFirst || owner == "" {
		return TierOther
	}
	return s.tier(owner, base)
}

// addrUnit is one endpoint's addresses in a service's A and AAAA
// answers: indexes into the service name's addresses.
type addrUnit struct {
	v4, v6 []int32
	tier   Tier
}

// addrUnits returns the units of the A and AAAA answers of the service
// name n: the endpoints with a name (an address belongs to the first
// whose PTR target it is), each address of an endpoint without one a
// unit of its own, in the order of their first address in n.addrs.
func (s *Set) addrUnits(n *Node) []addrUnit {
	var units []addrUnit
	byNode := make(map[*Node]int)
	base := s.zones[0].top.owner
	for j := range n.addrs {
		u := -1
		var owner string
		if targets := s.ptrTargets(j); len(targets) > 0 {
			owner = targets[0].owner
			if i, ok := byNode[targets[0]]; ok {
				u = i
			} else {
				byNode[targets[0]] = len(units)
			}
		}
		if u < 0 {
			u = len(units)
			units = append(units, addrUnit{tier: s.unitTier(owner, base)})
		}
		if j < int(n.v4) {
			units[u].v4 = append(units[u].v4, int32(j)) // #nosec G115 -- at most the addresses of a service
		} else {
			units[u].v6 = append(units[u].v6, int32(j)) // #nosec G115 -- idem
		}
	}
	return units
}

// addrRings packs the A and AAAA rings of the service name n (in any
// zone: they share their addresses), whose units are addrUnits: the A
// answer lists the addresses in the order of Records. A service with
// one address family has one ring, of its units. With both, the two
// rings have every unit, in the same groups and order (a unit without
// addresses of a family takes no octets in its ring), are paired, and
// rotate from the same start: an A and an AAAA reply of the same buffer
// and rotation name the same endpoints of both families, and each as
// many endpoints of its family alone as fit (dnswire.Ring.Choose).
func (s *Set) addrRings(n *Node, qname string) (a, aaaa *dnswire.Ring) {
	units := s.addrUnits(n)
	groups := tierGroups(len(units), func(i int) Tier { return units[i].tier })
	hasV4, hasV6 := n.v4 > 0, len(n.addrs) > int(n.v4)
	paired := hasV4 && hasV6
	mixed := false // some endpoint has one family only
	for _, u := range units {
		mixed = mixed || paired && (len(u.v4) == 0 || len(u.v6) == 0)
	}
	if mixed {
		for i, g := range groups {
			groups[i] = spreadV6Only(g, units)
		}
	}
	var v4Groups, v6Groups []dnswire.RingGroup
	for _, g := range groups {
		var g4, g6 dnswire.RingGroup
		g4.Ends = make([]uint32, 1, len(g)+1)
		g6.Ends = make([]uint32, 1, len(g)+1)
		if mixed {
			g4.Count = make([]uint32, 1, len(g)+1)
			g6.Count = make([]uint32, 1, len(g)+1)
		}
		for _, ui := range g {
			u := units[ui]
			for _, j := range u.v4 {
				b := n.addrs[j].As4()
				g4.Recs = dnswire.AppendAddrRR(g4.Recs, b[:], n.ttl)
			}
			for _, j := range u.v6 {
				b := n.addrs[j].As16()
				g6.Recs = dnswire.AppendAddrRR(g6.Recs, b[:], n.ttl)
			}
			g4.Ends = append(g4.Ends, uint32(len(g4.Recs))) // #nosec G115 -- bounded by the records' octets
			g6.Ends = append(g6.Ends, uint32(len(g6.Recs))) // #nosec G115 -- idem
			if mixed {
				g4.Count = append(g4.Count, g4.Count[len(g4.Count)-1]+uint32(min(len(u.v4), 1))) // #nosec G115 -- 0 or 1
				g6.Count = append(g6.Count, g6.Count[len(g6.Count)-1]+uint32(min(len(u.v6), 1))) // #nosec G115 -- idem
			}
		}
		if paired {
			// The same arrays serve both rings, each the other's pair.
			g4.Pair, g6.Pair = g6.Ends, g4.Ends
			g4.PairCount, g6.PairCount = g6.Count, g4.Count
		}
		v4Groups, v6Groups = append(v4Groups, g4), append(v6Groups, g6)
	}
	start := rand.Uint32() // rotation starts anywhere (see srvRing), the same for both
	if hasV4 {
		a = dnswire.NewRing(qname, dns.TypeA, v4Groups, s.ringOptions(dnswire.ARRLen, 0, start))
	}
	if hasV6 {
		aaaa = dnswire.NewRing(qname, dns.TypeAAAA, v6Groups, s.ringOptions(dnswire.AAAARRLen, 0, start))
	}
	return a, aaaa
}

// spreadV6Only returns the units g (indexes into units) with those that
// have IPv6 addresses only spread evenly among the others, each kind in
// its order. addrUnits lists them after every endpoint with an IPv4
// address; in one run, a rotation starting in it would fill an AAAA
// reply with them, leaving the paired A reply nothing but what follows
// (see dnswire.Ring.Choose).
func spreadV6Only(g []int, units []addrUnit) []int {
	var v4, v6 []int
	for _, ui := range g {
		if len(units[ui].v4) > 0 {
			v4 = append(v4, ui)
		} else {
			v6 = append(v6, ui)
		}
	}
	if len(v4) == 0 || len(v6) == 0 {
		return g
	}
	out := make([]int, 0, len(g))
	j := 0
	for i, ui := range v4 {
		out = append(out, ui)
		// After the (i+1)th of len(v4), (i+1)/len(v4) of the others.
		for ; j*len(v4) < (i+1)*len(v6); j++ {
			out = append(out, v6[j])
		}
	}
	return out
}

// srvRing packs the SRV ring of n in zone index zone: a unit per target,
// with a record per port (in a local-first set the priority of the
// target's tier, Shaping.Priority; else all 0) and the target's
// addresses as additional records.
func (s *Set) srvRing(zone int, n *Node, qname string) *dnswire.Ring {
	spec := n.srv
	if len(spec.targets) == 0 || len(spec.ports) == 0 {
		return nil
	}
	base := s.zones[zone].top.owner
	all := len(spec.targets) * len(spec.ports)
	weight := uint16(max(1, 100/all)) // #nosec G115 -- at most 100
	groups := tierGroups(len(spec.targets), func(i int) Tier { return s.unitTier(spec.targets[i].owner, base) })
	var out []dnswire.RingGroup
	for gi, g := range groups {
		if len(g) == 0 {
			continue
		}
		prio := uint16(0)
		if s.localFirst {
			prio = s.shaping.Priority(Tier(gi)) // #nosec G115 -- fewer than numTiers
		}
		rg := dnswire.RingGroup{Ends: make([]uint32, 1, len(g)+1), ExtraEnds: make([]uint32, 1, len(g)+1)}
		for _, ti := range g {
			t := spec.targets[ti]
			for _, p := range spec.ports {
				rg.Recs = dnswire.AppendSRVRR(rg.Recs, n.ttl, prio, weight, p, t.owner)
			}
			for i, ip := range t.addrs {
				if i < int(t.v4) {
					b := ip.As4()
					rg.Extra = dnswire.AppendNamedAddrRR(rg.Extra, t.owner, b[:], t.ttl)
				} else {
					b := ip.As16()
					rg.Extra = dnswire.AppendNamedAddrRR(rg.Extra, t.owner, b[:], t.ttl)
				}
			}
			rg.ExtraCount += len(t.addrs)
			rg.Ends = append(rg.Ends, uint32(len(rg.Recs)))            // #nosec G115 -- bounded by memory
			rg.ExtraEnds = append(rg.ExtraEnds, uint32(len(rg.Extra))) // #nosec G115 -- idem
		}
		out = append(out, rg)
	}
	// Rotation starts anywhere: answers are rebuilt on every change of
	// the service, and starting at 0 each time would favour the first
	// endpoints under churn.
	return dnswire.NewRing(qname, dns.TypeSRV, out, s.ringOptions(0, len(spec.ports), rand.Uint32()))
}

// tierGroups splits the indexes 0..n-1 by tier, each group in order; a
// tier without any is an empty group (left out of the ring: answers go
// on to the next tier).
func tierGroups(n int, tier func(int) Tier) [numTiers][]int {
	var g [numTiers][]int
	for i := range n {
		t := tier(i)
		g[t] = append(g[t], i)
	}
	return g
}

package answers

import "github.com/miekg/dns"

// Found is what a name holds for a query type, by the rules the plugin
// answers with (and kubectl mcs explain reports with).
type Found uint8

const (
	// NXDomain: the name does not exist.
	NXDomain Found = iota
	// NoData: the name exists, without records of the type.
	NoData
	// Records: the name has records of the type.
	Records
)

// ResolveService answers the name prefix (relative to the service's name,
// "" for the name itself) of the service key in forward zone index zone:
// the node holding the records when there are some of qtype.
func (ix *Index) ResolveService(key, prefix string, zone int, qtype uint16) (Found, *Set, *Node) {
	set := ix.Service(key)
	node := set.Lookup(zone, prefix)
	switch {
	case node == nil:
		return NXDomain, set, nil
	case !node.Has(qtype):
		return NoData, set, node
	}
	return Records, set, node
}

// ResolveNamespace answers a namespace's own name (<ns>.svc.<zone>): it
// exists while any service of the namespace has names.
func (ix *Index) ResolveNamespace(ns string) Found {
	if ix.HasNamespace(ns) {
		return NoData
	}
	return NXDomain
}

// ResolveReverse answers a name of a reverse zone: the PTR targets of an
// address for a PTR query; NoData for an address's name asked another
// type, or for a partial reverse name above some address's (an empty
// non-terminal); else NXDomain.
func (ix *Index) ResolveReverse(qname string, qtype uint16) (Found, []*Node) {
	if qtype == dns.TypePTR {
		if targets := ix.PTRTargets(qname); targets != nil {
			return Records, targets
		}
	} else if ix.HasPTR(qname) {
		return NoData, nil
	}
	if ix.IsReverseENT(qname) {
		return NoData, nil
	}
	return NXDomain, nil
}

// Tier returns the tier of the endpoint named owner, a per-endpoint
// name "<host>.<cluster ID>.<base>", under the set's shaping: the rule
// local-first answers are ordered by, for tools that explain them.
// Without shaping every endpoint is TierOther.
func (s *Set) Tier(owner, base string) Tier {
	if s == nil || s.shaping == nil {
		return TierOther
	}
	return s.tier(owner, base)
}

// IsLocal reports whether owner names an endpoint of this cluster (see
// Tier).
func (s *Set) IsLocal(owner, base string) bool { return s.Tier(owner, base) == TierLocal }

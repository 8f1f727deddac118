package answers

import (
	"net/netip"

	"github.com/miekg/dns"

	"github.com/mcs-dns/mcs-dns/internal/dnswire"
)

// The built answers of a service: a Set of owner names (Nodes), each
// holding what its records are made of.

// Node is one owner name of a service and what its records are made of.
// A Node without records is an empty non-terminal: the name exists
// (NOERROR, NODATA) because names exist below it.
//
// A Node keeps no dns.RR: the records are built from these few fields
// when asked for (Records), and the query path sends the node's reply
// packed once on first use (Packed). Keeping answers this way takes a
// fraction of the memory of record objects (a dns.SRV and its interface
// slot are ~100 bytes; here a 50-target SRV RRset is two shared slices).
type Node struct {
	// owner is the owner name of every record of the node.
	owner string
	// addrs are the node's addresses: the IPv4 ones (A records) first,
	// then the IPv6 ones (AAAA), each in answer order. Shared between
	// the zones of a set; never modified.
	addrs []netip.Addr
	v4    uint32 // len of the IPv4 prefix of addrs
	ttl   uint32
	// srv, when not nil, makes the node's SRV RRset.
	srv *srvSpec
	// packed are the node's replies in wire format, packed on first use
	// (see Packed).
	packed atomicPacked
}

// srvSpec is an SRV RRset: one record per target and port, in that order
// (priority 0, equal weights summing to about 100, as CoreDNS does), with
// the addresses of the targets as additional records. The targets slice
// is shared by every SRV RRset of a zone of a set (they all name the
// same targets), and so is the whole spec when they have the same ports.
type srvSpec struct {
	ports []uint16
	// targets are the nodes the records point at (their owner names),
	// in order; their addresses are the additional records.
	targets []*Node
}

// Owner is the owner name of the node's records (lower case, fully
// qualified, without escapes).
func (n *Node) Owner() string { return n.owner }

// Has reports whether n has records of qtype (answers.Records would
// return some), without building them.
func (n *Node) Has(qtype uint16) bool {
	switch qtype {
	case dns.TypeA:
		return n.v4 > 0
	case dns.TypeAAAA:
		return len(n.addrs) > int(n.v4)
	case dns.TypeSRV:
		return n.srv != nil
	}
	return false
}

// PTR maps one reverse name (e.g. 3.2.1.10.in-addr.arpa.) to a target.
type PTR struct {
	Reverse string
	Target  string
}

// Set is everything one service answers, immutable once built.
type Set struct {
	key       string
	namespace string
	// zones[z] holds the names below and at <svc>.<ns>.svc.<Zones[z]>.
	zones []zoneNames
	// The PTR targets of the set's addresses: the addresses are those of
	// the service name in Zones[0] (zones[0].top.addrs, each once), the
	// targets nodes in Zones[0] (see ptrTargets). No reverse names are
	// stored: the Index keys PTRs by address.
	ptrNodes []*Node
	ptrEnd   []uint32
	// endpoints is the number of ready endpoints answered.
	endpoints int32
	// skipped counts ready endpoints without a per-endpoint name (nor SRV
	// record or PTR) because it would not be a valid DNS name (too long);
	// the service's name answers with their addresses all the same.
	skipped int32
	typ     Type
	// localFirst: the headless answers list the closest endpoints first
	// (shape.go).
	localFirst bool
	// regional are the source clusters of the set's endpoints, other
	// than this one, whose slices carry this cluster's region (shape.go:
	// the region tier); nil without a region.
	regional []string
	// shaping is Config.Shaping for headless sets.
	shaping *Shaping
}

// zoneNames are the names of a set in one zone. Per-endpoint names, most
// of a headless service's names, are kept in a sorted array of their
// nodes and found by binary search on the owner names: no map or table
// entry per endpoint.
type zoneNames struct {
	// top is the node of the service name itself.
	top *Node
	// eps are the per-endpoint names' nodes, sorted by relative name
	// (their owner names are "<relative name>.<top.owner>").
	eps []Node
	// other are the remaining names, port names and empty non-terminals,
	// sorted by relative name.
	other []tableEntry
}

type tableEntry struct {
	rel string
	n   *Node
}

// Key is the Index key of the set's service.
func (s *Set) Key() string { return s.key }

// Namespace of the set's service.
func (s *Set) Namespace() string { return s.namespace }

// Type of the set's service.
func (s *Set) Type() Type { return s.typ }

// Endpoints is the number of ready endpoints the set answers with.
func (s *Set) Endpoints() int { return int(s.endpoints) }

// Skipped is the number of ready endpoints without a per-endpoint name
// because it would exceed DNS limits (the service's name still answers
// with their addresses).
func (s *Set) Skipped() int { return int(s.skipped) }

// ptrAddrs are the addresses the set has PTR records for, each once.
func (s *Set) ptrAddrs() []netip.Addr {
	if s == nil || len(s.zones) == 0 {
		return nil
	}
	return s.zones[0].top.addrs
}

// ptrTargets returns the nodes (in Zones[0]) whose owner names are the
// PTR targets of ptrAddrs()[j]: ptrNodes[ptrEnd[j-1]:ptrEnd[j]] when
// ptrEnd is set; the one node of ptrNodes for every address when it has
// one (a ClusterSetIP service: its name); else ptrNodes[j] (a headless
// service whose every address belongs to one endpoint name).
func (s *Set) ptrTargets(j int) []*Node {
	if s.ptrEnd != nil {
		start := uint32(0)
		if j > 0 {
			start = s.ptrEnd[j-1]
		}
		return s.ptrNodes[start:s.ptrEnd[j]]
	}
	if len(s.ptrNodes) == 1 {
		return s.ptrNodes
	}
	return s.ptrNodes[j : j+1]
}

// PTRs returns the reverse entries of the set, grouped by address (a
// fresh slice; for tests and diagnostics).
func (s *Set) PTRs() []PTR {
	var out []PTR
	for j, ip := range s.ptrAddrs() {
		rev := string(dnswire.AppendReverse(nil, ip))
		for _, n := range s.ptrTargets(j) {
			out = append(out, PTR{Reverse: rev, Target: n.owner})
		}
	}
	return out
}

// emptyNode is every empty non-terminal of a built Set; never modified.
var emptyNode = &Node{}

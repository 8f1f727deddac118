package answers

import (
	"maps"
	"math"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/mcs-dns/mcs-dns/internal/dnswire"
)

// Config is what Build needs besides the objects.
type Config struct {
	// Zones are the forward zones served, lower-case FQDNs. PTR targets
	// are names in Zones[0].
	Zones []string
	// TTL of every record.
	TTL uint32
}

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

// Records returns the answer and additional records of qtype at n, built
// for this call (the caller may keep and modify the slices). No answer
// records and n != nil means NODATA.
func (n *Node) Records(qtype uint16) (answer, extra []dns.RR) {
	switch qtype {
	case dns.TypeA:
		if n.v4 == 0 {
			return nil, nil
		}
		return addrRRs(nil, n.owner, n.addrs[:min(int(n.v4), maxRRs(minARR))], n.ttl), nil
	case dns.TypeAAAA:
		if len(n.addrs) == int(n.v4) {
			return nil, nil
		}
		v6 := n.addrs[n.v4:]
		return addrRRs(nil, n.owner, v6[:min(len(v6), maxRRs(minAAAARR))], n.ttl), nil
	case dns.TypeSRV:
		if n.srv == nil {
			return nil, nil
		}
		return n.srvRRs(), n.srvExtra()
	}
	return nil, nil
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

// Lookup returns the node of the name prefix (relative to the service
// name, "" for the service itself) in zone index zone, or nil.
func (s *Set) Lookup(zone int, prefix string) *Node {
	if s == nil || zone < 0 || zone >= len(s.zones) {
		return nil
	}
	z := &s.zones[zone]
	if prefix == "" {
		return z.top
	}
	if len(z.eps) > 0 {
		cut := len(z.top.owner) + 1 // "." and the service name
		lo, hi := 0, len(z.eps)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			o := z.eps[m].owner
			if o[:len(o)-cut] < prefix {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo < len(z.eps) {
			if o := z.eps[lo].owner; o[:len(o)-cut] == prefix {
				return &z.eps[lo]
			}
		}
	}
	return findEntry(z.other, prefix)
}

// findEntry returns the node of rel in the sorted entries, or nil.
func findEntry(entries []tableEntry, rel string) *Node {
	if len(entries) <= 8 {
		for i := range entries {
			if entries[i].rel == rel {
				return entries[i].n
			}
		}
		return nil
	}
	i, ok := slices.BinarySearchFunc(entries, rel, func(e tableEntry, rel string) int { return strings.Compare(e.rel, rel) })
	if !ok {
		return nil
	}
	return entries[i].n
}

// Names returns the relative names of zone index zone, sorted (for tests).
func (s *Set) Names(zone int) []string {
	z := &s.zones[zone]
	out := []string{""}
	cut := len(z.top.owner) + 1
	for i := range z.eps {
		o := z.eps[i].owner
		out = append(out, o[:len(o)-cut])
	}
	for _, e := range z.other {
		out = append(out, e.rel)
	}
	slices.Sort(out)
	return out
}

// emptyNode is every empty non-terminal of a built Set; never modified.
var emptyNode = &Node{}

// Build computes the answers of one service from its import and the
// EndpointSlices labelled with its name. It returns nil when the service
// has no names at all: a headless import without ready endpoints (or with
// endpointSliceObjects Absent). A ClusterSetIP import without IPs (no VIP
// allocated, or not opted into one) still has its service name, with no
// records: NODATA, as the VIP models in mcs-importer expect.
// slices may come in any order; the answers do not depend on it.
func Build(svc *Service, slicesIn []*Slice, cfg Config) *Set {
	if svc == nil || len(cfg.Zones) == 0 {
		return nil
	}
	switch svc.Type {
	case ClusterSetIP:
		return buildClusterSetIP(svc, cfg)
	case Headless:
		if svc.EndpointsAbsent {
			return nil
		}
		return buildHeadless(svc, slicesIn, cfg)
	}
	return nil
}

func newSet(svc *Service, cfg Config) *Set {
	return &Set{key: svc.Key(), namespace: svc.Namespace, typ: svc.Type, zones: make([]zoneNames, len(cfg.Zones))}
}

// fqdn joins a relative name and a zone.
func fqdn(rel, zone string) string {
	if zone == "." {
		return rel + "."
	}
	return rel + "." + zone
}

// shareKey makes the set's key and namespace substrings of base, the
// service's name in a zone ("<svc>.<ns>.svc.<zone>"), which the set
// keeps anyway.
func (s *Set) shareKey(svc *Service, base string) {
	if n := len(svc.Name) + 1 + len(svc.Namespace); len(base) > n && base[:n] == s.key {
		s.key = base[:n]
		s.namespace = base[len(svc.Name)+1 : n]
	}
}

// addENTs adds to m every name between rel (exclusive) and the service
// name that is not a name of its own (in own): for "web-0.a.b", "a.b" and
// "b".
func addENTs(m map[string]struct{}, rel string, own map[string]int) {
	for i := strings.IndexByte(rel, '.'); i >= 0; i = strings.IndexByte(rel, '.') {
		rel = rel[i+1:]
		if _, ok := own[rel]; !ok {
			m[rel] = struct{}{}
		}
	}
}

// setPorts makes ports[i] the SRV node of groups[i] below the service
// name base and returns entries with their names and the protocols' empty
// non-terminals ("_tcp") added, sorted. Every RRset names bareSpec's
// targets; bareSpec itself (the service name's SRV RRset) is shared with
// a lone group, whose ports are the same. first, when not "", is the
// owner name of groups[0], built already with base as its suffix.
func setPorts(entries []tableEntry, ports []Node, groups []portGroup, base, first string, bareSpec *srvSpec, ttl uint32) []tableEntry {
	for i, g := range groups {
		owner := first
		if i > 0 || owner == "" {
			owner = g.rel + "." + base
		}
		spec := bareSpec
		if len(groups) > 1 {
			spec = &srvSpec{ports: g.ports, targets: bareSpec.targets}
		}
		ports[i].setSRV(owner, spec, ttl)
		entries = append(entries, tableEntry{g.rel, &ports[i]})
		if !slices.ContainsFunc(entries, func(e tableEntry) bool { return e.rel == g.proto }) {
			entries = append(entries, tableEntry{g.proto, emptyNode})
		}
	}
	slices.SortFunc(entries, func(a, b tableEntry) int { return strings.Compare(a.rel, b.rel) })
	return slices.Clip(entries)
}

// aRR and aaaaRR hold an address record and its address octets in one
// allocation.
type aRR struct {
	dns.A
	ip [4]byte
}

type aaaaRR struct {
	dns.AAAA
	ip [16]byte
}

// addrRRs appends the address records of ips (all of one family) to out,
// in two allocations.
func addrRRs(out []dns.RR, owner string, ips []netip.Addr, ttl uint32) []dns.RR {
	if len(ips) == 0 {
		return out
	}
	out = slices.Grow(out, len(ips))
	if ips[0].Is4() {
		recs := make([]aRR, len(ips))
		for i, ip := range ips {
			r := &recs[i]
			r.ip = ip.As4()
			r.A = dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: r.ip[:]}
			out = append(out, &r.A)
		}
		return out
	}
	recs := make([]aaaaRR, len(ips))
	for i, ip := range ips {
		r := &recs[i]
		r.ip = ip.As16()
		r.AAAA = dns.AAAA{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: r.ip[:]}
		out = append(out, &r.AAAA)
	}
	return out
}

// setAddrs sets the node's owner and addresses; ips must be partitioned
// (see partition) and are kept as is.
func (n *Node) setAddrs(owner string, ips []netip.Addr, v4 int, ttl uint32) {
	n.owner, n.addrs, n.v4, n.ttl = owner, ips, uint32(v4), ttl // #nosec G115 -- at most the endpoints of a service
}

// partition returns ips with the IPv4 addresses first, then the IPv6
// ones, each in the given order, and the number of IPv4 addresses: ips
// itself when it is so ordered already, else a copy of exactly the
// needed size.
func partition(ips []netip.Addr) ([]netip.Addr, int) {
	v4 := 0
	for v4 < len(ips) && ips[v4].Is4() {
		v4++
	}
	ordered := true
	for _, ip := range ips[v4:] {
		ordered = ordered && !ip.Is4()
	}
	if ordered {
		return slices.Clip(ips), v4
	}
	out := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		if ip.Is4() {
			out = append(out, ip)
		}
	}
	v4 = len(out)
	for _, ip := range ips {
		if !ip.Is4() {
			out = append(out, ip)
		}
	}
	return out, v4
}

// setSRV makes n the owner of an SRV RRset.
func (n *Node) setSRV(owner string, spec *srvSpec, ttl uint32) {
	if len(spec.targets) == 0 || len(spec.ports) == 0 {
		return
	}
	n.owner, n.srv, n.ttl = owner, spec, ttl
}

// Wire sizes of the smallest record of each type in a reply (owner name
// compressed to a pointer; an SRV target at least the root): a message of
// at most dns.MaxMsgSize octets holds no more than dns.MaxMsgSize divided
// by these, so Records builds no more (a bare-name SRV of a large headless
// service with many ports would otherwise build endpoints x ports records
// per query, almost all of them thrown away by the fitting).
const (
	minARR    = 2 + 10 + 4
	minAAAARR = 2 + 10 + 16
	minSRVRR  = 2 + 10 + 6 + 1
)

func maxRRs(minLen int) int { return dns.MaxMsgSize / minLen }

func (n *Node) srvRRs() []dns.RR {
	spec := n.srv
	all := len(spec.targets) * len(spec.ports)
	weight := uint16(100 / all) // #nosec G115 -- at most 100
	if weight == 0 {
		weight = 1
	}
	count := min(all, maxRRs(minSRVRR))
	recs := make([]dns.SRV, 0, count)
	out := make([]dns.RR, count)
	hdr := dns.RR_Header{Name: n.owner, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: n.ttl}
	for _, t := range spec.targets {
		for _, p := range spec.ports {
			if len(recs) == count {
				return out
			}
			recs = append(recs, dns.SRV{Hdr: hdr, Priority: 0, Weight: weight, Port: p, Target: t.owner})
			out[len(recs)-1] = &recs[len(recs)-1]
		}
	}
	return out
}

func (n *Node) srvExtra() []dns.RR {
	count := 0
	for _, t := range n.srv.targets {
		count += len(t.addrs)
	}
	if count == 0 {
		return nil
	}
	limit := maxRRs(minARR)
	out := make([]dns.RR, 0, min(count, limit))
	for _, t := range n.srv.targets {
		v4, v6 := t.addrs[:t.v4], t.addrs[t.v4:]
		v4 = v4[:min(len(v4), limit-len(out))]
		out = addrRRs(out, t.owner, v4, t.ttl)
		v6 = v6[:min(len(v6), limit-len(out))]
		out = addrRRs(out, t.owner, v6, t.ttl)
		if len(out) == limit {
			break
		}
	}
	return out
}

// namedPorts groups the named ports by SRV name "_<name>._<proto>", in a
// stable order, without duplicate port numbers per name.
type portGroup struct {
	rel   string // "_http._tcp"
	proto string // "_tcp"
	ports []uint16
}

func namedPorts(ports []Port) []portGroup {
	var groups []portGroup
	for _, p := range ports {
		if p.Name == "" || p.Protocol == "" {
			continue
		}
		rel := "_" + p.Name + "._" + p.Protocol
		i := slices.IndexFunc(groups, func(g portGroup) bool { return g.rel == rel })
		if i < 0 {
			groups = append(groups, portGroup{rel: rel, proto: rel[len(p.Name)+2:]})
			i = len(groups) - 1
		}
		if !slices.Contains(groups[i].ports, p.Port) {
			groups[i].ports = append(groups[i].ports, p.Port)
		}
	}
	return groups
}

// srvNamesFit keeps the groups whose SRV owner name
// "_<port>._<proto>.<svcRel>.<zone>" is a valid DNS name in every zone: its
// label "_<port>" at most 63 octets (a port name may have 63 characters, a
// DNS label as Service port names are, and the underscore makes 64), the
// whole name at most RFC 1035's 255 octets (a long port name with a long
// service, namespace and zone can exceed it). Such a port keeps its place
// in the bare-name SRV answer (its number needs no name); only its own SRV
// name is left out.
func srvNamesFit(groups []portGroup, svcRel string, zones []string) []portGroup {
	longest := 0
	for _, z := range zones {
		if z != "." {
			longest = max(longest, len(z))
		}
	}
	return slices.DeleteFunc(groups, func(g portGroup) bool {
		label := len(g.rel) - len(g.proto) - 1 // "_<port>"
		// Presentation with the trailing dot, plus one: the wire length.
		return label > 63 || len(g.rel)+1+len(svcRel)+1+longest+1 > 255
	})
}

// distinctPorts returns the distinct port numbers of the named ports: a
// bare-name SRV answers one record per distinct (target, port). With one
// group, that group's own slice.
func distinctPorts(groups []portGroup) []uint16 {
	if len(groups) == 1 {
		return groups[0].ports
	}
	var out []uint16
	for _, g := range groups {
		for _, p := range g.ports {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// dedupAddrs returns ips without repeats, in order of first appearance:
// ips itself when it has none. Short lists are compared pairwise (no
// allocation); long ones through a set, so that a service with many
// thousands of endpoints costs linear time, not quadratic.
func dedupAddrs(ips []netip.Addr) []netip.Addr {
	if len(ips) <= dedupPairwise {
		dup := false
		for i := 1; i < len(ips) && !dup; i++ {
			dup = slices.Contains(ips[:i], ips[i])
		}
		if !dup {
			return ips
		}
		out := make([]netip.Addr, 0, len(ips))
		for _, ip := range ips {
			if !slices.Contains(out, ip) {
				out = append(out, ip)
			}
		}
		return out
	}
	seen := make(map[netip.Addr]struct{}, len(ips))
	var out []netip.Addr // nil until the first repeat
	for i, ip := range ips {
		if _, dup := seen[ip]; dup {
			if out == nil {
				out = make([]netip.Addr, i, len(ips))
				copy(out, ips[:i])
			}
			continue
		}
		seen[ip] = struct{}{}
		if out != nil {
			out = append(out, ip)
		}
	}
	if out == nil {
		return ips
	}
	return out
}

// dedupPairwise is the longest list dedupAddrs compares pairwise.
const dedupPairwise = 128

func buildClusterSetIP(svc *Service, cfg Config) *Set {
	ips := dedupAddrs(svc.IPs)
	s := newSet(svc, cfg)
	if len(ips) == 0 {
		// The service exists but has no VIP: its name answers NODATA; no
		// SRV names, since their target would not resolve.
		for z := range s.zones {
			s.zones[z].top = emptyNode
		}
		return s
	}
	groups := namedPorts(svc.Ports)
	bare := distinctPorts(groups)
	svcRel := svc.Name + "." + svc.Namespace + ".svc"
	groups = srvNamesFit(groups, svcRel, cfg.Zones)
	addrs, v4 := partition(ips)
	// One allocation for the nodes of every zone: the service, then one
	// per port group.
	per := 1 + len(groups)
	nodes := make([]Node, len(cfg.Zones)*per)
	for z, zone := range cfg.Zones {
		seg := nodes[z*per : (z+1)*per]
		top := &seg[0]
		var base, first string
		if len(groups) == 0 {
			base = fqdn(svcRel, zone)
		} else {
			// The service name is a suffix of the first SRV name: one
			// string for both.
			first = fqdn(groups[0].rel+"."+svcRel, zone)
			base = first[len(groups[0].rel)+1:]
		}
		if z == 0 {
			s.shareKey(svc, base)
		}
		bareSpec := &srvSpec{ports: bare, targets: []*Node{top}}
		other := setPorts(make([]tableEntry, 0, 2*len(groups)), seg[1:], groups, base, first, bareSpec, cfg.TTL)
		top.setAddrs(base, addrs, v4, cfg.TTL)
		top.setSRV(base, bareSpec, cfg.TTL)
		s.zones[z] = zoneNames{top: top, other: other}
	}
	s.ptrNodes = []*Node{s.zones[0].top}
	return s
}

// DashedIP is the hostname an endpoint without one gets: its address with
// dots or colons replaced by dashes ("10-1-2-3", "fd00--1"), as CoreDNS's
// kubernetes plugin does.
func DashedIP(ip netip.Addr) string {
	if ip.Is4() {
		return strings.ReplaceAll(ip.String(), ".", "-")
	}
	h := strings.ReplaceAll(ip.String(), ":", "-")
	if strings.HasSuffix(h, "-") {
		h += "0"
	}
	return h
}

// endpointName is one per-endpoint name and its addresses.
type endpointName struct {
	rel   string // "<hostname>.<clusterid>"
	addrs []netip.Addr
}

func buildHeadless(svc *Service, in []*Slice, cfg Config) *Set {
	sorted := slices.Clone(in)
	slices.SortFunc(sorted, func(a, b *Slice) int {
		if c := strings.Compare(a.ClusterID, b.ClusterID); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	svcRel := svc.Name + "." + svc.Namespace + ".svc"
	// The longest zone bounds the name length.
	longest := ""
	for _, z := range cfg.Zones {
		if len(z) > len(longest) {
			longest = z
		}
	}
	nSlots := 0
	for _, sl := range sorted {
		nSlots += len(sl.Endpoints)
	}
	var (
		names   = make([]endpointName, 0, nSlots)
		byRel   = make(map[string]int, nSlots)
		all     = make([]netip.Addr, 0, nSlots)
		nEps    int
		skipped int
	)
	for _, sl := range sorted {
		for _, ep := range sl.Endpoints {
			if !ep.Ready || len(ep.Addresses) == 0 {
				continue
			}
			host := ep.Hostname
			if host == "" {
				host = DashedIP(ep.Addresses[0])
			}
			rel := host + "." + sl.ClusterID
			if !validName(host, rel, svcRel, longest) {
				// No per-endpoint name (nor SRV record or PTR, which
				// would name it), but the endpoint is ready: the
				// service's own name still answers with its addresses.
				skipped++
				all = append(all, ep.Addresses...)
				continue
			}
			nEps++
			i, ok := byRel[rel]
			if !ok && len(ep.Addresses) == 1 {
				// The common case shares the slice's own address
				// (clipped: a later append copies).
				byRel[rel] = len(names)
				names = append(names, endpointName{rel: rel, addrs: slices.Clip(ep.Addresses)})
				all = append(all, ep.Addresses[0])
				continue
			}
			if !ok {
				i = len(names)
				byRel[rel] = i
				names = append(names, endpointName{rel: rel})
			}
			// Repeats are dropped below, once per name.
			names[i].addrs = append(names[i].addrs, ep.Addresses...)
			all = append(all, ep.Addresses...)
		}
	}
	if len(all) == 0 {
		return nil
	}
	for i := range names {
		names[i].addrs = dedupAddrs(names[i].addrs)
	}
	s := newSet(svc, cfg)
	s.skipped = int32(min(skipped, math.MaxInt32))        // #nosec G115 -- clamped
	s.endpoints = int32(min(nEps+skipped, math.MaxInt32)) // #nosec G115 -- clamped
	if len(all) < cap(all) {
		all = slices.Clone(all) // no unused capacity kept
	}
	all = dedupAddrs(all)
	groups := namedPorts(svc.Ports)
	bare := distinctPorts(groups)
	groups = srvNamesFit(groups, svcRel, cfg.Zones)
	allAddrs, allV4 := partition(all)
	// The per-endpoint nodes are kept sorted by relative name (Lookup
	// searches them); the SRV records and PTR targets keep the order of
	// names. pos[i] is where names[i] goes.
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(names[a].rel, names[b].rel) })
	pos := make([]int, len(names))
	for k, i := range order {
		pos[i] = k
	}
	epAddrs := make([][]netip.Addr, len(names))
	epV4 := make([]int, len(names))
	for i, en := range names {
		epAddrs[i], epV4[i] = partition(en.addrs)
	}
	// The empty non-terminals, the same in every zone.
	entSet := make(map[string]struct{})
	for _, en := range names {
		addENTs(entSet, en.rel, byRel)
	}
	ents := slices.Collect(maps.Keys(entSet))
	// One allocation for the nodes of every zone: the service, one per
	// endpoint name, one per port group.
	per := 1 + len(names) + len(groups)
	nodes := make([]Node, len(cfg.Zones)*per)
	for z, zone := range cfg.Zones {
		seg := nodes[z*per : (z+1)*per]
		top, eps, ports := &seg[0], seg[1:1+len(names)], seg[1+len(names):]
		base := fqdn(svcRel, zone)
		if z == 0 {
			s.shareKey(svc, base)
		}
		owners := joinOwners(names, base)
		targets := make([]*Node, len(names))
		for i := range names {
			n := &eps[pos[i]]
			n.setAddrs(owners[i], epAddrs[i], epV4[i], cfg.TTL)
			targets[i] = n
		}
		bareSpec := &srvSpec{ports: bare, targets: targets}
		other := make([]tableEntry, 0, len(ents)+2*len(groups))
		for _, rel := range ents {
			other = append(other, tableEntry{rel, emptyNode})
		}
		other = setPorts(other, ports, groups, base, "", bareSpec, cfg.TTL)
		top.setAddrs(base, allAddrs, allV4, cfg.TTL)
		top.setSRV(base, bareSpec, cfg.TTL)
		s.zones[z] = zoneNames{top: top, eps: eps, other: other}
		if z == 0 {
			s.ptrNodes, s.ptrEnd = headlessPTRs(allAddrs, epAddrs, targets)
		}
	}
	return s
}

// headlessPTRs returns the PTR targets of a headless set (see
// Set.ptrTargets): for each of addrs, the nodes among targets whose
// addresses (epAddrs, at the same index) include it, in order; none for
// an address only endpoints without a name have.
func headlessPTRs(addrs []netip.Addr, epAddrs [][]netip.Addr, targets []*Node) ([]*Node, []uint32) {
	at := make(map[netip.Addr]int, len(addrs))
	for j, ip := range addrs {
		at[ip] = j
	}
	count := make([]uint32, len(addrs))
	pairs := 0
	for _, ips := range epAddrs {
		for _, ip := range ips {
			count[at[ip]]++
			pairs++
		}
	}
	nodes := make([]*Node, pairs)
	if pairs == len(addrs) && !slices.Contains(count, 0) {
		// Every address has one target: nodes[j] is it.
		for i, ips := range epAddrs {
			for _, ip := range ips {
				nodes[at[ip]] = targets[i]
			}
		}
		return nodes, nil
	}
	end := make([]uint32, len(addrs))
	var sum uint32
	for j, c := range count {
		sum += c
		end[j] = sum
	}
	fill := make([]uint32, len(addrs)) // next free slot of each address
	for j := range fill {
		fill[j] = end[j] - count[j]
	}
	for i, ips := range epAddrs {
		for _, ip := range ips {
			j := at[ip]
			nodes[fill[j]] = targets[i]
			fill[j]++
		}
	}
	return nodes, end
}

// validName reports whether the per-endpoint name rel ("<host>.<cluster
// ID>") makes valid DNS names below svcRel in zone: host at most 63
// octets, the whole name at most 255 octets in wire format (RFC 1035; 254
// characters written as an FQDN; dns.IsDomainName allows a little more).
// Names made of lower-case letters, digits, '-' and '.' (all that the
// transforms let through) are checked by length alone; anything else by
// dns.IsDomainName as well.
func validName(host, rel, svcRel, zone string) bool {
	if len(host) == 0 || len(host) > 63 {
		return false
	}
	plain := true
	for i := 0; i < len(rel) && plain; i++ {
		c := rel[i]
		plain = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' && i > 0 && rel[i-1] != '.'
	}
	if !plain || rel[len(rel)-1] == '.' {
		name := fqdn(rel+"."+svcRel, zone)
		_, ok := dns.IsDomainName(name)
		return ok && len(name) <= 254 // escapes only make it longer than its wire form
	}
	n := len(rel) + 1 + len(svcRel) + 1 + len(zone) // presentation, with the trailing dot
	if zone == "." {
		n = len(rel) + 1 + len(svcRel) + 1
	}
	return n+1 <= 255 // wire: one more octet than the FQDN's presentation
}

// joinOwners returns the owner names "<rel>.<base>" of names, substrings
// of one string (one allocation for a whole service).
func joinOwners(names []endpointName, base string) []string {
	n := 0
	for _, en := range names {
		n += len(en.rel) + 1 + len(base)
	}
	var b strings.Builder
	b.Grow(n)
	for _, en := range names {
		b.WriteString(en.rel)
		b.WriteByte('.')
		b.WriteString(base)
	}
	all := b.String()
	out := make([]string, len(names))
	off := 0
	for i, en := range names {
		l := len(en.rel) + 1 + len(base)
		out[i] = all[off : off+l]
		off += l
	}
	return out
}

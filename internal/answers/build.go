package answers

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// Config is what Build needs besides the objects.
type Config struct {
	// Zones are the forward zones served, lower-case FQDNs. PTR targets
	// are names in Zones[0].
	Zones []string
	// TTL of every record.
	TTL uint32
}

// Node is one owner name of a service and its records, precomputed. A
// Node without records is an empty non-terminal: the name exists (NOERROR,
// NODATA) because names exist below it.
type Node struct {
	A, AAAA []dns.RR
	// SRVSet is behind a pointer, since few nodes have SRV records (the
	// per-endpoint nodes, most of them, never do); nodes without any
	// share one empty SRVSet, so that n.SRV and n.Extra read as nil.
	*SRVSet
	// packed are the node's replies in wire format, packed on first use
	// (see Packed).
	packed atomicPacked
}

// SRVSet is the SRV RRset of a node.
type SRVSet struct {
	SRV []dns.RR
	// Extra holds the A/AAAA records of the SRV targets, for the
	// additional section of SRV answers.
	Extra []dns.RR
}

// noSRV is the SRVSet of nodes without SRV records; never modified.
var noSRV = &SRVSet{}

// Records returns the answer and additional records of qtype at n. No
// answer records and n != nil means NODATA.
func (n *Node) Records(qtype uint16) (answer, extra []dns.RR) {
	switch qtype {
	case dns.TypeA:
		return n.A, nil
	case dns.TypeAAAA:
		return n.AAAA, nil
	case dns.TypeSRV:
		if n.SRVSet == nil {
			return nil, nil
		}
		return n.SRV, n.Extra
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
	typ       Type
	// names[z] maps a name relative to <svc>.<ns>.svc.<Zones[z]> ("" is
	// the service name itself) to its node.
	names []table
	// revs are the distinct reverse names of the set's addresses and
	// owners, at the same index, the PTR targets of each (names in
	// Zones[0], the same strings as the forward records' owner names).
	// The Index publishes owners[i:i+1] as is, so a reverse name owned by
	// one service costs no allocation beyond the map entry.
	revs   []string
	owners []ptrOwner
	// endpoints is the number of ready endpoints answered.
	endpoints int
	// skipped counts endpoints left out because their names would not
	// be valid DNS names (too long).
	skipped int
}

// Key is the Index key of the set's service.
func (s *Set) Key() string { return s.key }

// Namespace of the set's service.
func (s *Set) Namespace() string { return s.namespace }

// Type of the set's service.
func (s *Set) Type() Type { return s.typ }

// Endpoints is the number of ready endpoints the set answers with.
func (s *Set) Endpoints() int { return s.endpoints }

// Skipped is the number of ready endpoints left out because a name built
// from them would exceed DNS limits.
func (s *Set) Skipped() int { return s.skipped }

// ptrOwner is one service's PTR targets of one reverse name.
type ptrOwner struct {
	key     string // the service's Index key
	targets []string
}

// PTRs returns the reverse entries of the set, grouped by reverse name
// (a fresh slice; for tests and diagnostics).
func (s *Set) PTRs() []PTR {
	var out []PTR
	for i, rev := range s.revs {
		for _, t := range s.owners[i].targets {
			out = append(out, PTR{Reverse: rev, Target: t})
		}
	}
	return out
}

// setPTRs stores pairs grouped by reverse name, in order of first
// appearance, without duplicate targets, in two allocations (plus the
// owners and names slices).
func (s *Set) setPTRs(pairs []PTR) {
	if len(pairs) == 0 {
		return
	}
	first := make(map[string]int, len(pairs)) // reverse -> group
	var count []int
	for _, p := range pairs {
		g, ok := first[p.Reverse]
		if !ok {
			g = len(count)
			first[p.Reverse] = g
			count = append(count, 0)
		}
		count[g]++
	}
	s.revs = make([]string, len(count))
	for _, p := range pairs {
		s.revs[first[p.Reverse]] = p.Reverse
	}
	targets := make([]string, len(pairs))
	s.owners = make([]ptrOwner, len(s.revs))
	off := 0
	for g := range s.owners {
		s.owners[g] = ptrOwner{key: s.key, targets: targets[off : off : off+count[g]]}
		off += count[g]
	}
	for _, p := range pairs {
		o := &s.owners[first[p.Reverse]]
		if !slices.Contains(o.targets, p.Target) {
			o.targets = append(o.targets, p.Target)
		}
	}
	for g := range s.owners {
		s.owners[g].targets = slices.Clip(s.owners[g].targets)
	}
}

// Lookup returns the node of the name prefix (relative to the service
// name, "" for the service itself) in zone index zone, or nil.
func (s *Set) Lookup(zone int, prefix string) *Node {
	if s == nil || zone < 0 || zone >= len(s.names) {
		return nil
	}
	return s.names[zone].get(prefix)
}

// Names returns the relative names of zone index zone, sorted (for tests).
func (s *Set) Names(zone int) []string {
	t := &s.names[zone]
	out := make([]string, 0, len(t.m)+len(t.small))
	for k := range t.m {
		out = append(out, k)
	}
	for _, e := range t.small {
		out = append(out, e.rel)
	}
	slices.Sort(out)
	return out
}

// table maps relative names to nodes: a map while building; once built,
// a small table becomes a slice (a scan of a few names is as fast as a
// map look-up, at a fraction of the size).
type table struct {
	m     map[string]*Node
	small []tableEntry
}

type tableEntry struct {
	rel string
	n   *Node
}

// maxSmall is the most names a table keeps in a slice.
const maxSmall = 8

func (t *table) get(rel string) *Node {
	if t.m != nil {
		return t.m[rel]
	}
	for i := range t.small {
		if t.small[i].rel == rel {
			return t.small[i].n
		}
	}
	return nil
}

// emptyNode is every empty non-terminal of a built Set; never modified.
var emptyNode = &Node{SRVSet: noSRV}

// freeze ends building: empty nodes become the shared emptyNode and small
// tables slices.
func (s *Set) freeze() {
	for z := range s.names {
		t := &s.names[z]
		for rel, n := range t.m {
			if len(n.A) == 0 && len(n.AAAA) == 0 && n.SRVSet == noSRV {
				t.m[rel] = emptyNode
			}
		}
		if len(t.m) > maxSmall {
			continue
		}
		t.small = make([]tableEntry, 0, len(t.m))
		for rel, n := range t.m {
			t.small = append(t.small, tableEntry{rel, n})
		}
		t.m = nil
	}
}

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
	var s *Set
	switch svc.Type {
	case ClusterSetIP:
		s = buildClusterSetIP(svc, cfg)
	case Headless:
		if svc.EndpointsAbsent {
			return nil
		}
		s = buildHeadless(svc, slicesIn, cfg)
	}
	if s == nil {
		return nil
	}
	s.freeze()
	return s
}

func newSet(svc *Service, cfg Config) *Set {
	s := &Set{key: svc.Key(), namespace: svc.Namespace, typ: svc.Type, names: make([]table, len(cfg.Zones))}
	for i := range s.names {
		s.names[i].m = map[string]*Node{}
	}
	return s
}

// fqdn joins a relative name and a zone.
func fqdn(rel, zone string) string {
	if zone == "." {
		return rel + "."
	}
	return rel + "." + zone
}

func (s *Set) node(zone int, rel string) *Node {
	n := s.names[zone].m[rel]
	if n == nil {
		n = &Node{SRVSet: noSRV}
		s.names[zone].m[rel] = n
	}
	return n
}

// ents makes every name between rel (exclusive) and the service name
// exist: for "web-0.a.b" it adds "a.b" and "b".
func (s *Set) ents(zone int, rel string) {
	for i := strings.IndexByte(rel, '.'); i >= 0; i = strings.IndexByte(rel, '.') {
		rel = rel[i+1:]
		s.node(zone, rel)
	}
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

func addrRR(owner string, ip netip.Addr, ttl uint32) dns.RR {
	if ip.Is4() {
		r := &aRR{ip: ip.As4()}
		r.A = dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: r.ip[:]}
		return &r.A
	}
	r := &aaaaRR{ip: ip.As16()}
	r.AAAA = dns.AAAA{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: r.ip[:]}
	return &r.AAAA
}

// addAddrs adds the address records of ips (in order) at n, in slices of
// exactly the needed size.
func (n *Node) addAddrs(owner string, ips []netip.Addr, ttl uint32) {
	var v4 int
	for _, ip := range ips {
		if ip.Is4() {
			v4++
		}
	}
	if v4 > 0 {
		n.A = slices.Grow(n.A, v4)
	}
	if len(ips)-v4 > 0 {
		n.AAAA = slices.Grow(n.AAAA, len(ips)-v4)
	}
	for _, ip := range ips {
		rr := addrRR(owner, ip, ttl)
		if ip.Is4() {
			n.A = append(n.A, rr)
		} else {
			n.AAAA = append(n.AAAA, rr)
		}
	}
}

// srvTarget is one SRV record to be: a target and its port.
type srvTarget struct {
	target string
	port   uint16
}

// srvExtras returns the address records of targets' nodes, in order, for
// the additional section of SRV answers: the very records of the nodes,
// in one slice that every SRV RRset of a zone shares (they all name every
// target).
func srvExtras(targets []*Node) []dns.RR {
	n := 0
	for _, t := range targets {
		n += len(t.A) + len(t.AAAA)
	}
	extra := make([]dns.RR, 0, n)
	for _, t := range targets {
		extra = append(extra, t.A...)
		extra = append(extra, t.AAAA...)
	}
	return extra
}

// setSRV stores one SRV RRset at n: priority 0, equal weights summing to
// about 100 (as CoreDNS does), and extra (the addresses of every target)
// as extras. The records are allocated together.
func (n *Node) setSRV(owner string, targets []srvTarget, extra []dns.RR, ttl uint32) {
	if len(targets) == 0 {
		return
	}
	weight := uint16(100 / len(targets))
	if weight == 0 {
		weight = 1
	}
	recs := make([]dns.SRV, len(targets))
	set := &SRVSet{SRV: make([]dns.RR, len(targets))}
	for i, t := range targets {
		recs[i] = dns.SRV{
			Hdr:      dns.RR_Header{Name: owner, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: ttl},
			Priority: 0, Weight: weight, Port: t.port, Target: t.target,
		}
		set.SRV[i] = &recs[i]
	}
	if len(extra) > 0 {
		set.Extra = extra
	}
	n.SRVSet = set
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

// distinctPorts returns the distinct port numbers of the named ports: a
// bare-name SRV answers one record per distinct (target, port).
func distinctPorts(groups []portGroup) []uint16 {
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

func dedupAddrs(ips []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		if !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}
	return out
}

func buildClusterSetIP(svc *Service, cfg Config) *Set {
	ips := dedupAddrs(svc.IPs)
	s := newSet(svc, cfg)
	if len(ips) == 0 {
		// The service exists but has no VIP: its name answers NODATA; no
		// SRV names, since their target would not resolve.
		for z := range cfg.Zones {
			s.node(z, "")
		}
		return s
	}
	groups := namedPorts(svc.Ports)
	bare := distinctPorts(groups)
	svcRel := svc.Name + "." + svc.Namespace + ".svc"
	var ptrs []PTR
	for z, zone := range cfg.Zones {
		base := fqdn(svcRel, zone)
		top := s.node(z, "")
		top.addAddrs(base, ips, cfg.TTL)
		var extra []dns.RR
		if len(bare) > 0 {
			extra = srvExtras([]*Node{top})
		}
		for _, g := range groups {
			targets := make([]srvTarget, len(g.ports))
			for i, p := range g.ports {
				targets[i] = srvTarget{target: base, port: p}
			}
			s.node(z, g.rel).setSRV(g.rel+"."+base, targets, extra, cfg.TTL)
			s.node(z, g.proto)
		}
		targets := make([]srvTarget, len(bare))
		for i, p := range bare {
			targets[i] = srvTarget{target: base, port: p}
		}
		top.setSRV(base, targets, extra, cfg.TTL)
		if z == 0 {
			for _, ip := range ips {
				if rev, err := dns.ReverseAddr(ip.String()); err == nil {
					ptrs = append(ptrs, PTR{Reverse: rev, Target: base})
				}
			}
		}
	}
	s.setPTRs(ptrs)
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
	s := newSet(svc, cfg)
	var (
		names   []endpointName
		byRel   = map[string]int{}
		all     []netip.Addr
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
			if _, ok := dns.IsDomainName(fqdn(rel+"."+svcRel, longest)); !ok || len(host) > 63 {
				skipped++
				continue
			}
			nEps++
			i, ok := byRel[rel]
			if !ok {
				i = len(names)
				byRel[rel] = i
				names = append(names, endpointName{rel: rel})
			}
			for _, ip := range ep.Addresses {
				if !slices.Contains(names[i].addrs, ip) {
					names[i].addrs = append(names[i].addrs, ip)
				}
				all = append(all, ip)
			}
		}
	}
	s.skipped = skipped
	if nEps == 0 {
		return nil
	}
	s.endpoints = nEps
	all = dedupAddrs(all)
	groups := namedPorts(svc.Ports)
	bare := distinctPorts(groups)
	var ptrs []PTR
	for z, zone := range cfg.Zones {
		base := fqdn(svcRel, zone)
		top := s.node(z, "")
		top.addAddrs(base, all, cfg.TTL)
		epNodes := make([]*Node, len(names))
		owners := make([]string, len(names))
		for i, en := range names {
			owner := en.rel + "." + base
			// The relative name as a prefix of owner: one string for
			// both (and for the SRV and PTR targets).
			rel := owner[:len(en.rel)]
			n := s.node(z, rel)
			n.addAddrs(owner, en.addrs, cfg.TTL)
			s.ents(z, rel)
			epNodes[i], owners[i] = n, owner
			if z == 0 {
				for _, ip := range en.addrs {
					if rev, err := dns.ReverseAddr(ip.String()); err == nil {
						ptrs = append(ptrs, PTR{Reverse: rev, Target: owner})
					}
				}
			}
		}
		var extra []dns.RR
		if len(bare) > 0 {
			extra = srvExtras(epNodes)
		}
		for _, g := range groups {
			targets := make([]srvTarget, 0, len(names)*len(g.ports))
			for i := range names {
				for _, p := range g.ports {
					targets = append(targets, srvTarget{target: owners[i], port: p})
				}
			}
			s.node(z, g.rel).setSRV(g.rel+"."+base, targets, extra, cfg.TTL)
			s.node(z, g.proto)
		}
		targets := make([]srvTarget, 0, len(names)*len(bare))
		for i := range names {
			for _, p := range bare {
				targets = append(targets, srvTarget{target: owners[i], port: p})
			}
		}
		top.setSRV(base, targets, extra, cfg.TTL)
	}
	s.setPTRs(ptrs)
	return s
}

package answers

import (
	"net/netip"
	"slices"
	"strconv"
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
// the addresses of the target nodes as additional records. Its slices
// are shared by every SRV RRset of a zone of a set (they all name the
// same targets).
type srvSpec struct {
	targets []string
	ports   []uint16
	// extra are the nodes whose addresses are the additional records,
	// in order.
	extra []*Node
}

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
		return addrRRs(nil, n.owner, n.addrs[:n.v4], n.ttl), nil
	case dns.TypeAAAA:
		if len(n.addrs) == int(n.v4) {
			return nil, nil
		}
		return addrRRs(nil, n.owner, n.addrs[n.v4:], n.ttl), nil
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
	// arena holds the set's nodes in one allocation while it lasts
	// (its capacity is the expected number of nodes): fewer, larger
	// objects for the garbage collector, and less heap fragmentation.
	arena []Node
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
var emptyNode = &Node{}

// freeze ends building: empty nodes become the shared emptyNode and small
// tables slices.
func (s *Set) freeze() {
	for z := range s.names {
		t := &s.names[z]
		for rel, n := range t.m {
			if len(n.addrs) == 0 && n.srv == nil {
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
	if n == nil || n == emptyNode {
		if len(s.arena) < cap(s.arena) {
			s.arena = s.arena[:len(s.arena)+1]
			n = &s.arena[len(s.arena)-1]
		} else {
			n = &Node{}
		}
		s.names[zone].m[rel] = n
	}
	return n
}

// ent makes rel exist as an empty non-terminal unless it exists already
// (a later node call for rel replaces it with a node of its own).
func (s *Set) ent(zone int, rel string) {
	if _, ok := s.names[zone].m[rel]; !ok {
		s.names[zone].m[rel] = emptyNode
	}
}

// ents makes every name between rel (exclusive) and the service name
// exist: for "web-0.a.b" it adds "a.b" and "b".
func (s *Set) ents(zone int, rel string) {
	for i := strings.IndexByte(rel, '.'); i >= 0; i = strings.IndexByte(rel, '.') {
		rel = rel[i+1:]
		s.ent(zone, rel)
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

func (n *Node) srvRRs() []dns.RR {
	spec := n.srv
	count := len(spec.targets) * len(spec.ports)
	weight := uint16(100 / count) // #nosec G115 -- at most 100
	if weight == 0 {
		weight = 1
	}
	recs := make([]dns.SRV, 0, count)
	out := make([]dns.RR, count)
	hdr := dns.RR_Header{Name: n.owner, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: n.ttl}
	for _, t := range spec.targets {
		for _, p := range spec.ports {
			recs = append(recs, dns.SRV{Hdr: hdr, Priority: 0, Weight: weight, Port: p, Target: t})
			out[len(recs)-1] = &recs[len(recs)-1]
		}
	}
	return out
}

func (n *Node) srvExtra() []dns.RR {
	count := 0
	for _, t := range n.srv.extra {
		count += len(t.addrs)
	}
	if count == 0 {
		return nil
	}
	out := make([]dns.RR, 0, count)
	for _, t := range n.srv.extra {
		out = addrRRs(out, t.owner, t.addrs[:t.v4], t.ttl)
		out = addrRRs(out, t.owner, t.addrs[t.v4:], t.ttl)
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

// dedupAddrs returns ips without repeats: ips itself when it has none.
func dedupAddrs(ips []netip.Addr) []netip.Addr {
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

func buildClusterSetIP(svc *Service, cfg Config) *Set {
	ips := dedupAddrs(svc.IPs)
	s := newSet(svc, cfg)
	if len(ips) == 0 {
		// The service exists but has no VIP: its name answers NODATA; no
		// SRV names, since their target would not resolve.
		for z := range cfg.Zones {
			s.ent(z, "")
		}
		return s
	}
	groups := namedPorts(svc.Ports)
	bare := distinctPorts(groups)
	svcRel := svc.Name + "." + svc.Namespace + ".svc"
	var ptrs []PTR
	addrs, v4 := partition(ips)
	s.arena = make([]Node, 0, len(cfg.Zones)*(1+len(groups)))
	for z, zone := range cfg.Zones {
		base := fqdn(svcRel, zone)
		top := s.node(z, "")
		top.setAddrs(base, addrs, v4, cfg.TTL)
		targets, extra := []string{base}, []*Node{top}
		for _, g := range groups {
			s.node(z, g.rel).setSRV(g.rel+"."+base, &srvSpec{targets: targets, ports: g.ports, extra: extra}, cfg.TTL)
			s.ent(z, g.proto)
		}
		top.setSRV(base, &srvSpec{targets: targets, ports: bare, extra: extra}, cfg.TTL)
		if z == 0 {
			for _, ip := range ips {
				ptrs = append(ptrs, PTR{Reverse: string(reverseName(nil, ip)), Target: base})
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
	nSlots := 0
	for _, sl := range sorted {
		nSlots += len(sl.Endpoints)
	}
	for z := range s.names {
		s.names[z].m = make(map[string]*Node, nSlots+4)
	}
	var (
		names   []endpointName
		byRel   = make(map[string]int, nSlots)
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
			if !validName(host, rel, svcRel, longest) {
				skipped++
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
	var (
		ptrs    []PTR
		revBuf  []byte
		revEnds []int
	)
	allAddrs, allV4 := partition(all)
	// The nodes: per zone the service, one per endpoint name, one per
	// port group (empty non-terminals are the shared emptyNode).
	s.arena = make([]Node, 0, len(cfg.Zones)*(1+len(names)+len(groups)))
	epAddrs := make([][]netip.Addr, len(names))
	epV4 := make([]int, len(names))
	for i, en := range names {
		epAddrs[i], epV4[i] = partition(en.addrs)
	}
	for z, zone := range cfg.Zones {
		base := fqdn(svcRel, zone)
		top := s.node(z, "")
		top.setAddrs(base, allAddrs, allV4, cfg.TTL)
		epNodes := make([]*Node, len(names))
		owners := joinOwners(names, base)
		for i, en := range names {
			owner := owners[i]
			// The relative name as a prefix of owner: one string for
			// both (and for the SRV and PTR targets).
			rel := owner[:len(en.rel)]
			n := s.node(z, rel)
			n.setAddrs(owner, epAddrs[i], epV4[i], cfg.TTL)
			s.ents(z, rel)
			epNodes[i] = n
			if z == 0 {
				for _, ip := range en.addrs {
					ptrs = append(ptrs, PTR{Target: owner})
					revBuf = reverseName(revBuf, ip)
					revEnds = append(revEnds, len(revBuf))
				}
			}
		}
		for _, g := range groups {
			s.node(z, g.rel).setSRV(g.rel+"."+base, &srvSpec{targets: owners, ports: g.ports, extra: epNodes}, cfg.TTL)
			s.ent(z, g.proto)
		}
		top.setSRV(base, &srvSpec{targets: owners, ports: bare, extra: epNodes}, cfg.TTL)
	}
	// The reverse names, in one string.
	revs := string(revBuf)
	start := 0
	for i, end := range revEnds {
		ptrs[i].Reverse = revs[start:end]
		start = end
	}
	s.setPTRs(ptrs)
	return s
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

const hexDigits = "0123456789abcdef"

// reverseName appends the reverse name of ip (as dns.ReverseAddr makes
// it: "4.3.2.1.in-addr.arpa.", or 32 nibbles and "ip6.arpa.") to buf.
func reverseName(buf []byte, ip netip.Addr) []byte {
	if ip.Is4() {
		a := ip.As4()
		for i := 3; i >= 0; i-- {
			buf = strconv.AppendUint(buf, uint64(a[i]), 10)
			buf = append(buf, '.')
		}
		return append(buf, "in-addr.arpa."...)
	}
	a := ip.As16()
	for i := 15; i >= 0; i-- {
		buf = append(buf, hexDigits[a[i]&0x0f], '.', hexDigits[a[i]>>4], '.')
	}
	return append(buf, "ip6.arpa."...)
}

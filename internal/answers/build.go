package answers

import (
	"net/netip"
	"slices"
	"strings"
)

// Building a Set: Build, what both builders share, and the ClusterSetIP
// builder (the headless one is in headless.go).

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

// portOwners returns the SRV owner names "<rel>.<svcRel>.<zone>" of
// groups, substrings of one string, and the service name in zone: a
// suffix of the first of them, or a string of its own without groups.
func portOwners(groups []portGroup, svcRel, zone string) (owners []string, base string) {
	base = fqdn(svcRel, zone)
	if len(groups) == 0 {
		return nil, base
	}
	owners = joinUnder(len(groups), func(i int) string { return groups[i].rel }, base)
	return owners, owners[0][len(groups[0].rel)+1:]
}

// joinUnder returns the names "<rel(i)>.<base>" for i < n, substrings of
// one string: one allocation for all the names of a service.
func joinUnder(n int, rel func(int) string, base string) []string {
	size := 0
	for i := range n {
		size += len(rel(i)) + 1 + len(base)
	}
	var b strings.Builder
	b.Grow(size)
	for i := range n {
		b.WriteString(rel(i))
		b.WriteByte('.')
		b.WriteString(base)
	}
	all := b.String()
	out := make([]string, n)
	for i := range n {
		l := len(rel(i)) + 1 + len(base)
		out[i], all = all[:l], all[l:]
	}
	return out
}

// setPorts makes ports[i] the SRV node of groups[i], owned by owners[i]
// (see portOwners), and returns the name table of a set: ents (empty
// non-terminals), the port names and the protocols' empty non-terminals
// ("_tcp"), sorted, in an array of exactly their number. The relative
// names are substrings of the owner names. Every RRset names bareSpec's
// targets; bareSpec itself (the service name's SRV RRset) is shared with
// a lone group, whose ports are the same.
func setPorts(ents []string, ports []Node, groups []portGroup, owners []string, bareSpec *srvSpec, ttl uint32) []tableEntry {
	protos := make([]string, 0, len(groups))
	for _, g := range groups {
		if !slices.Contains(protos, g.proto) {
			protos = append(protos, g.proto)
		}
	}
	entries := make([]tableEntry, 0, len(ents)+len(groups)+len(protos))
	for _, rel := range ents {
		entries = append(entries, tableEntry{rel, emptyNode})
	}
	for i, g := range groups {
		spec := bareSpec
		if len(groups) > 1 {
			spec = &srvSpec{ports: g.ports, targets: bareSpec.targets}
		}
		ports[i].setSRV(owners[i], spec, ttl)
		rel := owners[i][:len(g.rel)]
		entries = append(entries, tableEntry{rel, &ports[i]})
		if j := slices.Index(protos, g.proto); j >= 0 {
			entries = append(entries, tableEntry{rel[len(rel)-len(g.proto):], emptyNode})
			protos = slices.Delete(protos, j, j+1)
		}
	}
	slices.SortFunc(entries, func(a, b tableEntry) int { return strings.Compare(a.rel, b.rel) })
	return entries
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
		// The service name is a suffix of the first SRV name: one string
		// for all.
		owners, base := portOwners(groups, svcRel, zone)
		bareSpec := &srvSpec{ports: bare, targets: []*Node{top}}
		if z == 0 {
			s.shareKey(svc, base)
			s.ptrNodes = bareSpec.targets
		}
		other := setPorts(nil, seg[1:], groups, owners, bareSpec, cfg.TTL)
		top.setAddrs(base, addrs, v4, cfg.TTL)
		top.setSRV(base, bareSpec, cfg.TTL)
		s.zones[z] = zoneNames{top: top, other: other}
	}
	return s
}

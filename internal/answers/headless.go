package answers

import (
	"maps"
	"math"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// Building the Set of a headless service: a name per ready endpoint.

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
			if len(ep.Addresses) == 0 {
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
	s.shaping, s.localFirst = cfg.Shaping, cfg.Shaping.localFirst(svc)
	if s.localFirst {
		s.regional = regionalClusters(sorted, cfg.Shaping)
	}
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
		portNames, base := portOwners(groups, svcRel, zone)
		if z == 0 {
			s.shareKey(svc, base)
		}
		owners := joinUnder(len(names), func(i int) string { return names[i].rel }, base)
		targets := make([]*Node, len(names))
		for i := range names {
			n := &eps[pos[i]]
			n.setAddrs(owners[i], epAddrs[i], epV4[i], cfg.TTL)
			targets[i] = n
		}
		bareSpec := &srvSpec{ports: bare, targets: targets}
		other := setPorts(ents, ports, groups, portNames, bareSpec, cfg.TTL)
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

// regionalClusters are the source clusters of slices (sorted by cluster
// ID), other than sh's own, whose slices carry sh's region: the clusters
// of the region tier, each once. While a cluster's slices disagree (the
// importer rewriting them after a region change), one that carries the
// region puts the cluster in the tier.
func regionalClusters(slices []*Slice, sh *Shaping) []string {
	if sh.Region == "" {
		return nil
	}
	var out []string
	for _, sl := range slices {
		if sl.Region == sh.Region && sl.ClusterID != sh.ClusterID && (len(out) == 0 || out[len(out)-1] != sl.ClusterID) {
			out = append(out, sl.ClusterID)
		}
	}
	return out
}

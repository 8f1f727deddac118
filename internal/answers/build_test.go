package answers

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const zone = "clusterset.local."

var cfg = Config{Zones: []string{zone}, TTL: 5}

func ips(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func ep(host string, addrs ...string) Endpoint {
	return Endpoint{Hostname: host, Addresses: ips(addrs...)}
}

// render gives the records of one node and qtype as "TYPE rdata" strings
// (owner names checked separately), answers first, then "+extra".
func render(t *testing.T, s *Set, prefix string, qtype uint16) []string {
	t.Helper()
	n := s.Lookup(0, prefix)
	if n == nil {
		return nil
	}
	ans, extra := n.Records(qtype)
	var out []string
	for _, rr := range ans {
		out = append(out, rdata(rr))
	}
	for _, rr := range extra {
		out = append(out, "+"+rr.Header().Name+" "+rdata(rr))
	}
	return out
}

func rdata(rr dns.RR) string {
	f := strings.Fields(rr.String())
	// name ttl class type rdata...
	return strings.Join(f[3:], " ")
}

func TestClusterSetIP(t *testing.T) {
	svc := &Service{Namespace: "demo", Name: "web", Type: ClusterSetIP, IPs: ips("10.96.0.10"),
		Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}, {Protocol: "tcp", Port: 8080}}}
	// Slices of a ClusterSetIP import give no per-endpoint names.
	s := Build(svc, []*Slice{{ClusterID: "east", Endpoints: []Endpoint{ep("web-0", "10.1.0.1")}}}, cfg)
	require.NotNil(t, s)
	assert.Equal(t, []string{"", "_http._tcp", "_tcp"}, s.Names(0))
	assert.Equal(t, []string{"A 10.96.0.10"}, render(t, s, "", dns.TypeA))
	assert.Nil(t, render(t, s, "", dns.TypeAAAA), "AAAA of an IPv4-only VIP is NODATA")
	assert.Equal(t, []string{"SRV 0 100 80 web.demo.svc.clusterset.local.", "+web.demo.svc.clusterset.local. A 10.96.0.10"},
		render(t, s, "_http._tcp", dns.TypeSRV))
	assert.Equal(t, []string{"SRV 0 100 80 web.demo.svc.clusterset.local.", "+web.demo.svc.clusterset.local. A 10.96.0.10"},
		render(t, s, "", dns.TypeSRV), "bare-name SRV: named ports only")
	assert.Nil(t, s.Lookup(0, "web-0.east"))
	assert.Nil(t, s.Lookup(0, "east"), "<clusterid>.<svc> never exists for ClusterSetIP")
	assert.Equal(t, "web.demo.svc.clusterset.local.", recs(s.Lookup(0, ""), dns.TypeA)[0].Header().Name)
	assert.Equal(t, "_http._tcp.web.demo.svc.clusterset.local.", recs(s.Lookup(0, "_http._tcp"), dns.TypeSRV)[0].Header().Name)
	assert.Equal(t, uint32(5), recs(s.Lookup(0, ""), dns.TypeA)[0].Header().Ttl)
	assert.Equal(t, []PTR{{Reverse: "10.0.96.10.in-addr.arpa.", Target: "web.demo.svc.clusterset.local."}}, s.PTRs())
	assert.Equal(t, 0, s.Endpoints())
}

func TestClusterSetIPDualStack(t *testing.T) {
	svc := &Service{Namespace: "demo", Name: "web", Type: ClusterSetIP, IPs: ips("10.96.0.10", "fd00:10:96::a")}
	s := Build(svc, nil, cfg)
	require.NotNil(t, s)
	assert.Equal(t, []string{"A 10.96.0.10"}, render(t, s, "", dns.TypeA))
	assert.Equal(t, []string{"AAAA fd00:10:96::a"}, render(t, s, "", dns.TypeAAAA))
	assert.Nil(t, render(t, s, "", dns.TypeSRV), "no named ports, no SRV")
	assert.Equal(t, []string{""}, s.Names(0))
	assert.Len(t, s.PTRs(), 2)
	assert.Equal(t, "a.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", s.PTRs()[1].Reverse)
}

func TestBareSRVDistinctTargetPort(t *testing.T) {
	svc := &Service{Namespace: "demo", Name: "dns", Type: ClusterSetIP, IPs: ips("10.96.0.53"),
		Ports: []Port{{Name: "dns", Protocol: "udp", Port: 53}, {Name: "dns-tcp", Protocol: "tcp", Port: 53}, {Name: "metrics", Protocol: "tcp", Port: 9153}}}
	s := Build(svc, nil, cfg)
	require.NotNil(t, s)
	srv := render(t, s, "", dns.TypeSRV)
	assert.Equal(t, []string{
		"SRV 0 50 53 dns.demo.svc.clusterset.local.", "SRV 0 50 9153 dns.demo.svc.clusterset.local.",
		"+dns.demo.svc.clusterset.local. A 10.96.0.53",
	}, srv, "udp/53 and tcp/53 give one record")
	assert.Equal(t, []string{"", "_dns-tcp._tcp", "_dns._udp", "_metrics._tcp", "_tcp", "_udp"}, s.Names(0))
	assert.Equal(t, []string{"SRV 0 100 53 dns.demo.svc.clusterset.local.", "+dns.demo.svc.clusterset.local. A 10.96.0.53"},
		render(t, s, "_dns._udp", dns.TypeSRV))
	assert.Nil(t, render(t, s, "_udp", dns.TypeSRV), "_udp is an empty non-terminal")
	assert.NotNil(t, s.Lookup(0, "_udp"))
}

func headless() (*Service, []*Slice) {
	svc := &Service{Namespace: "demo", Name: "db", Type: Headless,
		Ports: []Port{{Name: "pg", Protocol: "tcp", Port: 5432}, {Name: "metrics", Protocol: "tcp", Port: 9187}, {Protocol: "tcp", Port: 7000}}}
	return svc, []*Slice{
		{Name: "db-west-v4", ClusterID: "west.eu", Endpoints: []Endpoint{
			ep("", "10.2.0.7"), // dashed-IP name
		}},
		{Name: "db-east", ClusterID: "east", Endpoints: []Endpoint{
			ep("db-0", "10.1.0.5"),
		}},
		{Name: "db-west-v6", ClusterID: "west.eu", Endpoints: []Endpoint{
			ep("", "fd00::1"),
		}},
	}
}

func TestHeadless(t *testing.T) {
	svc, sl := headless()
	s := Build(svc, sl, cfg)
	require.NotNil(t, s)
	assert.Equal(t, 3, s.Endpoints())
	assert.Equal(t, []string{"", "10-2-0-7.west.eu", "_metrics._tcp", "_pg._tcp", "_tcp", "db-0.east", "east", "eu", "fd00--1.west.eu", "west.eu"}, s.Names(0))
	assert.Equal(t, []string{"A 10.1.0.5", "A 10.2.0.7"}, render(t, s, "", dns.TypeA), "ready endpoints of every cluster")
	assert.Equal(t, []string{"AAAA fd00::1"}, render(t, s, "", dns.TypeAAAA))
	assert.Equal(t, []string{"A 10.1.0.5"}, render(t, s, "db-0.east", dns.TypeA))
	assert.Nil(t, render(t, s, "db-0.east", dns.TypeAAAA))
	assert.Equal(t, []string{"A 10.2.0.7"}, render(t, s, "10-2-0-7.west.eu", dns.TypeA))
	assert.Equal(t, []string{"AAAA fd00::1"}, render(t, s, "fd00--1.west.eu", dns.TypeAAAA))
	for _, ent := range []string{"east", "west.eu", "eu", "_tcp"} {
		n := s.Lookup(0, ent)
		require.NotNil(t, n, ent)
		for _, q := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV} {
			a, _ := n.Records(q)
			assert.Empty(t, a, "%s is an empty non-terminal", ent)
		}
	}
	// N x M SRV with every target's address in the additional section.
	pg := render(t, s, "_pg._tcp", dns.TypeSRV)
	assert.Equal(t, []string{
		"SRV 0 33 5432 db-0.east.db.demo.svc.clusterset.local.",
		"SRV 0 33 5432 10-2-0-7.west.eu.db.demo.svc.clusterset.local.",
		"SRV 0 33 5432 fd00--1.west.eu.db.demo.svc.clusterset.local.",
		"+db-0.east.db.demo.svc.clusterset.local. A 10.1.0.5",
		"+10-2-0-7.west.eu.db.demo.svc.clusterset.local. A 10.2.0.7",
		"+fd00--1.west.eu.db.demo.svc.clusterset.local. AAAA fd00::1",
	}, pg)
	bare := render(t, s, "", dns.TypeSRV)
	assert.Len(t, bare, 3*2+3, "3 endpoints x 2 named ports, plus 3 extras")
	assert.Contains(t, bare, "SRV 0 16 9187 fd00--1.west.eu.db.demo.svc.clusterset.local.")
	// Every SRV target resolves inside the set.
	for _, prefix := range s.Names(0) {
		for _, rr := range recs(s.Lookup(0, prefix), dns.TypeSRV) {
			target := rr.(*dns.SRV).Target
			rel := strings.TrimSuffix(target, ".db.demo.svc."+zone)
			if target == "db.demo.svc."+zone {
				rel = ""
			}
			n := s.Lookup(0, rel)
			require.NotNil(t, n, target)
			assert.NotEmpty(t, append(recs(n, dns.TypeA), recs(n, dns.TypeAAAA)...), target)
		}
	}
	assert.ElementsMatch(t, []PTR{
		{"5.0.1.10.in-addr.arpa.", "db-0.east.db.demo.svc.clusterset.local."},
		{"7.0.2.10.in-addr.arpa.", "10-2-0-7.west.eu.db.demo.svc.clusterset.local."},
		{"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", "fd00--1.west.eu.db.demo.svc.clusterset.local."},
	}, s.PTRs(), "PTR for ready endpoint IPs only")
}

func TestHeadlessOrderIndependent(t *testing.T) {
	svc, sl := headless()
	a := Build(svc, sl, cfg)
	slices.Reverse(sl)
	b := Build(svc, sl, cfg)
	for _, name := range a.Names(0) {
		for _, q := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV} {
			assert.Equal(t, render(t, a, name, q), render(t, b, name, q), name)
		}
	}
}

func TestHeadlessSameHostnameMerges(t *testing.T) {
	svc := &Service{Namespace: "demo", Name: "db", Type: Headless, Ports: []Port{{Name: "pg", Protocol: "tcp", Port: 5432}}}
	s := Build(svc, []*Slice{
		{Name: "v4", ClusterID: "east", Endpoints: []Endpoint{ep("db-0", "10.1.0.5")}},
		{Name: "v6", ClusterID: "east", Endpoints: []Endpoint{ep("db-0", "fd00::5")}},
	}, cfg)
	require.NotNil(t, s)
	assert.Equal(t, []string{"A 10.1.0.5"}, render(t, s, "db-0.east", dns.TypeA))
	assert.Equal(t, []string{"AAAA fd00::5"}, render(t, s, "db-0.east", dns.TypeAAAA))
	assert.Equal(t, []string{
		"SRV 0 100 5432 db-0.east.db.demo.svc.clusterset.local.",
		"+db-0.east.db.demo.svc.clusterset.local. A 10.1.0.5",
		"+db-0.east.db.demo.svc.clusterset.local. AAAA fd00::5",
	}, render(t, s, "_pg._tcp", dns.TypeSRV), "one target, both addresses")
}

func TestHeadlessNoReadyEndpoints(t *testing.T) {
	svc, _ := headless()
	assert.Nil(t, Build(svc, nil, cfg))
	// A slice whose endpoints are all not ready (internal/compact keeps
	// only ready ones).
	assert.Nil(t, Build(svc, []*Slice{{ClusterID: "east"}}, cfg))
}

func TestHeadlessEndpointsAbsent(t *testing.T) {
	svc, sl := headless()
	svc.EndpointsAbsent = true
	assert.Nil(t, Build(svc, sl, cfg))
}

func TestHeadlessTooLongNameSkipped(t *testing.T) {
	long := strings.Repeat("a", 63)
	id := strings.Join([]string{long, long, long}, ".")
	svc := &Service{Namespace: strings.Repeat("n", 40), Name: strings.Repeat("s", 40), Type: Headless}
	s := Build(svc, []*Slice{
		{ClusterID: id, Endpoints: []Endpoint{ep("db-0", "10.1.0.5")}},
		{ClusterID: "east", Endpoints: []Endpoint{ep("db-1", "10.1.0.6")}},
	}, cfg)
	require.NotNil(t, s)
	assert.Equal(t, 1, s.Skipped())
	assert.Equal(t, 2, s.Endpoints())
	// The endpoint is ready: the service's name answers with it (spec:
	// an A record per ready endpoint); only the names that would name
	// it (its own, its SRV record, its PTR) are left out.
	assert.Equal(t, []string{"A 10.1.0.5", "A 10.1.0.6"}, render(t, s, "", dns.TypeA))
	assert.Equal(t, []PTR{{Reverse: "6.0.1.10.in-addr.arpa.", Target: "db-1.east." + svc.Name + "." + svc.Namespace + ".svc.clusterset.local."}}, s.PTRs())

	// Every endpoint without a name: the service still answers A, and
	// has no SRV records (they would have no targets).
	s = Build(svc, []*Slice{{ClusterID: id, Endpoints: []Endpoint{ep("db-0", "10.1.0.5"), ep("", "10.1.0.7")}}}, cfg)
	require.NotNil(t, s)
	assert.Equal(t, 2, s.Skipped())
	assert.Equal(t, []string{"A 10.1.0.5", "A 10.1.0.7"}, render(t, s, "", dns.TypeA))
	assert.False(t, s.Lookup(0, "").Has(dns.TypeSRV))
	assert.Empty(t, s.PTRs())
	ix := NewIndex(5)
	ix.Put(s.Key(), s)
	assert.False(t, ix.HasPTR("5.0.1.10.in-addr.arpa."), "no PTR for an endpoint without a name")
}

// TestSRVNameTooLongSkipped: port names may have 63 characters (DNS
// labels, as Service port names); a port whose SRV name would exceed 255
// octets gets no SRV name of its own, for both types, and still appears
// in the bare-name SRV answer.
func TestSRVNameTooLongSkipped(t *testing.T) {
	long := strings.Repeat("p", 63)
	zone99 := strings.Repeat("z", 40) + "." + strings.Repeat("y", 40) + "." + strings.Repeat("x", 16) + "." // 99 characters
	require.Len(t, zone99, 99)
	c := Config{Zones: []string{zone99}, TTL: 5}
	ports := []Port{{Name: "http", Protocol: "tcp", Port: 80}, {Name: long, Protocol: "tcp", Port: 81}}
	svc := &Service{Namespace: strings.Repeat("n", 63), Name: strings.Repeat("s", 63), Type: ClusterSetIP, IPs: ips("10.96.0.10"), Ports: ports}
	for _, s := range []*Set{
		Build(svc, nil, c),
		Build(&Service{Namespace: svc.Namespace, Name: svc.Name, Type: Headless, Ports: ports},
			[]*Slice{{ClusterID: "east", Endpoints: []Endpoint{ep("db-0", "10.1.0.5")}}}, c),
	} {
		require.NotNil(t, s)
		assert.True(t, s.Lookup(0, "_http._tcp").Has(dns.TypeSRV), "a short port name fits")
		assert.Nil(t, s.Lookup(0, "_"+long+"._tcp"), "no SRV name longer than 255 octets")
		var ports []string
		for _, r := range render(t, s, "", dns.TypeSRV) {
			if f := strings.Fields(r); f[0] == "SRV" {
				ports = append(ports, f[3])
			}
		}
		assert.Equal(t, []string{"80", "81"}, ports, "both ports in the bare-name answer")
	}
	// Under a short zone a 62-character port name fits; a 63-character one
	// never does (the label "_<port>" would have 64 octets).
	s := Build(svc, nil, cfg)
	assert.Nil(t, s.Lookup(0, "_"+long+"._tcp"))
	svc.Ports[1].Name = long[:62]
	s = Build(svc, nil, cfg)
	require.True(t, s.Lookup(0, "_"+long[:62]+"._tcp").Has(dns.TypeSRV))
	_, ok := dns.IsDomainName(s.Lookup(0, "_"+long[:62]+"._tcp").Owner())
	assert.True(t, ok)
}

// TestRecordsBounded: a reply holds at most dns.MaxMsgSize octets, so
// Records never builds more records than that can carry (a bare-name SRV
// of 2,000 endpoints and 50 ports is 100,000 records), and no reply larger
// than any message is packed and kept.
func TestRecordsBounded(t *testing.T) {
	svc := &Service{Namespace: "demo", Name: "media", Type: Headless}
	for i := range 50 {
		svc.Ports = append(svc.Ports, Port{Name: fmt.Sprintf("rtp%d", i), Protocol: "udp", Port: uint16(10000 + i)})
	}
	var eps []Endpoint
	for i := range 5000 {
		eps = append(eps, ep(fmt.Sprintf("m-%d", i), fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)))
	}
	s := Build(svc, []*Slice{{ClusterID: "east", Endpoints: eps}}, cfg)
	require.NotNil(t, s)
	top := s.Lookup(0, "")
	ans, extra := top.Records(dns.TypeSRV)
	assert.Len(t, ans, dns.MaxMsgSize/minSRVRR)
	assert.Len(t, extra, dns.MaxMsgSize/minARR)
	a, _ := top.Records(dns.TypeA)
	assert.Len(t, a, dns.MaxMsgSize/minARR)
	assert.Nil(t, top.Packed("media.demo.svc.clusterset.local.", dns.TypeSRV), "a reply no message can carry is not kept")
	// A 50-port SRV name of 5,000 targets: also bounded.
	srv, _ := s.Lookup(0, "_rtp0._udp").Records(dns.TypeSRV)
	assert.Len(t, srv, dns.MaxMsgSize/minSRVRR)
}

// TestDedupAddrs: repeats go, first appearances stay in order, on both
// sides of the pairwise/set threshold; a list without repeats is
// returned as is.
func TestDedupAddrs(t *testing.T) {
	for _, n := range []int{0, 1, 2, dedupPairwise, dedupPairwise + 1, 1000} {
		var in, want []netip.Addr
		for i := range n {
			a := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
			in = append(in, a)
			want = append(want, a)
			if i%3 == 1 {
				in = append(in, in[i/2]) // a repeat of an earlier one
			}
		}
		got := dedupAddrs(in)
		assert.Equal(t, want, got, "n=%d", n)
		if len(want) > 0 {
			unique := slices.Clone(want)
			assert.Same(t, &unique[0], &dedupAddrs(unique)[0], "n=%d: no copy without repeats", n)
		}
	}
}

func TestSeveralZones(t *testing.T) {
	svc := &Service{Namespace: "demo", Name: "web", Type: ClusterSetIP, IPs: ips("10.96.0.10")}
	s := Build(svc, nil, Config{Zones: []string{zone, "mcs.example."}, TTL: 30})
	require.NotNil(t, s)
	assert.Equal(t, "web.demo.svc.mcs.example.", recs(s.Lookup(1, ""), dns.TypeA)[0].Header().Name)
	assert.Equal(t, uint32(30), recs(s.Lookup(1, ""), dns.TypeA)[0].Header().Ttl)
	assert.Equal(t, "web.demo.svc.clusterset.local.", s.PTRs()[0].Target, "PTR targets are in the first zone")
}

func TestDashedIP(t *testing.T) {
	for in, want := range map[string]string{
		"10.1.2.3": "10-1-2-3", "fd00::1": "fd00--1", "fd00::": "fd00--0", "2001:db8:0:0:1:0:0:1": "2001-db8--1-0-0-1",
	} {
		assert.Equal(t, want, DashedIP(netip.MustParseAddr(in)), in)
	}
}

func TestManyEndpointsWeights(t *testing.T) {
	svc := &Service{Namespace: "demo", Name: "big", Type: Headless, Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}}}
	var eps []Endpoint
	for i := range 500 {
		eps = append(eps, ep("", fmt.Sprintf("10.3.%d.%d", i/250, i%250+1)))
	}
	s := Build(svc, []*Slice{{ClusterID: "east", Endpoints: eps}}, cfg)
	require.NotNil(t, s)
	assert.Len(t, recs(s.Lookup(0, ""), dns.TypeA), 500)
	assert.Len(t, recs(s.Lookup(0, "_http._tcp"), dns.TypeSRV), 500)
	assert.Equal(t, uint16(1), recs(s.Lookup(0, "_http._tcp"), dns.TypeSRV)[0].(*dns.SRV).Weight)
}

// A ClusterSetIP import without a VIP (not opted into one, or none
// allocated yet) exists: its name is NODATA, its SRV names do not exist.
func TestClusterSetIPWithoutVIP(t *testing.T) {
	svc := &Service{Namespace: "ns", Name: "web", Type: ClusterSetIP,
		Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}}}
	s := Build(svc, nil, Config{Zones: []string{"clusterset.local."}, TTL: 5})
	if s == nil {
		t.Fatal("Build returned nil: the service name would be NXDOMAIN")
	}
	n := s.Lookup(0, "")
	if n == nil {
		t.Fatal("no node for the service name")
	}
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV} {
		if a, _ := n.Records(qt); len(a) != 0 {
			t.Fatalf("%s: %v, want none", dns.TypeToString[qt], a)
		}
	}
	if s.Lookup(0, "_http._tcp") != nil {
		t.Fatal("SRV name exists without a VIP")
	}
	if len(s.PTRs()) != 0 {
		t.Fatal("PTR without a VIP")
	}
}

// recs returns the answer records of qtype at n.
func recs(n *Node, qtype uint16) []dns.RR {
	a, _ := n.Records(qtype)
	return a
}

// TestValidName: the length-only check agrees with dns.IsDomainName and
// RFC 1035's 255 octets (254 characters as an FQDN), up to that boundary.
func TestValidName(t *testing.T) {
	svcRel := "svc.ns.svc"
	long := strings.Repeat("c", 63) + "." + strings.Repeat("d", 63) + "."
	for _, zone := range []string{"clusterset.local.", "."} {
		for _, host := range []string{"a", strings.Repeat("h", 63), strings.Repeat("h", 64), "web-0", "10-1-2-3"} {
			clusters := []string{"east", "west.eu", long + strings.Repeat("e", 63)}
			for n := 30; n <= 40; n++ { // names of about 250 to 260 characters
				clusters = append(clusters, long+strings.Repeat("e", n))
			}
			for _, cluster := range clusters {
				rel := host + "." + cluster
				name := fqdn(rel+"."+svcRel, zone)
				_, want := dns.IsDomainName(name)
				want = want && len(host) <= 63 && len(name) <= 254
				assert.Equal(t, want, validName(host, rel, svcRel, zone), "%s in %s (%d)", rel, zone, len(name))
				assert.Equal(t, want, validName(host, strings.ToUpper(rel[:1])+rel[1:], svcRel, zone), "fallback: %s", rel)
			}
		}
	}
	assert.False(t, validName("", ".east", svcRel, "clusterset.local."))
	assert.False(t, validName("a", "a..east", svcRel, "clusterset.local."))
}

// TestUnpackableRemembered: a reply that cannot be packed is left to the
// dns.Msg path, and not packed again on every query.
func TestUnpackableRemembered(t *testing.T) {
	owner := strings.Repeat("a", 64) + ".example." // a label over 63 octets
	n := &Node{owner: owner, addrs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}, v4: 1, ttl: 5}
	assert.Nil(t, n.Packed(owner, dns.TypeA))
	assert.Same(t, unpackable, n.packed.Load().tmpl[0], "remembered")
	assert.Nil(t, n.Packed(owner, dns.TypeA))
}

// TestHeadlessSharedAddresses: an address of several endpoint names has
// all of them as PTR targets, in endpoint order; the Index answers them.
func TestHeadlessSharedAddresses(t *testing.T) {
	svc := &Service{Namespace: "demo", Name: "db", Type: Headless}
	s := Build(svc, []*Slice{{Name: "a", ClusterID: "east", Endpoints: []Endpoint{
		ep("db-1", "10.1.0.6", "10.1.0.5"),
		ep("db-0", "10.1.0.5"),
		ep("db-2", "10.1.0.7"),
	}}}, cfg)
	require.NotNil(t, s)
	assert.Equal(t, []PTR{
		{"6.0.1.10.in-addr.arpa.", "db-1.east.db.demo.svc.clusterset.local."},
		{"5.0.1.10.in-addr.arpa.", "db-1.east.db.demo.svc.clusterset.local."},
		{"5.0.1.10.in-addr.arpa.", "db-0.east.db.demo.svc.clusterset.local."},
		{"7.0.1.10.in-addr.arpa.", "db-2.east.db.demo.svc.clusterset.local."},
	}, s.PTRs())
	ix := NewIndex(5)
	ix.Put(s.Key(), s)
	var got []string
	for _, rr := range ix.PTR("5.0.1.10.in-addr.arpa.") {
		got = append(got, rr.(*dns.PTR).Ptr)
	}
	assert.Equal(t, []string{"db-1.east.db.demo.svc.clusterset.local.", "db-0.east.db.demo.svc.clusterset.local."}, got)
	assert.Len(t, ix.PTR("7.0.1.10.in-addr.arpa."), 1)
	ix.Put(s.Key(), nil)
	assert.Nil(t, ix.PTR("5.0.1.10.in-addr.arpa."))
	assert.False(t, ix.HasPTR("6.0.1.10.in-addr.arpa."))
}

// TestHeadlessManyNames: with more names than a linear scan covers, every
// name is found (endpoint names by binary search, the others in their
// table), its neighbours in sort order are not, and SRV keeps endpoint
// order.
func TestHeadlessManyNames(t *testing.T) {
	svc := &Service{Namespace: "demo", Name: "db", Type: Headless, Ports: []Port{{Name: "pg", Protocol: "tcp", Port: 5432}}}
	var eps []Endpoint
	for i := 40; i > 0; i-- {
		host := fmt.Sprintf("db-%d", i)
		if i%3 == 0 {
			host = "" // a dashed-IP name
		}
		if i%7 == 0 {
			host = fmt.Sprintf("x.h%d", i) // a dotted hostname makes an empty non-terminal
		}
		eps = append(eps, ep(host, fmt.Sprintf("10.1.0.%d", i)))
	}
	s := Build(svc, []*Slice{
		{Name: "a", ClusterID: "east", Endpoints: eps[:20]},
		{Name: "b", ClusterID: "west.eu", Endpoints: eps[20:]},
	}, cfg)
	require.NotNil(t, s)
	names := s.Names(0)
	assert.Len(t, names, 1+40+5+2+3, "service, endpoints, dotted-hostname ENTs, cluster ENTs (east, west.eu, eu), port name and _tcp")
	for _, rel := range names {
		n := s.Lookup(0, rel)
		require.NotNil(t, n, rel)
		if strings.Count(rel, ".") >= 1 && strings.HasPrefix(rel, "db-") || strings.HasPrefix(rel, "10-") {
			assert.Equal(t, rel+".db.demo.svc."+zone, n.owner)
			assert.True(t, n.Has(dns.TypeA), rel)
		}
		for _, miss := range []string{rel + "a", rel + ".", "0" + rel} {
			if !slices.Contains(names, miss) {
				assert.Nil(t, s.Lookup(0, miss), miss)
			}
		}
	}
	srv := recs(s.Lookup(0, "_pg._tcp"), dns.TypeSRV)
	require.Len(t, srv, 40)
	assert.Equal(t, "db-40.east.db.demo.svc."+zone, srv[0].(*dns.SRV).Target, "endpoint order: slice a first, then as listed")
}

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

// shapedService is a headless service with n endpoints in each of the
// clusters (hostnames "<cluster>-<i>"), IPv4, and IPv6 too when dual.
func shapedService(clusters []string, n int, dual bool) (*Service, []*Slice) {
	svc := &Service{Namespace: "demo", Name: "db", Type: Headless, Ports: []Port{{Name: "pg", Protocol: "tcp", Port: 5432}}}
	var out []*Slice
	for c, id := range clusters {
		v4 := &Slice{Name: id + "-v4", ClusterID: id}
		v6 := &Slice{Name: id + "-v6", ClusterID: id}
		for i := range n {
			host := fmt.Sprintf("%s-%d", id, i)
			v4.Endpoints = append(v4.Endpoints, Endpoint{Hostname: host,
				Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, byte(c + 1), byte(i >> 8), byte(i)})}})
			v6.Endpoints = append(v6.Endpoints, Endpoint{Hostname: host,
				Addresses: []netip.Addr{netip.AddrFrom16([16]byte{0xfd, 0, 14: byte(c + 1), 15: byte(i)})}})
		}
		out = append(out, v4)
		if dual {
			out = append(out, v6)
		}
	}
	return svc, out
}

const dbName = "db.demo.svc.clusterset.local."

// ringReply sends a query for qname and qtype through the set's ring with
// a buffer of limit octets (and an OPT record when edns) and returns the
// reply and its length.
func ringReply(t *testing.T, s *Set, qname string, qtype uint16, limit int, edns bool) (*dns.Msg, int) {
	t.Helper()
	n := s.Lookup(0, strings.TrimSuffix(strings.TrimSuffix(qname, dbName), "."))
	require.NotNil(t, n, qname)
	ring := s.Ring(0, n, qname, qtype)
	require.NotNil(t, ring, qname)
	q := new(dns.Msg)
	q.SetQuestion(qname, qtype)
	var opt *dns.OPT
	if edns {
		q.SetEdns0(uint16(limit), false)
		opt = q.IsEdns0()
	}
	k, off, extra := ring.Choose(limit, edns)
	b, ok := ring.AppendReply(nil, q, opt, k, off, extra)
	require.True(t, ok, "%s: k=%d", qname, k)
	m := new(dns.Msg)
	require.NoError(t, m.Unpack(b))
	return m, len(b)
}

// hosts maps the addresses of a set to their endpoint names' first label.
func hosts(t *testing.T, s *Set, rrs []dns.RR) []string {
	t.Helper()
	var out []string
	for _, rr := range rrs {
		var owner string
		switch r := rr.(type) {
		case *dns.A:
			owner = s.ptrOwner(t, r.A)
		case *dns.AAAA:
			owner = s.ptrOwner(t, r.AAAA)
		case *dns.SRV:
			owner = r.Target
		}
		out = append(out, owner[:strings.IndexByte(owner, '.')])
	}
	return out
}

func (s *Set) ptrOwner(t *testing.T, ip []byte) string {
	addr, _ := netip.AddrFromSlice(ip)
	for j, a := range s.ptrAddrs() {
		if a == addr.Unmap() || a == addr {
			return s.ptrTargets(j)[0].owner
		}
	}
	t.Fatalf("no endpoint has %v", addr)
	return ""
}

func TestLocalFirstOrderAndPriorities(t *testing.T) {
	svc, sl := shapedService([]string{"east", "north", "west"}, 3, true)
	cfg := Config{Zones: []string{"clusterset.local."}, TTL: 5, Shaping: &Shaping{ClusterID: "north", Locality: LocalityLocalFirst}}
	s := Build(svc, sl, cfg)
	require.True(t, s.LocalFirst())

	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		m, _ := ringReply(t, s, dbName, qtype, dns.MaxMsgSize, false)
		assert.Equal(t, []string{"north-0", "north-1", "north-2", "east-0", "east-1", "east-2", "west-0", "west-1", "west-2"},
			hosts(t, s, m.Answer), dns.TypeToString[qtype])
	}
	for _, name := range []string{dbName, "_pg._tcp." + dbName} {
		m, _ := ringReply(t, s, name, dns.TypeSRV, dns.MaxMsgSize, false)
		require.Len(t, m.Answer, 9)
		for _, rr := range m.Answer {
			srv := rr.(*dns.SRV)
			want := uint16(RemotePriority)
			if strings.HasPrefix(srv.Target, "north-") {
				want = LocalPriority
			}
			assert.Equal(t, want, srv.Priority, srv.Target)
			assert.Equal(t, uint16(100/9), srv.Weight)
		}
		assert.Len(t, m.Extra, 18, "every target's addresses")
		assert.Equal(t, "north-0", hosts(t, s, m.Answer)[0])
	}

	// Locality none, or no cluster ID: the order of Records, priority 0.
	for _, sh := range []*Shaping{{ClusterID: "north", Locality: LocalityNone}, {Locality: LocalityLocalFirst}, nil} {
		s := Build(svc, sl, Config{Zones: cfg.Zones, TTL: 5, Shaping: sh})
		assert.False(t, s.LocalFirst())
		m, _ := ringReply(t, s, dbName, dns.TypeA, dns.MaxMsgSize, false)
		want, _ := s.zones[0].top.Records(dns.TypeA)
		assert.Equal(t, fmt.Sprint(want), fmt.Sprint(m.Answer))
		m, _ = ringReply(t, s, dbName, dns.TypeSRV, dns.MaxMsgSize, false)
		want, _ = s.zones[0].top.Records(dns.TypeSRV)
		assert.Equal(t, fmt.Sprint(want), fmt.Sprint(m.Answer))
	}
}

func TestTrafficDistributionFlipsDefault(t *testing.T) {
	svc, sl := shapedService([]string{"east", "west"}, 2, false)
	cfg := Config{Zones: []string{"clusterset.local."}, TTL: 5, Shaping: &Shaping{ClusterID: "west"}}
	assert.False(t, Build(svc, sl, cfg).LocalFirst(), "no trafficDistribution")
	for _, td := range []string{"PreferClose", "PreferSameZone", "PreferSameNode"} {
		svc.TrafficDistribution = td
		s := Build(svc, sl, cfg)
		assert.True(t, s.LocalFirst(), td)
		m, _ := ringReply(t, s, dbName, dns.TypeA, 512, false)
		assert.Equal(t, []string{"west-0", "west-1", "east-0", "east-1"}, hosts(t, s, m.Answer))
	}
	cfg.Shaping.Locality = LocalityNone
	assert.False(t, Build(svc, sl, cfg).LocalFirst(), "locality none wins")
	svc.TrafficDistribution = "Other"
	cfg.Shaping.Locality = LocalityDefault
	assert.False(t, Build(svc, sl, cfg).LocalFirst())
}

// TestRotation: with rotate, successive answers start one endpoint
// further within each group: every local endpoint comes first once in
// as many queries as there are, then the remote ones follow, rotated too.
func TestRotation(t *testing.T) {
	svc, sl := shapedService([]string{"east", "west"}, 5, false)
	for _, sh := range []*Shaping{{Rotate: true}, {ClusterID: "west", Locality: LocalityLocalFirst, Rotate: true}} {
		s := Build(svc, sl, Config{Zones: []string{"clusterset.local."}, TTL: 5, Shaping: sh})
		for _, qtype := range []uint16{dns.TypeA, dns.TypeSRV} {
			first := map[string]int{}
			var n int
			if s.LocalFirst() {
				n = 5
			} else {
				n = 10
			}
			for range n {
				m, _ := ringReply(t, s, dbName, qtype, dns.MaxMsgSize, false)
				h := hosts(t, s, m.Answer)
				require.Len(t, h, 10, "every endpoint, rotated")
				first[h[0]]++
				if s.LocalFirst() {
					assert.True(t, strings.HasPrefix(h[0], "west-") && strings.HasPrefix(h[4], "west-") && strings.HasPrefix(h[5], "east-"), "%v", h)
				}
				sorted := slices.Sorted(slices.Values(h))
				assert.Equal(t, slices.Compact(sorted), sorted, "no repeats")
			}
			assert.Len(t, first, n, "%v: every endpoint of the first group came first once", first)
		}
	}
}

// TestSubsetsFit: an answer that does not fit is the largest subset that
// does (one more endpoint would not), never with TC; A and AAAA of the
// same buffer name the same endpoints; max_answers caps them.
func TestSubsetsFit(t *testing.T) {
	svc, sl := shapedService([]string{"east", "west"}, 200, true)
	for _, sh := range []*Shaping{nil, {ClusterID: "west", Locality: LocalityLocalFirst}, {MaxAnswers: 7}} {
		s := Build(svc, sl, Config{Zones: []string{"clusterset.local."}, TTL: 5, Shaping: sh})
		for _, limit := range []int{512, 1232, 4096, dns.MaxMsgSize} {
			for _, edns := range []bool{false, true} {
				a, na := ringReply(t, s, dbName, dns.TypeA, limit, edns)
				aaaa, naaaa := ringReply(t, s, dbName, dns.TypeAAAA, limit, edns)
				for _, m := range []*dns.Msg{a, aaaa} {
					assert.False(t, m.Truncated)
					assert.NotEmpty(t, m.Answer)
				}
				assert.LessOrEqual(t, na, limit)
				assert.LessOrEqual(t, naaaa, limit)
				assert.Equal(t, hosts(t, s, a.Answer), hosts(t, s, aaaa.Answer), "A and AAAA name the same endpoints (limit %d)", limit)
				k := len(aaaa.Answer)
				switch {
				case sh != nil && sh.MaxAnswers > 0:
					assert.Equal(t, sh.MaxAnswers, k)
				case k < 400:
					assert.Greater(t, naaaa+28, limit, "one more would not fit")
				}
				if sh != nil && sh.ClusterID != "" {
					assert.True(t, strings.HasPrefix(hosts(t, s, a.Answer)[0], "west-"))
				}
			}
		}
		m, n := ringReply(t, s, dbName, dns.TypeSRV, 1232, true)
		assert.False(t, m.Truncated)
		assert.LessOrEqual(t, n, 1232)
		assert.Empty(t, m.Extra[:len(m.Extra)-1], "a subset carries no additional records (only OPT)")
	}
}

// TestBigServiceOverTCP: 5,000 endpoints do not fit a DNS message: an
// answer over TCP takes as many as fit 65,535 octets, without TC.
func TestBigServiceOverTCP(t *testing.T) {
	svc, sl := shapedService([]string{"east"}, 5000, false)
	s := Build(svc, sl, Config{Zones: []string{"clusterset.local."}, TTL: 5})
	m, n := ringReply(t, s, dbName, dns.TypeA, dns.MaxMsgSize, false)
	assert.False(t, m.Truncated)
	assert.LessOrEqual(t, n, dns.MaxMsgSize)
	assert.Len(t, m.Answer, (dns.MaxMsgSize-12-len(dbName)-1-4)/16)
	assert.Equal(t, 5000, s.Endpoints())
}

// mixedService is a headless service with n endpoints in each of the
// clusters: endpoint i has IPv4 and IPv6 addresses when i%3 is 0, IPv4
// only when 1, IPv6 only when 2.
func mixedService(clusters []string, n int) (*Service, []*Slice, map[string]bool) {
	svc := &Service{Namespace: "demo", Name: "db", Type: Headless, Ports: []Port{{Name: "pg", Protocol: "tcp", Port: 5432}}}
	var out []*Slice
	dual := map[string]bool{}
	for c, id := range clusters {
		v4 := &Slice{Name: id + "-v4", ClusterID: id}
		v6 := &Slice{Name: id + "-v6", ClusterID: id}
		for i := range n {
			host := fmt.Sprintf("%s-%d", id, i)
			if i%3 != 2 {
				v4.Endpoints = append(v4.Endpoints, Endpoint{Hostname: host,
					Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, byte(c + 1), byte(i >> 8), byte(i)})}})
			}
			if i%3 != 1 {
				v6.Endpoints = append(v6.Endpoints, Endpoint{Hostname: host,
					Addresses: []netip.Addr{netip.AddrFrom16([16]byte{0xfd, 0, 13: byte(c + 1), 14: byte(i >> 8), 15: byte(i)})}})
			}
			dual[host] = i%3 == 0
		}
		out = append(out, v4, v6)
	}
	return svc, out, dual
}

// TestMixedFamiliesSubsets: with endpoints of one family mixed in,
// local-first and rotating, an A and an AAAA answer of the same buffer,
// asked in turn, name the same dual-stack endpoints (in the same order),
// each as many of its own family's as fit, this cluster's first.
func TestMixedFamiliesSubsets(t *testing.T) {
	svc, sl, dual := mixedService([]string{"east", "west"}, 60)
	for _, sh := range []*Shaping{
		{ClusterID: "west", Locality: LocalityLocalFirst, Rotate: true},
		{ClusterID: "west", Locality: LocalityLocalFirst, Rotate: true, MaxAnswers: 25},
		{Rotate: true},
	} {
		s := Build(svc, sl, Config{Zones: []string{"clusterset.local."}, TTL: 5, Shaping: sh})
		for _, limit := range []int{512, 1232, 2000, dns.MaxMsgSize} {
			firsts := map[string]bool{}
			for round := range 45 {
				a, na := ringReply(t, s, dbName, dns.TypeA, limit, true)
				aaaa, naaaa := ringReply(t, s, dbName, dns.TypeAAAA, limit, true)
				ha, h6 := hosts(t, s, a.Answer), hosts(t, s, aaaa.Answer)
				require.NotEmpty(t, ha)
				require.NotEmpty(t, h6)
				assert.LessOrEqual(t, na, limit)
				assert.LessOrEqual(t, naaaa, limit)
				both := func(hs []string) (out []string) {
					for _, h := range hs {
						if dual[h] {
							out = append(out, h)
						}
					}
					return out
				}
				msg := fmt.Sprintf("%+v limit %d round %d:\nA    %v\nAAAA %v", *sh, limit, round, ha, h6)
				require.Equal(t, both(ha), both(h6), "the same dual-stack endpoints: "+msg)
				for _, h := range [][]string{ha, h6} {
					if sh.MaxAnswers > 0 {
						assert.LessOrEqual(t, len(h), sh.MaxAnswers, msg)
					}
					if sh.ClusterID != "" {
						// west's 40 A and 40 AAAA endpoints first.
						local := min(len(h), 40)
						for i, host := range h {
							assert.Equal(t, i < local, strings.HasPrefix(host, "west-"), msg)
						}
					}
					sorted := slices.Sorted(slices.Values(h))
					assert.Equal(t, slices.Compact(slices.Clone(sorted)), sorted, "no repeats: "+msg)
				}
				if limit == dns.MaxMsgSize && sh.MaxAnswers == 0 {
					assert.Len(t, ha, 80, "every IPv4 endpoint")
					assert.Len(t, h6, 80, "every IPv6 endpoint")
				}
				if limit == 512 {
					// Not every endpoint fits: one more record would not,
					// or the next endpoint of the family is dual-stack (and
					// its AAAA record did not fit the other answer).
					assert.Less(t, len(h6), 80)
				}
				firsts[ha[0]] = true
			}
			assert.Greater(t, len(firsts), 10, "rotation: %v", firsts)
		}
	}
}

package answers

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/util/validation"
)

// fuzzInput turns fuzz bytes into one import and its slices as they
// reach Build: names as internal/compact admits them (the longest labels
// and subdomains, names that make a per-endpoint name too long),
// duplicate and unready endpoints, both families, any addresses, ports
// with and without names, so that Build meets what a hostile or broken
// writer can put into the API.
type fuzzInput struct {
	b []byte
}

func (f *fuzzInput) byte() byte {
	if len(f.b) == 0 {
		return 0
	}
	c := f.b[0]
	f.b = f.b[1:]
	return c
}

func (f *fuzzInput) str(alphabet string) string {
	n := int(f.byte()) % 70
	var sb strings.Builder
	for range n {
		sb.WriteByte(alphabet[int(f.byte())%len(alphabet)])
	}
	return sb.String()
}

func (f *fuzzInput) addr() netip.Addr {
	if f.byte()%3 == 0 {
		var a [16]byte
		for i := range a {
			a[i] = f.byte()
		}
		return netip.AddrFrom16(a)
	}
	return netip.AddrFrom4([4]byte{10, f.byte(), f.byte(), f.byte()})
}

const labelChars = "abz09-."

func (f *fuzzInput) service() (*Service, []*Slice) {
	svc := &Service{Namespace: "demo", Name: "svc", Type: Type(1 + f.byte()%2)}
	for range f.byte() % 4 {
		svc.IPs = append(svc.IPs, f.addr())
	}
	for range f.byte() % 6 {
		// Port names and numbers pass the API's validation before Build
		// sees them (internal/compact): a DNS label, 1..65535.
		name := f.str("abz09-")
		if len(validation.IsDNS1123Label(name)) > 0 {
			name = ""
		}
		svc.Ports = append(svc.Ports, Port{Name: name, Protocol: []string{"tcp", "udp", "sctp"}[f.byte()%3], Port: 1 + uint16(f.byte())<<8 | uint16(f.byte())})
	}
	svc.EndpointsAbsent = f.byte()%16 == 0
	var out []*Slice
	for i := range f.byte() % 5 {
		// As internal/compact admits them: a slice whose cluster ID is no
		// DNS subdomain is rejected, a hostname that is no DNS label dropped.
		s := &Slice{Name: fmt.Sprintf("s%d", i), ClusterID: f.str(labelChars)}
		if len(validation.IsDNS1123Subdomain(s.ClusterID)) > 0 || slices.ContainsFunc(strings.Split(s.ClusterID, "."), func(l string) bool { return len(l) > 63 }) {
			s.ClusterID = "c" + strconv.Itoa(int(i))
		}
		for range f.byte() % 40 {
			ep := Endpoint{Hostname: f.str(labelChars)}
			ready := f.byte()%4 != 0 // compact keeps only ready endpoints
			if len(validation.IsDNS1123Label(ep.Hostname)) > 0 {
				ep.Hostname = ""
			}
			for range 1 + f.byte()%2 {
				ep.Addresses = append(ep.Addresses, f.addr())
			}
			if ready {
				s.Endpoints = append(s.Endpoints, ep)
			}
		}
		out = append(out, s)
	}
	return svc, out
}

// FuzzBuild: Build never panics, and every name it answers gives records
// that pack into a message, owned by names in the zone, with headless
// addresses only from ready endpoints.
func FuzzBuild(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 10, 1, 2, 3, 2, 4, 'h', 't', 't', 'p', 0, 0, 80, 1, 1, 4, 'e', 'a', 's', 't', 2, 3, 'd', 'b', '0', 1, 0, 5, 6, 7})
	f.Add([]byte{1, 0, 3, 4, 'h', 't', 't', 'p', 0, 0, 80, 1, 2, 3, 'a', '.', 'b', 5, 63, 'x', 1, 0, 1, 2, 3, 0, 'y', 1, 3, 4, 5, 6})
	f.Add([]byte(strings.Repeat("\x01\x02\x43", 200)))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzInput{b: data}
		svc, slices := in.service()
		cfg := Config{Zones: []string{"clusterset.local.", "example."}, TTL: 5}
		if len(data) > 0 && data[0]&1 == 1 {
			// Shaped: local-first for the first slice's cluster, rotated.
			sh := &Shaping{Locality: LocalityLocalFirst, Rotate: true, MaxAnswers: int(data[len(data)-1])}
			if len(slices) > 0 {
				sh.ClusterID = slices[0].ClusterID
			}
			cfg.Shaping = sh
		}
		s := Build(svc, slices, cfg)
		if s == nil {
			return
		}
		ready := map[netip.Addr]bool{}
		readyEndpoints := 0
		var prefixes []string
		for _, sl := range slices {
			for _, ep := range sl.Endpoints {
				readyEndpoints++
				for _, a := range ep.Addresses {
					ready[a.Unmap()] = true
				}
				prefixes = append(prefixes, strings.ToLower(ep.Hostname+"."+sl.ClusterID))
			}
			prefixes = append(prefixes, strings.ToLower(sl.ClusterID))
		}
		for _, p := range svc.Ports {
			prefixes = append(prefixes, "_"+p.Name+"._"+p.Protocol)
		}
		prefixes = append(prefixes, "")
		for z, zone := range cfg.Zones {
			for _, prefix := range prefixes {
				n := s.Lookup(z, prefix)
				if n == nil {
					continue
				}
				for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeTXT} {
					ans, extra := n.Records(qtype)
					checkRing(t, s, z, n, qtype, ans)
					m := new(dns.Msg)
					m.SetQuestion("svc.demo.svc."+zone, qtype)
					m.Answer, m.Extra = ans, extra
					if _, err := m.Pack(); err != nil {
						t.Fatalf("%q %s: records do not pack: %v", prefix, dns.TypeToString[qtype], err)
					}
					for _, rr := range append(ans, extra...) {
						if !dns.IsSubDomain(zone, rr.Header().Name) {
							t.Fatalf("%q: record %v outside %s", prefix, rr, zone)
						}
						if svc.Type != Headless {
							continue
						}
						var a netip.Addr
						switch r := rr.(type) {
						case *dns.A:
							a, _ = netip.AddrFromSlice(r.A.To4())
						case *dns.AAAA:
							a, _ = netip.AddrFromSlice(r.AAAA)
						default:
							continue
						}
						if !ready[a.Unmap()] {
							t.Fatalf("%q: %v is not the address of a ready endpoint", prefix, rr)
						}
					}
				}
			}
		}
		if s.Endpoints() > readyEndpoints {
			t.Fatalf("Endpoints() = %d, only %d ready endpoints", s.Endpoints(), readyEndpoints)
		}
		for _, p := range s.PTRs() {
			if _, ok := dns.IsDomainName(p.Reverse); !ok {
				t.Fatalf("PTR owner %q is not a name", p.Reverse)
			}
		}
	})
}

// checkRing checks the shaped replies of qtype at n for a few buffer
// sizes: they parse, fit, never set TC, and hold only records of the full
// answer all, each once.
func checkRing(t *testing.T, s *Set, z int, n *Node, qtype uint16, all []dns.RR) {
	ring := s.Ring(z, n, n.owner, qtype)
	if ring == nil {
		return
	}
	full := map[string]bool{}
	for _, rr := range all {
		full[strings.ToLower(rr.String())] = true
	}
	for _, limit := range []int{512, 1232, dns.MaxMsgSize} {
		q := new(dns.Msg)
		q.SetQuestion(n.owner, qtype)
		k, off, extra := ring.Choose(limit, false)
		b, ok := ring.AppendReply(nil, q, nil, k, off, extra)
		if !ok {
			if k > 0 {
				t.Fatalf("%s %s: no reply of %d units", n.owner, dns.TypeToString[qtype], k)
			}
			continue
		}
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil || len(b) > limit || m.Truncated || len(m.Answer) == 0 {
			t.Fatalf("%s %s limit %d: %d octets, TC %v, err %v", n.owner, dns.TypeToString[qtype], limit, len(b), m.Truncated, err)
		}
		seen := map[string]bool{}
		for _, rr := range m.Answer {
			if srv, ok := rr.(*dns.SRV); ok {
				srv.Priority = 0 // local-first priorities differ from Records'
			}
			r := strings.ToLower(rr.String())
			if !full[r] || seen[r] {
				t.Fatalf("%s %s: %v not in the full answer, or repeated", n.owner, dns.TypeToString[qtype], rr)
			}
			seen[r] = true
		}
	}
}

package mcs

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"testing"

	"github.com/coredns/coredns/plugin/metrics"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"

	"github.com/mcs-dns/mcs-dns/internal/answers"
)

// discard is a ResponseWriter that packs replies, as the server does
// before sending them, and drops them.
type discard struct{}

// passThrough is a writer some plugin before ours wrapped around the
// server's: the packed fast path does not apply behind it.
type passThrough struct{ dns.ResponseWriter }

var (
	benchLocal  net.Addr = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
	benchRemote net.Addr = &net.UDPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 40000}
)

func (discard) LocalAddr() net.Addr  { return benchLocal }
func (discard) RemoteAddr() net.Addr { return benchRemote }
func (discard) WriteMsg(m *dns.Msg) error {
	_, err := m.Pack()
	return err
}
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) Close() error                { return nil }
func (discard) TsigStatus() error           { return nil }
func (discard) TsigTimersOnly(bool)         {}
func (discard) Hijack()                     {}
func (discard) Network() string             { return "udp" }

// BenchmarkServeDNS measures the query path per kind of query: ServeDNS
// into a ResponseWriter that drops the reply; "packed" behind the
// server's ScrubWriter (the packed fast path where it applies), also
// behind the writers of two plugins before mcs, "msg" the dns.Msg path
// (what runs behind cache, log and the like).
func BenchmarkServeDNS(b *testing.B) {
	// The default max_udp_size (1232), below the queries' 4096-byte
	// buffer: the cap's cost is in every number.
	p := newTestMCSWith(b, &config{ttl: 5})
	cases := []struct {
		name  string
		qname string
		qtype uint16
	}{
		{"ClusterSetIP-A", "web.demo.svc.clusterset.local.", dns.TypeA},
		{"Headless-A", "db.demo.svc.clusterset.local.", dns.TypeA},
		{"PerEndpoint-A", "db-0.east.db.demo.svc.clusterset.local.", dns.TypeA},
		{"SRV", "_pg._tcp.db.demo.svc.clusterset.local.", dns.TypeSRV},
		{"NXDOMAIN", "nothere.demo.svc.clusterset.local.", dns.TypeA},
		{"PTR", "10.0.96.10.in-addr.arpa.", dns.TypePTR},
	}
	for _, c := range cases {
		for _, path := range []string{"packed", "packed-behind-prometheus", "msg"} {
			b.Run(c.name+"/"+path, func(b *testing.B) {
				m := new(dns.Msg)
				m.SetQuestion(c.qname, c.qtype)
				m.SetEdns0(4096, false)
				var w dns.ResponseWriter = request.NewScrubWriter(m, discard{})
				switch path {
				case "packed-behind-prometheus": // prometheus, then errors, as Corefiles order them
					w = front{}.wrap(front{}.wrap(metrics.NewRecorder(w)))
				case "msg":
					w = passThrough{w}
				}
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.ServeDNS(ctx, w, m); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkIndexUpdate measures one service's rebuild and publish with 100
// and with 10,000 other services published: the cost must not depend on
// the number of services.
func BenchmarkIndexUpdate(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			ix := answers.NewIndex(5)
			acfg := answers.Config{Zones: []string{"clusterset.local."}, TTL: 5}
			for i := range n {
				svc := &answers.Service{Namespace: fmt.Sprintf("ns%d", i%100), Name: fmt.Sprintf("svc%d", i), Type: answers.ClusterSetIP,
					IPs:   addrs(fmt.Sprintf("10.%d.%d.%d", 100+i>>16&63, i>>8&255, i&255)),
					Ports: []answers.Port{{Name: "http", Protocol: "tcp", Port: 80}}}
				ix.Put(svc.Key(), answers.Build(svc, nil, acfg))
			}
			f := fixture()[3] // the headless db service
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				set := answers.Build(f.svc, f.slices, acfg)
				if i%2 == 1 {
					set = nil
				}
				ix.Put(f.svc.Key(), set)
				i++
			}
		})
	}
}

// benchRegions are the regions of the shaping benchmark's clusters: with
// north's ID and region, three tiers (north, east, west).
var benchRegions = map[string]string{"east": "eu", "north": "eu", "west": "us"}

// shapingMCS is a plugin answering headless services of 50, 500 and
// 5,000 ready endpoints (hostnames, IPv4, in three clusters, one of them
// this one, regions benchRegions) and the fixture, with answers shaped
// by sh.
func shapingMCS(b testing.TB, sh *answers.Shaping) *MCS {
	p := newMCS(&config{zones: []string{"clusterset.local."}, ttl: 5}, nil)
	acfg := answers.Config{Zones: p.cfg.forwardZones(), TTL: 5, Shaping: sh}
	for _, f := range fixture() {
		p.index.Put(f.svc.Key(), answers.Build(f.svc, f.slices, acfg))
	}
	for _, n := range []int{50, 500, 5000} {
		svc := &answers.Service{Namespace: "demo", Name: fmt.Sprintf("hl%d", n), Type: answers.Headless,
			Ports: []answers.Port{{Name: "http", Protocol: "tcp", Port: 80}}}
		var sl []*answers.Slice
		for c, id := range []string{"east", "north", "west"} {
			s := &answers.Slice{Name: id, ClusterID: id, Region: benchRegions[id]}
			for i := c; i < n; i += 3 {
				s.Endpoints = append(s.Endpoints, readyEP(fmt.Sprintf("pod-%d", i), fmt.Sprintf("10.%d.%d.%d", 100+c, i>>8, i&255)))
			}
			sl = append(sl, s)
		}
		p.index.Put(svc.Key(), answers.Build(svc, sl, acfg))
	}
	// mixed500: 500 endpoints in three clusters, a third with IPv4 and
	// IPv6, a third IPv4 only, a third IPv6 only (paired rings with
	// endpoints of one family).
	svc := &answers.Service{Namespace: "demo", Name: "mixed500", Type: answers.Headless,
		Ports: []answers.Port{{Name: "http", Protocol: "tcp", Port: 80}}}
	var sl []*answers.Slice
	for c, id := range []string{"east", "north", "west"} {
		s := &answers.Slice{Name: id, ClusterID: id, Region: benchRegions[id]}
		for i := c; i < 500; i += 3 {
			var ips []string
			if i%3 != 2 {
				ips = append(ips, fmt.Sprintf("10.%d.%d.%d", 110+c, i>>8, i&255))
			}
			if i%3 != 1 {
				ips = append(ips, fmt.Sprintf("fd00::%d:%d", 110+c, i))
			}
			s.Endpoints = append(s.Endpoints, readyEP(fmt.Sprintf("pod-%d", i), ips...))
		}
		sl = append(sl, s)
	}
	p.index.Put(svc.Key(), answers.Build(svc, sl, acfg))
	return p
}

// BenchmarkShaping measures headless answers with each shaping option on
// and off (same binary, same run), and headless services of 50, 500 and
// 5,000 ready endpoints, over UDP with a 1232- and a 4096-octet buffer
// and over TCP, on the packed path.
func BenchmarkShaping(b *testing.B) {
	options := []struct {
		name string
		sh   *answers.Shaping
	}{
		{"off", nil},
		{"local-first", &answers.Shaping{ClusterID: "north", Locality: answers.LocalityLocalFirst}},
		// Three tiers populated: north local, east in its region, west other.
		{"tiers", &answers.Shaping{ClusterID: "north", Region: "eu", Locality: answers.LocalityLocalFirst}},
		{"rotate", &answers.Shaping{Rotate: true}},
		{"max_answers=20", &answers.Shaping{MaxAnswers: 20}},
		{"all", &answers.Shaping{ClusterID: "north", Locality: answers.LocalityLocalFirst, Rotate: true, MaxAnswers: 20}},
	}
	cases := []struct {
		name  string
		qname string
		qtype uint16
	}{
		{"Headless-A", "db.demo.svc.clusterset.local.", dns.TypeA},
		{"Headless-SRV", "_pg._tcp.db.demo.svc.clusterset.local.", dns.TypeSRV},
		{"ClusterSetIP-A", "web.demo.svc.clusterset.local.", dns.TypeA},
		{"hl50-A", "hl50.demo.svc.clusterset.local.", dns.TypeA},
		{"hl500-A", "hl500.demo.svc.clusterset.local.", dns.TypeA},
		{"hl5000-A", "hl5000.demo.svc.clusterset.local.", dns.TypeA},
		{"hl50-SRV", "_http._tcp.hl50.demo.svc.clusterset.local.", dns.TypeSRV},
		{"hl5000-SRV", "_http._tcp.hl5000.demo.svc.clusterset.local.", dns.TypeSRV},
		{"mixed500-A", "mixed500.demo.svc.clusterset.local.", dns.TypeA},
		{"mixed500-AAAA", "mixed500.demo.svc.clusterset.local.", dns.TypeAAAA},
	}
	for _, o := range options {
		p := shapingMCS(b, o.sh)
		for _, c := range cases {
			for _, tr := range []string{"udp1232", "udp4096", "tcp"} {
				b.Run(o.name+"/"+c.name+"/"+tr, func(b *testing.B) {
					m := new(dns.Msg)
					m.SetQuestion(c.qname, c.qtype)
					var w dns.ResponseWriter
					switch tr {
					case "udp1232":
						m.SetEdns0(1232, false)
						w = request.NewScrubWriter(m, discard{})
					case "udp4096":
						m.SetEdns0(4096, false)
						w = request.NewScrubWriter(m, discard{})
					default:
						w = request.NewScrubWriter(m, discardTCP{})
					}
					ctx := context.Background()
					if _, err := p.ServeDNS(ctx, w, m); err != nil { // packs the reply
						b.Fatal(err)
					}
					runtime.GC() // not the garbage of building the services
					b.ReportAllocs()
					for b.Loop() {
						if _, err := p.ServeDNS(ctx, w, m); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// discardTCP is discard over TCP.
type discardTCP struct{ discard }

// benchRemoteTCP is allocated once, as benchRemote: a new address per
// call would count as allocations of the query path.
var benchRemoteTCP net.Addr = &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 40000}

func (discardTCP) Network() string      { return "tcp" }
func (discardTCP) RemoteAddr() net.Addr { return benchRemoteTCP }

// captured is discard that keeps a copy of the last reply, packed.
type captured struct {
	discard
	last []byte
}

func (c *captured) WriteMsg(m *dns.Msg) error {
	b, err := m.Pack()
	c.last = b
	return err
}

func (c *captured) Write(b []byte) (int, error) {
	c.last = append(c.last[:0], b...)
	return len(b), nil
}

// BenchmarkUDPCap runs the same UDP queries, with the largest EDNS0
// buffer a client can claim (65,535), side by side under the default
// max_udp_size 1232 and under 65535 (the client's buffer decides): what
// the cap costs on the query path. hl200 is a headless service of 200
// ready endpoints whose A and SRV answers are far over 1232 octets: the
// setup checks that under the cap its reply is at most 1232 octets and
// truncated (TC) or cut, and over 1232 octets without it, so that the
// numbers are those of the capped path.
func BenchmarkUDPCap(b *testing.B) {
	const endpoints = 200
	for _, maxUDP := range []int{DefaultMaxUDPSize, 65535} {
		p := newTestMCSWith(b, &config{ttl: 5, maxUDP: maxUDP})
		svc := &answers.Service{Namespace: "demo", Name: "hl200", Type: answers.Headless,
			Ports: []answers.Port{{Name: "http", Protocol: "tcp", Port: 80}}}
		s := &answers.Slice{Name: "east", ClusterID: "east"}
		for i := range endpoints {
			s.Endpoints = append(s.Endpoints, readyEP(fmt.Sprintf("pod-%d", i), fmt.Sprintf("10.200.%d.%d", i>>8, i&255)))
		}
		p.index.Put(svc.Key(), answers.Build(svc, []*answers.Slice{s}, answers.Config{Zones: p.cfg.forwardZones(), TTL: 5}))
		for _, c := range []struct {
			name  string
			qname string
			qtype uint16
			big   bool
		}{
			{"ClusterSetIP-A", "web.demo.svc.clusterset.local.", dns.TypeA, false},
			{"Headless200-A", "hl200.demo.svc.clusterset.local.", dns.TypeA, true},
			{"Headless200-SRV", "_http._tcp.hl200.demo.svc.clusterset.local.", dns.TypeSRV, true},
		} {
			b.Run(fmt.Sprintf("max_udp_size=%d/%s", maxUDP, c.name), func(b *testing.B) {
				m := new(dns.Msg)
				m.SetQuestion(c.qname, c.qtype)
				m.SetEdns0(dns.MaxMsgSize, false)
				ctx := context.Background()
				cw := &captured{}
				if _, err := p.ServeDNS(ctx, request.NewScrubWriter(m, cw), m); err != nil {
					b.Fatal(err)
				}
				r := new(dns.Msg)
				if err := r.Unpack(cw.last); err != nil {
					b.Fatal(err)
				}
				switch {
				case !c.big:
				case maxUDP == DefaultMaxUDPSize && len(cw.last) > DefaultMaxUDPSize:
					b.Fatalf("capped reply of %d octets", len(cw.last))
				case maxUDP == DefaultMaxUDPSize && !r.Truncated && len(r.Answer) >= endpoints:
					b.Fatalf("capped reply neither truncated nor cut: %d answers", len(r.Answer))
				case maxUDP != DefaultMaxUDPSize && (len(cw.last) <= DefaultMaxUDPSize || len(r.Answer) != endpoints):
					b.Fatalf("uncapped reply of %d octets, %d answers: the fixture does not exceed the cap", len(cw.last), len(r.Answer))
				}
				w := request.NewScrubWriter(m, discard{})
				runtime.GC()
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.ServeDNS(ctx, w, m); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(cw.last)), "reply-octets")
				b.ReportMetric(float64(len(r.Answer)), "answers")
			})
		}
	}
}

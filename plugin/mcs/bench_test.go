package mcs

import (
	"context"
	"fmt"
	"net"
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
	p := newTestMCS(b)
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

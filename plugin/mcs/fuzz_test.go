package mcs

import (
	"context"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
)

// FuzzServeDNS sends arbitrary names and types through the whole query
// path: it must never panic, always answer for names in its zones, and
// every reply must pack (a reply that cannot be packed never reaches the
// client).
func FuzzServeDNS(f *testing.F) {
	for _, s := range []string{
		"web.demo.svc.clusterset.local.", "DB-0.East.db.demo.svc.clusterset.local.", "_pg._tcp.db.demo.svc.clusterset.local.",
		"west.eu.db.demo.svc.clusterset.local.", "10.0.96.10.in-addr.arpa.", "a\\.b.demo.svc.clusterset.local.",
		"clusterset.local.", "in-addr.arpa.", "x.", ".",
	} {
		f.Add(s, uint16(dns.TypeA))
		f.Add(s, uint16(dns.TypeSRV))
		f.Add(s, uint16(dns.TypePTR))
	}
	f.Add("5.0.1.10.in-addr.arpa.", uint16(dns.TypePTR))
	f.Add("7.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", uint16(dns.TypePTR))
	p := newTestMCS(f)
	p.Next = test.NextHandler(dns.RcodeRefused, nil)
	f.Fuzz(func(t *testing.T, name string, qtype uint16) {
		if _, ok := dns.IsDomainName(name); !ok || !dns.IsFqdn(name) {
			return
		}
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		if _, err := p.ServeDNS(context.Background(), rec, m); err != nil {
			t.Fatal(err)
		}
		if rec.Msg != nil {
			if _, err := rec.Msg.Pack(); err != nil {
				t.Fatalf("%s %d: reply does not pack: %v", name, qtype, err)
			}
		}
		// The same query behind the server's own writer, where replies
		// may be written as packed bytes: they must parse and say what
		// the dns.Msg path says.
		w := &wire{}
		if _, err := p.ServeDNS(context.Background(), request.NewScrubWriter(m, w), m); err != nil {
			t.Fatal(err)
		}
		if w.raw == nil {
			return
		}
		got := new(dns.Msg)
		if err := got.Unpack(w.raw); err != nil {
			t.Fatalf("%s %d: packed reply does not parse: %v", name, qtype, err)
		}
		want := rec.Msg
		switch {
		case want == nil:
			t.Fatalf("%s %d: packed reply where the dns.Msg path wrote none", name, qtype)
		case got.Id != m.Id || got.Rcode != want.Rcode || got.Truncated:
			t.Fatalf("%s %d: header %+v, want %+v", name, qtype, got.MsgHdr, want.MsgHdr)
		case len(got.Question) != 1 || got.Question[0] != asParsed(t, m).Question[0]:
			t.Fatalf("%s %d: question %v", name, qtype, got.Question)
		case !want.Truncated && (len(got.Answer) != len(want.Answer) || len(got.Ns) != len(want.Ns)):
			t.Fatalf("%s %d: %d answers, %d authority; want %d, %d", name, qtype, len(got.Answer), len(got.Ns), len(want.Answer), len(want.Ns))
		}
	})
}

// asParsed returns m as a client reads it: packed and parsed again (names
// come back with escapes for octets such as spaces).
func asParsed(t *testing.T, m *dns.Msg) *dns.Msg {
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	out := new(dns.Msg)
	if err := out.Unpack(b); err != nil {
		t.Fatal(err)
	}
	return out
}

package mcs

import (
	"context"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
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
	}
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
	})
}

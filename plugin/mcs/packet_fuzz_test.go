package mcs

import (
	"context"
	"testing"

	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
)

// FuzzServeDNSPacket sends raw packets through the handler as CoreDNS's
// server does: whatever miekg/dns parses (any header flags, opcode,
// class, EDNS0 options, extra records) reaches ServeDNS behind the
// server's ScrubWriter, over UDP or TCP. It must never panic, and every
// reply, written as bytes or as a message, must parse, carry the query's
// ID and echo its question.
func FuzzServeDNSPacket(f *testing.F) {
	seed := func(name string, qtype uint16, edns uint16, opts ...dns.EDNS0) {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		if edns > 0 {
			m.SetEdns0(edns, true)
			m.IsEdns0().Option = append(m.IsEdns0().Option, opts...)
		}
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
	seed("web.demo.svc.clusterset.local.", dns.TypeA, 0)
	seed("db.demo.svc.clusterset.local.", dns.TypeA, 512)
	seed("db.demo.svc.clusterset.local.", dns.TypeSRV, 4096, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
	seed("_pg._tcp.db.demo.svc.clusterset.local.", dns.TypeSRV, 1232, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
	seed("10.0.96.10.in-addr.arpa.", dns.TypePTR, 1232)
	seed("clusterset.local.", dns.TypeSOA, 1232, &dns.EDNS0_PADDING{Padding: make([]byte, 8)})
	seed("nothere.demo.svc.clusterset.local.", dns.TypeANY, 65535)
	p := newTestMCS(f)
	p.Next = test.NextHandler(dns.RcodeRefused, nil)
	f.Fuzz(func(t *testing.T, packet []byte, tcp bool) {
		q := new(dns.Msg)
		if q.Unpack(packet) != nil || len(q.Question) == 0 || q.Response {
			return // the server answers these itself (FORMERR, SERVFAIL) or drops them
		}
		w := &wire{ResponseWriter: test.ResponseWriter{TCP: tcp}}
		if _, err := p.ServeDNS(context.Background(), request.NewScrubWriter(q, w), q); err != nil {
			t.Fatal(err)
		}
		var reply *dns.Msg
		switch {
		case w.raw != nil:
			reply = new(dns.Msg)
			if err := reply.Unpack(w.raw); err != nil {
				t.Fatalf("packed reply does not parse: %v", err)
			}
			if !tcp && len(w.raw) > max(dns.MinMsgSize, udpSize(q)) {
				t.Fatalf("UDP reply of %d bytes for a client buffer of %d", len(w.raw), udpSize(q))
			}
		case w.msg != nil:
			if _, err := w.msg.Pack(); err != nil {
				t.Fatalf("reply does not pack: %v", err)
			}
			reply = w.msg
		default:
			return // not written: the server answers with the rcode
		}
		if reply.Id != q.Id || !reply.Response {
			t.Fatalf("reply header %+v for query %d", reply.MsgHdr, q.Id)
		}
		if len(reply.Question) != 1 || !dns.IsSubDomain(reply.Question[0].Name, q.Question[0].Name) || !dns.IsSubDomain(q.Question[0].Name, reply.Question[0].Name) {
			t.Fatalf("reply question %v for %v", reply.Question, q.Question)
		}
	})
}

func udpSize(q *dns.Msg) int {
	if o := q.IsEdns0(); o != nil {
		return int(o.UDPSize())
	}
	return dns.MinMsgSize
}

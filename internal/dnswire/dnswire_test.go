package dnswire

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every exported function is fuzzed against miekg/dns: the bytes it
// writes are those dns.Msg.Pack writes for the same message, or, where
// name compression or the case of compressed owner names legitimately
// differs, the same message once unpacked. The seeds are representative
// cases, so plain `go test` checks them too.

// fuzzName makes a fully qualified, escape-free, lower-case name of at
// most 254 characters from arbitrary input, or "" when it cannot.
func fuzzName(s string) string {
	var b strings.Builder
	label := 0
	for i := 0; i < len(s) && b.Len() < 200; i++ {
		c := lower(s[i])
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			if label == 63 {
				b.WriteByte('.')
				label = 0
			}
			b.WriteByte(c)
			label++
		case c == '.' && label > 0:
			b.WriteByte('.')
			label = 0
		}
	}
	if b.Len() == 0 {
		return ""
	}
	if label > 0 {
		b.WriteByte('.')
	}
	return b.String()
}

// mixCase upper-cases the letters of s whose bit in mask is set (cycling).
func mixCase(s string, mask uint64) string {
	b := []byte(s)
	for i := range b {
		if mask>>(i%64)&1 == 1 && b[i] >= 'a' && b[i] <= 'z' {
			b[i] -= 'a' - 'A'
		}
	}
	return string(b)
}

// query is the query the fuzz targets answer.
type query struct {
	id       uint16
	rd, cd   bool
	ednsSize uint16 // with edns
	ednsTTL  uint32
	edns     bool
}

func (q query) msg(name string, qtype uint16) *dns.Msg {
	r := new(dns.Msg)
	r.SetQuestion(name, qtype)
	r.Id, r.RecursionDesired, r.CheckingDisabled = q.id, q.rd, q.cd
	if q.edns {
		r.Extra = []dns.RR{&dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT, Class: q.ednsSize, Ttl: q.ednsTTL}}}
	}
	return r
}

// opt is the query's OPT record, a copy (request.SizeAndDo modifies it).
func opt(r *dns.Msg) *dns.OPT {
	o := r.IsEdns0()
	if o == nil {
		return nil
	}
	c := *o
	return &c
}

// flagsQuery decodes fuzz input into a query.
func flagsQuery(id uint16, flags uint8, ednsSize uint16, ednsTTL uint32) query {
	return query{id: id, rd: flags&1 != 0, cd: flags&2 != 0, edns: flags&4 != 0, ednsSize: ednsSize, ednsTTL: ednsTTL}
}

// reply is what the dns.Msg path sends for r: SetRcode, AA, the given
// sections and the OPT record as CoreDNS's request.SizeAndDo makes it.
func reply(r *dns.Msg, rcode int, answer, ns, extra []dns.RR) *dns.Msg {
	m := new(dns.Msg)
	m.SetRcode(r, rcode)
	m.Authoritative = true
	m.Answer, m.Ns, m.Extra = answer, ns, append([]dns.RR(nil), extra...)
	req := r.Copy()
	req.Extra = nil
	if o := opt(r); o != nil {
		req.Extra = []dns.RR{o}
	}
	(&request.Request{Req: req}).SizeAndDo(m)
	return m
}

// sameMessage fails unless got, unpacked, is want: the header and the
// question exactly, the records up to the case of their names (a
// compressed owner name echoes the case of the question it points into).
func sameMessage(t *testing.T, want *dns.Msg, got []byte) {
	t.Helper()
	wantWire, err := want.Pack()
	require.NoError(t, err)
	w := new(dns.Msg)
	require.NoError(t, w.Unpack(wantWire))
	g := new(dns.Msg)
	require.NoError(t, g.Unpack(got), "%x", got)
	require.Equal(t, w.MsgHdr, g.MsgHdr)
	require.Equal(t, w.Question, g.Question)
	for _, sec := range [][2][]dns.RR{{w.Answer, g.Answer}, {w.Ns, g.Ns}, {w.Extra, g.Extra}} {
		require.Equal(t, lowerRRs(sec[0]), lowerRRs(sec[1]))
	}
}

func lowerRRs(rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = strings.ToLower(rr.String())
	}
	return out
}

// records makes an answer of n records of qtype at owner, and for SRV the
// targets' addresses as extra records.
func records(owner string, qtype uint16, n int, seed uint32) (answer, extra []dns.RR) {
	hdr := dns.RR_Header{Name: owner, Rrtype: qtype, Class: dns.ClassINET, Ttl: seed % 3600}
	for i := range n {
		v := seed + uint32(i)*7919 // #nosec G115 -- test data
		switch qtype {
		case dns.TypeA:
			answer = append(answer, &dns.A{Hdr: hdr, A: netip.AddrFrom4([4]byte{10, byte(v >> 16), byte(v >> 8), byte(v)}).AsSlice()})
		case dns.TypeAAAA:
			answer = append(answer, &dns.AAAA{Hdr: hdr, AAAA: netip.AddrFrom16([16]byte{0xfd, 0, 15: byte(v), 14: byte(v >> 8)}).AsSlice()})
		case dns.TypeSRV:
			target := fmt.Sprintf("h%d.%s", i, owner)
			if i%3 == 2 {
				target = fmt.Sprintf("h%d.other.example.", i)
			}
			answer = append(answer, &dns.SRV{Hdr: hdr, Weight: uint16(100 / n), Port: uint16(v), Target: target}) // #nosec G115 -- test data
			extra = append(extra, &dns.A{Hdr: dns.RR_Header{Name: target, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: hdr.Ttl},
				A: netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)}).AsSlice()})
		}
	}
	return answer, extra
}

var fuzzTypes = [...]uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV}

// FuzzNewTemplate: a template is miekg's packing of its reply, byte for
// byte: Full with the additional section, Short without.
func FuzzNewTemplate(f *testing.F) {
	f.Add("web.demo.svc.clusterset.local.", uint8(0), uint8(1), uint32(5))
	f.Add("db.demo.svc.clusterset.local.", uint8(1), uint8(4), uint32(30))
	f.Add("_http._tcp.db.demo.svc.clusterset.local.", uint8(2), uint8(12), uint32(7))
	f.Add("big.demo.svc.clusterset.local.", uint8(0), uint8(255), uint32(1))
	f.Add(strings.Repeat("x", 63)+"."+strings.Repeat("y", 63)+"."+strings.Repeat("z", 63)+".local.", uint8(2), uint8(40), uint32(9))
	f.Add(`a\.b.example.`, uint8(0), uint8(1), uint32(3))
	f.Fuzz(func(t *testing.T, rawName string, typ, n uint8, seed uint32) {
		name := fuzzName(rawName)
		if strings.Contains(rawName, `\`) {
			if _, ok := dns.IsDomainName(rawName); ok && dns.IsFqdn(rawName) {
				name = strings.ToLower(rawName)
			}
		}
		if name == "" {
			return
		}
		qtype := fuzzTypes[int(typ)%len(fuzzTypes)]
		answer, extra := records(name, qtype, int(n), seed)
		tmpl := NewTemplate(name, qtype, answer, extra)
		m := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true, Authoritative: true}, Compress: true,
			Question: []dns.Question{{Name: name, Qtype: qtype, Qclass: dns.ClassINET}}, Answer: answer}
		short, err := m.Pack()
		if err != nil || len(short) > dns.MaxMsgSize || strings.Contains(name, `\`) {
			require.Nil(t, tmpl, "a reply miekg cannot pack, or a name with escapes")
			return
		}
		require.NotNil(t, tmpl)
		assert.Equal(t, name, tmpl.Name)
		m.Extra = extra
		full, err := m.Pack()
		if len(extra) > 0 && err == nil && len(full) > len(short) && len(full) <= dns.MaxMsgSize {
			assert.Equal(t, full, tmpl.Full)
			assert.Equal(t, short, tmpl.Short)
		} else {
			assert.Equal(t, short, tmpl.Full)
			assert.Nil(t, tmpl.Short)
		}
	})
}

// FuzzAppendReply: a template patched for a query is the dns.Msg path's
// reply to it (the Full one when it fits the limit, else the Short one),
// and a query it cannot answer gets nothing.
func FuzzAppendReply(f *testing.F) {
	f.Add("web.demo.svc.clusterset.local.", "WEB.Demo.svc.clusterset.local.", uint8(0), uint8(1), uint16(0xbeef), uint8(0), uint16(0), uint32(0), uint16(512))
	f.Add("db.demo.svc.clusterset.local.", "db.demo.svc.clusterset.local.", uint8(1), uint8(3), uint16(1), uint8(7), uint16(1232), uint32(0x8000), uint16(1232))
	f.Add("_http._tcp.db.demo.svc.clusterset.local.", "_HTTP._tcp.db.demo.svc.clusterset.local.", uint8(2), uint8(8), uint16(2), uint8(4), uint16(4096), uint32(0xffffffff), uint16(4096))
	f.Add("_http._tcp.db.demo.svc.clusterset.local.", "_http._tcp.db.demo.svc.clusterset.local.", uint8(2), uint8(8), uint16(3), uint8(0), uint16(0), uint32(0), uint16(300)) // Short only
	f.Add("big.demo.svc.clusterset.local.", "big.demo.svc.clusterset.local.", uint8(0), uint8(200), uint16(4), uint8(4), uint16(512), uint32(0), uint16(512))                 // fits nowhere
	f.Add("db.demo.svc.clusterset.local.", "dc.demo.svc.clusterset.local.", uint8(0), uint8(1), uint16(5), uint8(0), uint16(0), uint32(0), uint16(512))                       // another name
	f.Add("db.demo.svc.clusterset.local.", "d\\098.demo.svc.clusterset.local.", uint8(0), uint8(1), uint16(6), uint8(0), uint16(0), uint32(0), uint16(512))                   // escapes
	f.Add("db.demo.svc.clusterset.local.", "db.demo.svc.clusterset.local", uint8(0), uint8(1), uint16(7), uint8(0), uint16(0), uint32(0), uint16(512))                        // not fully qualified
	f.Fuzz(func(t *testing.T, rawName, qname string, typ, n uint8, id uint16, flags uint8, ednsSize uint16, ednsTTL uint32, limit uint16) {
		name := fuzzName(rawName)
		if name == "" {
			return
		}
		qtype := fuzzTypes[int(typ)%len(fuzzTypes)]
		answer, extra := records(name, qtype, int(n), 0)
		tmpl := NewTemplate(name, qtype, answer, extra)
		if tmpl == nil {
			return
		}
		q := flagsQuery(id, flags, ednsSize, ednsTTL)
		r := q.msg(qname, qtype)
		if flags&8 != 0 {
			r.Opcode = dns.OpcodeNotify
		}
		prefix := []byte{0xde, 0xad}
		got, ok := tmpl.AppendReply(prefix, r, opt(r), int(limit))
		require.Equal(t, []byte{0xde, 0xad}, got[:2], "appends")
		if !ok {
			require.Len(t, got, 2, "appends nothing when it fails")
			if strings.ToLower(qname) == name && !strings.Contains(qname, `\`) && r.Opcode == dns.OpcodeQuery {
				// Only a limit neither template fits explains it.
				_, ok := tmpl.AppendReply(nil, r, opt(r), dns.MaxMsgSize+optLen)
				require.True(t, ok, "the limit is the only reason")
				min := len(tmpl.Full)
				if tmpl.Short != nil {
					min = len(tmpl.Short)
				}
				if r.IsEdns0() != nil {
					min += optLen
				}
				require.Greater(t, min, int(limit))
			}
			return
		}
		got = got[2:]
		require.Equal(t, name, strings.ToLower(qname), "answers its own name only")
		require.Equal(t, dns.OpcodeQuery, r.Opcode)
		require.LessOrEqual(t, len(got), int(limit))
		want := answer
		o := 0
		if r.IsEdns0() != nil {
			o = optLen
		}
		full := len(tmpl.Full)+o <= int(limit)
		var wantExtra []dns.RR
		if full && tmpl.Short != nil {
			wantExtra = extra
		}
		if full {
			require.Len(t, got, len(tmpl.Full)+o, "the Full template when it fits")
		} else {
			require.Len(t, got, len(tmpl.Short)+o)
		}
		sameMessage(t, reply(r, dns.RcodeSuccess, want, nil, wantExtra), got)
		if qname == name {
			// Nothing to echo but the ID and flags: the bytes are miekg's.
			m := reply(r, dns.RcodeSuccess, want, nil, wantExtra)
			m.Compress = true
			b, err := m.Pack()
			require.NoError(t, err)
			require.Equal(t, b, got)
		}
	})
}

// FuzzNewSOATail: the tail is miekg's packing of the SOA record, after
// the owner name, with serial 0.
func FuzzNewSOATail(f *testing.F) {
	f.Add("clusterset.local.", "ns.dns.clusterset.local.", "hostmaster.clusterset.local.", uint32(5), uint32(7200), uint32(1800), uint32(86400))
	f.Add(".", "ns.dns.", "hostmaster.", uint32(0), uint32(1), uint32(2), uint32(3))
	f.Add("in-addr.arpa.", "a\\.b.example.", "c\\032d.example.", uint32(30), uint32(0), uint32(0), uint32(0))
	f.Add("x.", "not-qualified", "y.", uint32(1), uint32(1), uint32(1), uint32(1))
	f.Fuzz(func(t *testing.T, owner, ns, mbox string, ttl, refresh, retry, expire uint32) {
		if _, ok := dns.IsDomainName(owner); !ok || !dns.IsFqdn(owner) || strings.Contains(owner, `\`) {
			return
		}
		soa := &dns.SOA{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
			Ns: ns, Mbox: mbox, Refresh: refresh, Retry: retry, Expire: expire, Minttl: ttl}
		tail, err := NewSOATail(soa)
		buf := make([]byte, 1024)
		end, perr := dns.PackRR(soa, buf, 0, nil, false)
		if perr != nil {
			require.Error(t, err, "miekg cannot pack it either")
			return
		}
		require.NoError(t, err)
		ownerLen, err := dns.PackDomainName(owner, make([]byte, 256), 0, nil, false)
		require.NoError(t, err)
		require.Equal(t, buf[ownerLen:end], tail.b)
	})
}

// FuzzAppendNegative: a negative reply is the dns.Msg path's: the query's
// header and question, the zone's SOA in the authority section, the OPT
// record; nothing for a name outside the zone.
func FuzzAppendNegative(f *testing.F) {
	f.Add("nothere.demo.svc.clusterset.local.", "clusterset.local.", uint16(1), uint8(0), uint16(0), uint32(0), 3, uint32(1700000000), uint64(0))
	f.Add("NotHere.Demo.svc.ClusterSet.local.", "clusterset.local.", uint16(2), uint8(7), uint16(1232), uint32(0x8000), 0, uint32(1), uint64(0))
	f.Add("clusterset.local.", "clusterset.local.", uint16(3), uint8(4), uint16(4096), uint32(0xffff), 0, uint32(2), uint64(0))
	f.Add("9.9.9.9.in-addr.arpa.", "in-addr.arpa.", uint16(4), uint8(1), uint16(0), uint32(0), 3, uint32(3), uint64(0))
	f.Add("anything.", ".", uint16(5), uint8(0), uint16(0), uint32(0), 3, uint32(4), uint64(0))
	f.Add("nope.example.", "clusterset.local.", uint16(6), uint8(0), uint16(0), uint32(0), 3, uint32(5), uint64(0))
	f.Add("xclusterset.local.", "clusterset.local.", uint16(7), uint8(0), uint16(0), uint32(0), 3, uint32(6), uint64(0))
	f.Add("a\\.b.clusterset.local.", "clusterset.local.", uint16(8), uint8(0), uint16(0), uint32(0), 3, uint32(7), uint64(0))
	f.Fuzz(func(t *testing.T, qname, rawZone string, id uint16, flags uint8, ednsSize uint16, ednsTTL uint32, rcode int, serial uint32, mask uint64) {
		zone := "."
		if rawZone != "." {
			if zone = fuzzName(rawZone); zone == "" {
				return
			}
		}
		soa := &dns.SOA{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 5},
			Ns: "ns.dns." + strings.TrimPrefix(zone, "."), Mbox: "hostmaster." + strings.TrimPrefix(zone, "."),
			Serial: serial, Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: 5}
		tail, err := NewSOATail(soa)
		if err != nil {
			return
		}
		qname = mixCase(qname, mask)
		r := flagsQuery(id, flags, ednsSize, ednsTTL).msg(qname, dns.TypeA)
		got, ok := AppendNegative([]byte{1}, r, zone, rcode, tail, serial, opt(r))
		require.Equal(t, byte(1), got[0])
		_, valid := dns.IsDomainName(qname)
		valid = valid && dns.IsFqdn(qname) && !strings.Contains(qname, `\`) && len(qname) <= 254
		if !ok {
			require.Len(t, got, 1)
			require.False(t, valid && rcode >= 0 && rcode <= 15 && inZoneRef(qname, zone), "%q in %q, rcode %d", qname, zone, rcode)
			return
		}
		require.True(t, valid, "%q", qname)
		require.True(t, inZoneRef(qname, zone), "%q in %q", qname, zone)
		require.LessOrEqual(t, len(got)-1, dns.MinMsgSize)
		sameMessage(t, reply(r, rcode, nil, []dns.RR{soa}, nil), got[1:])
	})
}

// inZoneRef is dns.IsSubDomain, the reference for inZone.
func inZoneRef(name, zone string) bool {
	return dns.IsSubDomain(zone, strings.ToLower(name))
}

type target string

func (t target) Owner() string { return string(t) }

// FuzzAppendPTR: a PTR reply is the dns.Msg path's: one record per
// target, owned by the question's name; nothing when it exceeds the
// limit.
func FuzzAppendPTR(f *testing.F) {
	f.Add("10.0.96.10.in-addr.arpa.", "web.demo.svc.clusterset.local.", uint8(1), uint16(1), uint8(0), uint16(0), uint32(0), uint32(5), uint16(512))
	f.Add("1.0.9.10.IN-ADDR.arpa.", "shared-xxxxxxxxxxxxxxxxxxxxxxxxxxxxx.demo.svc.clusterset.local.", uint8(12), uint16(0x1234), uint8(4), uint16(4096), uint32(0), uint32(5), uint16(4096))
	f.Add("1.0.9.10.in-addr.arpa.", "shared.demo.svc.clusterset.local.", uint8(12), uint16(2), uint8(0), uint16(0), uint32(0), uint32(5), uint16(512)) // too big
	f.Add("b.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.d.f.ip6.arpa.", "db-0.east.db.demo.svc.clusterset.local.", uint8(2), uint16(3), uint8(7), uint16(1232), uint32(0x8000), uint32(30), uint16(1232))
	f.Add(".", "x.", uint8(1), uint16(4), uint8(0), uint16(0), uint32(0), uint32(0), uint16(512))
	f.Add("a\\.b.in-addr.arpa.", "x.", uint8(1), uint16(5), uint8(0), uint16(0), uint32(0), uint32(0), uint16(512))
	f.Add("10.in-addr.arpa.", "a\\.b.example.", uint8(1), uint16(6), uint8(0), uint16(0), uint32(0), uint32(0), uint16(512))
	f.Fuzz(func(t *testing.T, qname, rawTarget string, n uint8, id uint16, flags uint8, ednsSize uint16, ednsTTL uint32, ttl uint32, limit uint16) {
		if n == 0 {
			return // the dns.Msg path answers NODATA then
		}
		base := rawTarget
		if !strings.Contains(rawTarget, `\`) {
			if base = fuzzName(rawTarget); base == "" {
				return
			}
		}
		targets := make([]target, n)
		rrs := make([]dns.RR, n)
		for i := range targets {
			targets[i] = target(base)
			if i > 0 && len(base) < 240 {
				targets[i] = target(fmt.Sprintf("t%d.%s", i, base))
			}
			rrs[i] = &dns.PTR{Hdr: dns.RR_Header{Name: qname, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ttl}, Ptr: string(targets[i])}
		}
		r := flagsQuery(id, flags, ednsSize, ednsTTL).msg(qname, dns.TypePTR)
		got, ok := AppendPTR([]byte{1}, r, targets, ttl, opt(r), int(limit))
		require.Equal(t, byte(1), got[0])
		_, valid := dns.IsDomainName(qname)
		valid = valid && dns.IsFqdn(qname) && !strings.Contains(qname, `\`) && len(qname) <= 254 && !strings.Contains(base, `\`)
		if !ok {
			require.Len(t, got, 1)
			if valid {
				big, ok := AppendPTR(nil, r, targets, ttl, opt(r), dns.MaxMsgSize+optLen)
				require.True(t, ok, "the limit is the only reason")
				require.Greater(t, len(big), int(limit))
			}
			return
		}
		require.True(t, valid, "%q -> %q", qname, base)
		require.LessOrEqual(t, len(got)-1, int(limit))
		sameMessage(t, reply(r, dns.RcodeSuccess, rrs, nil, nil), got[1:])
	})
}

// FuzzAppendReverse: the reverse name of an address is dns.ReverseAddr's,
// but for an IPv4-mapped IPv6 address: dns.ReverseAddr reads it as IPv4
// (net.IP does), AppendReverse keeps its family (the Index keys PTR
// records by the address as given), so it gets the ip6.arpa name of its
// 16 octets.
func FuzzAppendReverse(f *testing.F) {
	for _, s := range []string{"10.1.2.3", "0.0.0.0", "255.255.255.255", "192.0.2.10", "fd00::1", "2001:db8:abcd:12::ff", "::", "fe80::1:2:3:4", "::ffff:10.1.2.3"} {
		ip := netip.MustParseAddr(s)
		f.Add(ip.AsSlice())
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ip, ok := netip.AddrFromSlice(raw)
		if !ok {
			return
		}
		var want string
		if ip.Is4In6() {
			// The nibbles of ff00::ffff:a.b.c.d (an address dns.ReverseAddr
			// keeps IPv6), its first octet's two put back to zero.
			other := ip.As16()
			other[0] = 0xff
			var err error
			want, err = dns.ReverseAddr(netip.AddrFrom16(other).String())
			require.NoError(t, err)
			want = strings.TrimSuffix(want, "f.f.ip6.arpa.") + "0.0.ip6.arpa."
		} else {
			var err error
			want, err = dns.ReverseAddr(ip.String())
			require.NoError(t, err)
		}
		require.Equal(t, want, string(AppendReverse(nil, ip)))
		require.Equal(t, "x"+want, string(AppendReverse([]byte("x"), ip)), "appends")
		require.Equal(t, want, string(AppendReverse(nil, ip.WithZone("eth0"))), "without the zone")
	})
}

// FuzzParseReverse: whatever ParseReverse accepts is exactly
// dns.ReverseAddr's name of the address it returns, and every such name
// parses.
func FuzzParseReverse(f *testing.F) {
	v6, _ := dns.ReverseAddr("fd00::a")
	for _, s := range []string{
		"3.2.1.10.in-addr.arpa.", "0.0.0.0.in-addr.arpa.", "255.255.255.255.in-addr.arpa.", v6,
		"03.2.1.10.in-addr.arpa.", "256.2.3.4.in-addr.arpa.", "1.2.3.in-addr.arpa.", "1.2.3.4.5.in-addr.arpa.",
		"1.2..4.in-addr.arpa.", "1.2.3.4.in-addr.arpa", strings.ToUpper(v6[:1]) + v6[1:], v6[2:], "0." + v6, "ip6.arpa.",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		ip, ok := ParseReverse(name)
		if ok {
			want, err := dns.ReverseAddr(ip.String())
			require.NoError(t, err)
			require.Equal(t, want, name, "parsed as %s", ip)
		}
		// The other way round: a name made from the input's bytes.
		raw := []byte(name)
		if len(raw) >= 16 {
			a := netip.AddrFrom16([16]byte(raw[:16]))
			for _, ip := range []netip.Addr{a, a.Unmap(), netip.AddrFrom4([4]byte(raw[:4]))} {
				if ip.Is4In6() {
					continue // dns.ReverseAddr names it as IPv4 (see FuzzAppendReverse)
				}
				rev, err := dns.ReverseAddr(ip.String())
				require.NoError(t, err)
				got, ok := ParseReverse(rev)
				require.True(t, ok, rev)
				require.Equal(t, ip, got)
			}
		}
	})
}

// FuzzParseReversePrefix: whatever ParseReversePrefix accepts is the tail
// of dns.ReverseAddr's name of its prefix's first address, one label per
// 8 (or 4) bits: the canonical form, nothing else.
func FuzzParseReversePrefix(f *testing.F) {
	for _, s := range []string{"96.10.in-addr.arpa.", "0.96.10.in-addr.arpa.", "10.in-addr.arpa.", "d.f.ip6.arpa.", "1.0.0.0.0.d.f.ip6.arpa.",
		"01.10.in-addr.arpa.", "..in-addr.arpa.", "a.b.ip6.arpa.", "1.2.3.4.in-addr.arpa.", "F.ip6.arpa.", "in-addr.arpa."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		v6, prefix, bits, ok := ParseReversePrefix(name)
		if !ok {
			return
		}
		var addr netip.Addr
		per, suffix := 8, ".in-addr.arpa."
		if v6 {
			addr, per, suffix = netip.AddrFrom16(prefix), 4, ".ip6.arpa."
		} else {
			addr = netip.AddrFrom4([4]byte(prefix[:4]))
		}
		full, err := dns.ReverseAddr(addr.String())
		require.NoError(t, err)
		labels := strings.Count(strings.TrimSuffix(name, suffix), ".") + 1
		require.True(t, strings.HasSuffix(full, "."+name) && labels*per == bits,
			"%q parsed as %v/%d; the address's reverse name is %q", name, addr, bits, full)
		require.Equal(t, netip.PrefixFrom(addr, bits).Masked().Addr(), addr, "no bits past the prefix")
	})
}

func TestParseReversePrefix(t *testing.T) {
	for name, want := range map[string]string{
		"10.in-addr.arpa.":        "10.0.0.0/8",
		"96.10.in-addr.arpa.":     "10.96.0.0/16",
		"0.96.10.in-addr.arpa.":   "10.96.0.0/24",
		"255.0.10.in-addr.arpa.":  "10.0.255.0/24",
		"f.ip6.arpa.":             "f000::/4",
		"d.f.ip6.arpa.":           "fd00::/8",
		"1.0.0.0.0.d.f.ip6.arpa.": "fd00:10::/28",
	} {
		v6, prefix, bits, ok := ParseReversePrefix(name)
		require.True(t, ok, name)
		var got netip.Prefix
		if v6 {
			got = netip.PrefixFrom(netip.AddrFrom16(prefix), bits)
		} else {
			got = netip.PrefixFrom(netip.AddrFrom4([4]byte(prefix[:4])), bits)
		}
		assert.Equal(t, want, got.String(), name)
	}
	for _, name := range []string{
		"in-addr.arpa.", "ip6.arpa.", "1.2.3.4.in-addr.arpa.", "01.10.in-addr.arpa.", "256.in-addr.arpa.",
		"a.10.in-addr.arpa.", ".10.in-addr.arpa.", "F.ip6.arpa.", "10.f.ip6.arpa.", "g.ip6.arpa.",
		"0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", // 32 nibbles: an address
		"10.example.", "web.demo.svc.clusterset.local.",
	} {
		_, _, _, ok := ParseReversePrefix(name)
		assert.False(t, ok, name)
	}
}

// TestParseReverse: ParseReverse inverts AppendReverse exactly, and names
// that are not an address's one reverse name (leading zeros, missing or
// extra labels, upper-case or out-of-range digits) are no address.
func TestParseReverse(t *testing.T) {
	for _, s := range []string{"10.1.2.3", "0.0.0.0", "255.255.255.255", "1.20.100.9", "fd00::1", "2001:db8:abcd:12::ff", "::", "::ffff:10.1.2.3", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"} {
		ip := netip.MustParseAddr(s)
		got, ok := ParseReverse(string(AppendReverse(nil, ip)))
		require.True(t, ok, s)
		assert.Equal(t, ip, got, s)
	}
	v6 := string(AppendReverse(nil, netip.MustParseAddr("fd00::a")))
	for _, bad := range []string{
		"", "in-addr.arpa.", ".in-addr.arpa.", "1.2.3.in-addr.arpa.", "1.2.3.4.5.in-addr.arpa.",
		"01.2.3.4.in-addr.arpa.", "256.2.3.4.in-addr.arpa.", "1.2..4.in-addr.arpa.", "1.2.3.x.in-addr.arpa.",
		"1.2.3.4.in-addr.arpa", "1234.2.3.4.in-addr.arpa.", "-1.2.3.4.in-addr.arpa.",
		strings.ToUpper(v6[:1]) + v6[1:], v6[2:], "0." + v6, strings.Replace(v6, ".", "x", 1),
		"g" + v6[1:], "ip6.arpa.",
	} {
		_, ok := ParseReverse(bad)
		assert.False(t, ok, "%q", bad)
	}
}

// TestPatchRejectsMismatch: a query name whose labels are not the
// template's gets no reply.
func TestPatchRejectsMismatch(t *testing.T) {
	pk, err := (&dns.Msg{Question: []dns.Question{{Name: "a.bc.", Qtype: dns.TypeA, Qclass: dns.ClassINET}}}).Pack()
	require.NoError(t, err)
	r := new(dns.Msg)
	for _, name := range []string{"ab.c.", "a.bc", "A.BC.x", "abcd."} {
		buf := append([]byte(nil), pk...)
		assert.False(t, patch(buf, r, name), name)
	}
	buf := append([]byte(nil), pk...)
	assert.True(t, patch(buf, r, "A.Bc."))
	assert.True(t, bytes.Contains(buf, []byte("\x01A\x02Bc\x00")), "the case as asked")
}

// TestAppendReplyOwnNameOnly: a template answers its own name, in any
// case, and no other, nor its own written with escapes.
func TestAppendReplyOwnNameOnly(t *testing.T) {
	answer, _ := records("a.bc.", dns.TypeA, 1, 0)
	tmpl := NewTemplate("a.bc.", dns.TypeA, answer, nil)
	require.NotNil(t, tmpl)
	for name, want := range map[string]bool{
		"a.bc.": true, "A.bC.": true, "a.bd.": false, "ab.c.": false, "a.bc": false, `\097.bc.`: false, `a.b\c.`: false,
	} {
		r := new(dns.Msg)
		r.SetQuestion(name, dns.TypeA)
		_, ok := tmpl.AppendReply(nil, r, nil, 512)
		assert.Equal(t, want, ok, name)
	}
}

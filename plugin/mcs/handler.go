package mcs

import (
	"context"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/dnsname"
)

// Name implements plugin.Handler.
func (p *MCS) Name() string { return pluginName }

// result is what a query resolves to before it is written.
type result struct {
	rcode         int
	answer, extra []dns.RR
	// fresh: answer and extra were built for this query and may be used
	// as they are.
	fresh bool
	// soa answers with the zone's SOA (it depends on the serial).
	soa bool
	// node, when not nil, has records of qtype that answer the query
	// (service names): sent packed, or built by Records.
	node  *answers.Node
	qtype uint16
	// set is node's service (its answers may be shaped).
	set *answers.Set
	// ptr, when not nil, are the nodes whose owner names answer a PTR
	// query (sent as bytes, or built by answers.PTRRecords).
	ptr []*answers.Node
}

var (
	nxdomain = result{rcode: dns.RcodeNameError}
	nodata   = result{rcode: dns.RcodeSuccess}
)

// ServeDNS implements plugin.Handler. Queries read the published answers
// only: no locks, no API calls, no lister scans.
func (p *MCS) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	if len(r.Question) != 1 {
		return plugin.NextOrFailure(p.Name(), p.Next, ctx, w, r)
	}
	q := r.Question[0]
	qname := dnsname.Lower(q.Name)
	zi := dnsname.Match(qname, p.zoneNames)
	if zi < 0 {
		return plugin.NextOrFailure(p.Name(), p.Next, ctx, w, r)
	}
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		// The zones exist in class IN only. Refused here, as CoreDNS's
		// server refuses other classes when no plugin serves them, rather
		// than passed on, where a forward in the same server block would
		// send clusterset names upstream (and log each failure).
		if p.cfg.fall.Through(qname) {
			return plugin.NextOrFailure(p.Name(), p.Next, ctx, w, r)
		}
		return dns.RcodeRefused, nil
	}
	if r.Opcode != dns.OpcodeQuery {
		// NOTIFY, UPDATE, ...: this server is no primary or secondary
		// for the zone (the server replies with this rcode).
		return dns.RcodeNotImplemented, nil
	}
	if q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR {
		return dns.RcodeRefused, nil
	}
	z := p.zones[zi]
	var res result
	if q.Qtype == dns.TypeANY {
		res = p.resolveANY(qname, z)
	} else {
		res = p.resolve(qname, z, q.Qtype)
	}
	if res.rcode == dns.RcodeNameError {
		if p.cfg.fall.Through(qname) {
			return plugin.NextOrFailure(p.Name(), p.Next, ctx, w, r)
		}
		if !p.synced() {
			// Do not let caches remember a negative answer that only
			// says we have not read the API yet.
			return dns.RcodeServerFailure, nil
		}
	}
	switch {
	case res.node != nil:
		if writePacked(w, r, &q, qname, res.set, z.fwd, res.node, p.noSubsets, p.cfg.maxUDP) {
			return dns.RcodeSuccess, nil
		}
		res.answer, res.extra = shapedRecords(w, r, qname, res.set, z.fwd, res.node, res.qtype, p.noSubsets, p.cfg.maxUDP)
		res.fresh = true
	case res.ptr != nil:
		ttl := p.index.PTRTTL()
		if writePTR(w, r, &q, qname, res.ptr, ttl, p.cfg.maxUDP) {
			return dns.RcodeSuccess, nil
		}
		res.answer, res.fresh = answers.PTRRecords(qname, res.ptr, ttl), true
	case !res.soa && len(res.answer) == 0:
		if writeNegative(w, r, &q, qname, z, res.rcode, p.index.Serial()) {
			return dns.RcodeSuccess, nil
		}
	}
	p.write(w, r, z, &res)
	return dns.RcodeSuccess, nil
}

// resolve answers qname (lower case, in z) for qtype.
func (p *MCS) resolve(qname string, z *zone, qtype uint16) result {
	if qname == z.name {
		return z.apex(qtype)
	}
	if z.reverse {
		switch found, targets := p.index.ResolveReverse(qname, qtype); found {
		case answers.Records:
			return result{ptr: targets}
		case answers.NoData:
			return nodata
		}
		return nxdomain
	}
	n := dnsname.Parse(qname, z.name)
	switch n.Kind {
	case dnsname.DNSVersion:
		if qtype == dns.TypeTXT {
			return result{answer: z.txt}
		}
		return nodata
	case dnsname.NSHost:
		a := z.addrs.Load()
		switch qtype {
		case dns.TypeA:
			return result{answer: a.a}
		case dns.TypeAAAA:
			return result{answer: a.aaaa}
		}
		return nodata
	case dnsname.DNSNode, dnsname.SvcNode:
		return nodata
	case dnsname.Namespace:
		if p.index.ResolveNamespace(n.Namespace) == answers.NoData {
			return nodata
		}
		return nxdomain
	case dnsname.Service:
		switch found, set, node := p.index.ResolveService(n.Key, n.Prefix, z.fwd, qtype); found {
		case answers.NoData:
			return nodata
		case answers.Records:
			// Records are built only if the packed fast path cannot send
			// the reply.
			return result{node: node, qtype: qtype, set: set}
		}
		return nxdomain
	}
	return nxdomain
}

// anyOrder is the order in which an ANY query looks for an RRset.
var anyOrder = [...]uint16{dns.TypeSOA, dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeTXT, dns.TypeNS}

// resolveANY answers an ANY query as RFC 8482 recommends: with one RRset
// the name has (the first in anyOrder), not all of them; NODATA only for
// a name without records, NXDOMAIN for one that does not exist.
func (p *MCS) resolveANY(qname string, z *zone) result {
	for i, t := range anyOrder {
		r := p.resolve(qname, z, t)
		if i == 0 && r.rcode == dns.RcodeNameError {
			return r // the name does not exist (whatever the type)
		}
		if r.soa || r.node != nil || r.ptr != nil || len(r.answer) > 0 {
			return r
		}
	}
	return nodata
}

// apex answers the zone's own name: SOA, NS (with the addresses of its
// target as extras), NODATA for other types.
func (z *zone) apex(qtype uint16) result {
	switch qtype {
	case dns.TypeSOA:
		return result{soa: true}
	case dns.TypeNS:
		return result{answer: z.ns, extra: z.addrs.Load().all}
	}
	return nodata
}

// shapedRecords returns the records of qtype at node for the dns.Msg
// path: those of the packed path's reply when the answer is shaped
// (answers.Set.Shapes: local-first, rotated, capped, or cut to fit the
// client's buffer), else node.Records. They are fresh. An ANY query
// whose answer is this RRset (resolveANY) gets the same records as a
// query of qtype: a headless subset rather than TC. With noSubsets
// (MCS.noSubsets) they are those of a reply over TCP, which write
// truncates to the client's buffer, with TC. maxUDP caps a UDP client's
// buffer (replySize).
func shapedRecords(w dns.ResponseWriter, r *dns.Msg, qname string, set *answers.Set, zone int, node *answers.Node, qtype uint16, noSubsets bool, maxUDP int) (answer, extra []dns.RR) {
	if shaped, _ := set.Shapes(zone, node, qtype); !shaped || len(r.Question) != 1 ||
		r.Question[0].Qtype != qtype && r.Question[0].Qtype != dns.TypeANY {
		return node.Records(qtype)
	}
	limit := replySize(w, r, maxUDP)
	if noSubsets {
		limit = dns.MaxMsgSize
	}
	size := limit
	if r.IsEdns0() != nil {
		size -= 11 // the OPT record SizeAndDo adds
	}
	_, plain := set.Shapes(zone, node, qtype)
	if tmpl := node.Packed(qname, qtype); plain && tmpl != nil {
		if answerOnly := tmpl.Short; answerOnly != nil && len(answerOnly) <= size || len(tmpl.Full) <= size {
			return node.Records(qtype) // it fits: no ring needed
		}
	}
	ring := set.Ring(zone, node, qname, qtype)
	if ring == nil {
		return node.Records(qtype)
	}
	k, off, withExtra := ring.Choose(limit, r.IsEdns0() != nil)
	if plain && k == ring.Units() {
		// All of it fits: the records as before (write drops the
		// additional section when only that does not fit).
		return node.Records(qtype)
	}
	q := *r
	q.Question = []dns.Question{{Name: qname, Qtype: qtype, Qclass: dns.ClassINET}}
	bp := getBuf()
	defer replyBufs.Put(bp)
	reply, ok := ring.AppendReply((*bp)[:0], &q, nil, k, off, withExtra)
	*bp = reply[:0]
	m := new(dns.Msg)
	if !ok || m.Unpack(reply) != nil {
		return node.Records(qtype)
	}
	return m.Answer, m.Extra
}

// write sends the reply: the answer, or for negative answers (NXDOMAIN,
// NODATA) the zone SOA in the authority section (RFC 2308), fitted to the
// client's buffer.
func (p *MCS) write(w dns.ResponseWriter, r *dns.Msg, z *zone, res *result) {
	m := new(dns.Msg)
	m.SetRcode(r, res.rcode)
	m.Authoritative = true
	switch {
	case res.soa:
		m.Answer = []dns.RR{z.soaRR(p.index.Serial())}
	case res.fresh && len(res.answer) > 0:
		m.Answer = res.answer
	case len(res.answer) > 0:
		// Fresh slices: later plugins and the server may append to or
		// reorder them; the records themselves are shared and must
		// not be modified.
		m.Answer = make([]dns.RR, len(res.answer))
		copy(m.Answer, res.answer)
	default:
		m.Ns = []dns.RR{z.soaRR(p.index.Serial())}
	}
	switch {
	case res.fresh:
		m.Extra = res.extra
	case len(res.extra) > 0:
		m.Extra = make([]dns.RR, len(res.extra), len(res.extra)+1)
		copy(m.Extra, res.extra)
	}
	state := request.Request{W: w, Req: r}
	state.SizeAndDo(m)
	fit(m, replySize(w, r, p.cfg.maxUDP))
	_ = w.WriteMsg(m)
}

// replySize is the largest reply r's client may be sent: over UDP its
// EDNS0 buffer (512 without EDNS0) but at most maxUDP, so that a spoofed
// query is never answered with many times its size whatever buffer it
// claims; over TCP 64 KiB.
// It costs what request.Request.Size does: one look at the transport
// and one at the OPT record.
func replySize(w dns.ResponseWriter, r *dns.Msg, maxUDP int) int {
	if state := (request.Request{W: w, Req: r}); state.Proto() == "tcp" {
		return dns.MaxMsgSize
	}
	size := dns.MinMsgSize
	if o := r.IsEdns0(); o != nil {
		size = max(size, int(o.UDPSize()))
	}
	return min(size, maxUDP)
}

// fit makes m fit in size octets (the client's EDNS0 buffer over UDP, at
// least 512; 64 KiB over TCP). Additional records go first, without
// setting TC, since the answer is complete without them (the OPT record
// stays). Only when the answer section itself does not fit is it cut and
// TC set, so that the client retries over TCP. (dns.Msg.Truncate alone
// would set TC when it drops only additional records.)
func fit(m *dns.Msg, size int) {
	if size < dns.MinMsgSize {
		size = dns.MinMsgSize
	}
	if m.Len() <= size {
		return
	}
	m.Compress = true
	if m.Len() <= size {
		return
	}
	opt := m.IsEdns0()
	m.Extra = m.Extra[:0]
	if opt != nil {
		m.Extra = append(m.Extra, opt)
	}
	if m.Len() <= size {
		return
	}
	m.Truncate(size)
	m.Truncated = true
}

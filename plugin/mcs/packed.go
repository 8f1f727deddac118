package mcs

import (
	"sync"

	cedns "github.com/coredns/coredns/plugin/pkg/edns"
	"github.com/miekg/dns"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/dnswire"
)

// The packed fast path writes a positive answer as bytes: the node's
// reply template (dnswire.Template), packed once, copied and patched with
// the query's ID, flags, question-name case and OPT record; negative and
// PTR replies are written as bytes too (dnswire). It replaces
// building a dns.Msg, fitting it (one compression pass), CoreDNS's scrub
// (another) and Pack (a third) on every query, which profiles showed to
// be most of the cost of large answers.
//
// The reply is the one the dns.Msg path sends, byte for byte up to name
// compression and the case of the owner names (they echo the question's
// case). Anything the template does not cover takes the dns.Msg path:
// a writer wrapped by a plugin that needs the *dns.Msg (cache, log,
// dnstap, rewrite, ...), EDNS0 options the reply would echo, an opcode other than
// QUERY, a class other than IN, a name with escapes, and replies that do
// not fit the client's buffer (the dns.Msg path truncates them).

var replyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// getBuf returns a pooled buffer to append a reply to; send gives it
// back.
func getBuf() *[]byte { return replyBufs.Get().(*[]byte) }

// send writes reply, which was appended to (*bp)[:0], when ok, gives bp
// back to the pool and returns ok. A failed write means the client is
// gone: the reply counts as written (a second try through WriteMsg could
// only add a frame to a broken stream).
func send(w dns.ResponseWriter, bp *[]byte, reply []byte, ok bool) bool {
	if ok {
		_, _ = w.Write(reply)
	}
	*bp = reply[:0] // the writers copy or send it before Write returns
	replyBufs.Put(bp)
	return ok
}

// queryOPT returns the query's OPT record (nil when it has none) and
// whether a reply written as bytes can answer it: EDNS0 version 0 and no
// option that request.SizeAndDo would echo (those some plugin registered
// with edns.SetSupportedOption; others, such as a client's COOKIE, are
// dropped from the reply either way).
func queryOPT(r *dns.Msg) (*dns.OPT, bool) {
	if len(r.Extra) == 0 {
		return nil, true
	}
	opt := r.IsEdns0()
	if opt == nil {
		return nil, true
	}
	if opt.Version() != 0 {
		return opt, false
	}
	for _, o := range opt.Option {
		if cedns.SupportedOption(o.Option()) {
			return opt, false
		}
	}
	return opt, true
}

// writePacked sends the packed reply of node (in zone index zone of
// set) as the reply to r (whose single question is q, with lower-case
// name qname) and reports whether it did; when it did not, nothing was
// written. A shaped answer (answers.Set.Shapes) is its template when it
// is plain and fits, else taken from its ring: local-first, rotated,
// capped, and as many endpoints as fit the client's buffer, without TC.
// With noSubsets (MCS.noSubsets) a shaped answer is sent as bytes only
// from its template; the dns.Msg path sends the others (shapedRecords).
func writePacked(w dns.ResponseWriter, r *dns.Msg, q *dns.Question, qname string, set *answers.Set, zone int, node *answers.Node, noSubsets bool, maxUDP int) bool {
	if q.Qclass != dns.ClassINET || r.Opcode != dns.OpcodeQuery || len(q.Name) != len(qname) || !rawWriter(w) {
		return false
	}
	opt, ok := queryOPT(r)
	if !ok {
		return false
	}
	size := replySize(w, r, maxUDP)
	shaped, plain := set.Shapes(zone, node, q.Qtype)
	if !shaped || plain {
		if tmpl := node.Packed(qname, q.Qtype); tmpl != nil && tmpl.Name == qname {
			bp := getBuf()
			reply, ok := tmpl.AppendReply((*bp)[:0], r, opt, size)
			if send(w, bp, reply, ok) {
				return true
			}
		}
		if !shaped {
			return false
		}
	}
	if noSubsets {
		return false
	}
	ring := set.Ring(zone, node, qname, q.Qtype)
	if ring == nil || ring.Name != qname {
		return false
	}
	k, off, extra := ring.Choose(size, opt != nil)
	bp := getBuf()
	reply, ok := ring.AppendReply((*bp)[:0], r, opt, k, off, extra)
	return send(w, bp, reply, ok)
}

// writeNegative sends a negative reply (rcode NXDOMAIN, or NOERROR for
// NODATA) to r with the zone's SOA in the authority section (RFC 2308),
// built as bytes (dnswire.AppendNegative). It reports whether it did.
func writeNegative(w dns.ResponseWriter, r *dns.Msg, q *dns.Question, qname string, z *zone, rcode int, serial uint32) bool {
	if z.soaTail == nil || q.Qclass != dns.ClassINET || r.Opcode != dns.OpcodeQuery ||
		len(q.Name) != len(qname) || !rawWriter(w) {
		return false
	}
	opt, ok := queryOPT(r)
	if !ok {
		return false
	}
	bp := getBuf()
	reply, ok := dnswire.AppendNegative((*bp)[:0], r, z.name, rcode, z.soaTail, serial, opt)
	if !send(w, bp, reply, ok) {
		return false
	}
	setRcode(w, rcode)
	return true
}

// writePTR sends the PTR records of the reverse name qname (the query's
// q.Name in lower case), pointing at the owner names of targets, built
// as bytes (dnswire.AppendPTR). It reports whether it did: a reply that
// does not fit the client's buffer takes the dns.Msg path, which
// truncates it.
func writePTR(w dns.ResponseWriter, r *dns.Msg, q *dns.Question, qname string, targets []*answers.Node, ttl uint32, maxUDP int) bool {
	if q.Qclass != dns.ClassINET || r.Opcode != dns.OpcodeQuery || len(q.Name) != len(qname) || !rawWriter(w) {
		return false
	}
	opt, ok := queryOPT(r)
	if !ok {
		return false
	}
	size := replySize(w, r, maxUDP)
	bp := getBuf()
	reply, ok := dnswire.AppendPTR((*bp)[:0], r, targets, ttl, opt, size)
	return send(w, bp, reply, ok)
}

package mcs

import (
	"context"
	"encoding/binary"
	"reflect"
	"sync"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metrics"
	cedns "github.com/coredns/coredns/plugin/pkg/edns"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"

	"github.com/mcs-dns/mcs-dns/internal/answers"
)

// The packed fast path writes a positive answer as bytes: the node's
// reply template (answers.Packed), packed once, copied and patched with
// the query's ID, flags, question-name case and OPT record. It replaces
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

// pluginWriterType is the type of the writer plugin.NextOrFailure wraps
// around the writer it passes on (to note which plugin wrote the reply;
// its Write passes the bytes on unchanged). It is unexported, so it is
// learnt once by calling NextOrFailure.
var pluginWriterType = func() reflect.Type {
	var seen reflect.Type
	_, _ = plugin.NextOrFailure("mcs", plugin.HandlerFunc(func(_ context.Context, w dns.ResponseWriter, _ *dns.Msg) (int, error) {
		seen = reflect.TypeOf(w)
		return 0, nil
	}), context.Background(), &request.ScrubWriter{}, nil)
	return seen
}()

// maxWrappers bounds the writers rawWriter looks through: one per plugin
// before mcs in the chain, and the prometheus recorder.
const maxWrappers = 32

// inner returns the writer that w wraps when w is one that passes bytes
// written with Write on unchanged (NextOrFailure's, or the prometheus
// plugin's recorder, which counts their length and reads an unset rcode as
// NOERROR), else nil.
func inner(w dns.ResponseWriter) dns.ResponseWriter {
	if t, ok := w.(*metrics.Recorder); ok {
		if t.Recorder == nil {
			return nil
		}
		return t.Recorder.ResponseWriter
	}
	if pluginWriterType != nil && reflect.TypeOf(w) == pluginWriterType {
		v := reflect.ValueOf(w).Elem()
		if v.NumField() > 0 {
			if next, ok := v.Field(0).Interface().(dns.ResponseWriter); ok {
				return next
			}
		}
	}
	return nil
}

// rawWriter reports whether a reply written with Write reaches the client
// unchanged and fully accounted for: the server's own ScrubWriter (it only
// fits messages given to WriteMsg; our templates fit already), possibly
// behind writers that pass bytes on (see inner). Not for DNS over QUIC:
// its writer ends the stream in WriteMsg only.
func rawWriter(w dns.ResponseWriter) bool {
	for range maxWrappers {
		if sw, ok := w.(*request.ScrubWriter); ok {
			_, quic := sw.ResponseWriter.(*dnsserver.DoQWriter)
			return !quic && sw.ResponseWriter != nil
		}
		if w = inner(w); w == nil {
			return false
		}
	}
	return false
}

// putOPT writes the reply's OPT record for the query's opt into o, as
// request.SizeAndDo makes it: the client's UDP size echoed, extended rcode
// and version 0, the DO bit (and the other bits of its octet) echoed.
func putOPT(o []byte, opt *dns.OPT) {
	o[0] = 0 // root
	binary.BigEndian.PutUint16(o[1:], dns.TypeOPT)
	binary.BigEndian.PutUint16(o[3:], opt.Hdr.Class)
	binary.BigEndian.PutUint32(o[5:], opt.Hdr.Ttl&0xff00)
	binary.BigEndian.PutUint16(o[9:], 0) // RDLENGTH
}

// setRcode tells the prometheus plugin's recorders the rcode of a reply
// written as bytes (they read it only from messages given to WriteMsg).
func setRcode(w dns.ResponseWriter, rcode int) {
	for range maxWrappers {
		if t, ok := w.(*metrics.Recorder); ok && t.Recorder != nil {
			t.Rcode = rcode
		}
		if w = inner(w); w == nil {
			return
		}
	}
}

// optLen is the size of the OPT record a reply gets: root name, type,
// class, TTL, RDLENGTH 0.
const optLen = 11

var replyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// replyBuf returns a pooled buffer and its first n octets; the caller
// puts bp back into replyBufs once the reply is written (the writers
// copy or send it before Write returns).
func replyBuf(n int) (bp *[]byte, buf []byte) {
	bp = replyBufs.Get().(*[]byte)
	if cap(*bp) < n {
		*bp = make([]byte, 0, n)
	}
	return bp, (*bp)[:n]
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

// writePacked sends the packed reply of node as the reply to r (whose
// single question is q, with lower-case name qname) and reports whether
// it did; when it did not, nothing was written.
func writePacked(w dns.ResponseWriter, r *dns.Msg, q *dns.Question, qname string, node *answers.Node) bool {
	if q.Qclass != dns.ClassINET || r.Opcode != dns.OpcodeQuery || len(q.Name) != len(qname) || !rawWriter(w) {
		return false
	}
	pk := node.Packed(qname, q.Qtype)
	if pk == nil || pk.Name != qname {
		return false
	}
	opt, ok := queryOPT(r)
	if !ok {
		return false
	}
	state := request.Request{W: w, Req: r}
	size := state.Size()
	extra := 0
	if opt != nil {
		extra = optLen
	}
	tmpl := pk.Full
	if len(tmpl)+extra > size {
		tmpl = pk.Short
		if tmpl == nil || len(tmpl)+extra > size {
			return false
		}
	}
	bp, buf := replyBuf(len(tmpl) + extra)
	copy(buf, tmpl)
	if !patch(buf, r, q.Name) {
		replyBufs.Put(bp)
		return false
	}
	if opt != nil {
		putOPT(buf[len(tmpl):], opt)
		binary.BigEndian.PutUint16(buf[10:], binary.BigEndian.Uint16(buf[10:])+1) // ARCOUNT
	}
	// A failed write means the client is gone: the reply counts as
	// written (a second try through WriteMsg could only add a frame to a
	// broken stream).
	_, _ = w.Write(buf)
	replyBufs.Put(bp)
	return true
}

// patch writes the query's ID, RD and CD bits and question name (its
// case) over a copied template. name is the query's name, the template's
// name up to case and without escapes (same length): its labels are
// copied into the template's label octets.
func patch(buf []byte, r *dns.Msg, name string) bool {
	binary.BigEndian.PutUint16(buf[0:], r.Id)
	flags := buf[2] &^ 0x01
	if r.RecursionDesired {
		flags |= 0x01
	}
	buf[2] = flags
	flags = buf[3] &^ 0x10
	if r.CheckingDisabled {
		flags |= 0x10
	}
	buf[3] = flags
	pos, i := 12, 0
	for pos < len(buf) {
		l := int(buf[pos])
		if l == 0 {
			return i == len(name)
		}
		if l > 63 || pos+1+l > len(buf) || i+l >= len(name) || name[i+l] != '.' {
			return false
		}
		copy(buf[pos+1:pos+1+l], name[i:i+l])
		pos += 1 + l
		i += l + 1
	}
	return false
}

// soaTail is the zone's SOA record after its owner name, packed without
// compression (type, class, TTL, RDLENGTH, MNAME, RNAME, serial,
// refresh, retry, expire, minimum), for negative replies; the serial is
// written per reply at serialAt.
type soaTail struct {
	b        []byte
	serialAt int
}

func newSOATail(z *zone) (*soaTail, error) {
	soa := z.soaRR(0)
	b := make([]byte, 10, 10+len(soa.Ns)+len(soa.Mbox)+2+20)
	binary.BigEndian.PutUint16(b[0:], dns.TypeSOA)
	binary.BigEndian.PutUint16(b[2:], dns.ClassINET)
	binary.BigEndian.PutUint32(b[4:], soa.Hdr.Ttl)
	for _, name := range []string{soa.Ns, soa.Mbox} {
		buf := make([]byte, 256)
		n, err := dns.PackDomainName(name, buf, 0, nil, false)
		if err != nil {
			return nil, err
		}
		b = append(b, buf[:n]...)
	}
	at := len(b)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, soa.Refresh)
	b = binary.BigEndian.AppendUint32(b, soa.Retry)
	b = binary.BigEndian.AppendUint32(b, soa.Expire)
	b = binary.BigEndian.AppendUint32(b, soa.Minttl)
	binary.BigEndian.PutUint16(b[8:], uint16(len(b)-10)) // #nosec G115 -- at most 2*255+20
	return &soaTail{b: b, serialAt: at}, nil
}

// putQuestion writes the reply's header (QR, AA, the query's ID, RD and
// CD, rcode, QDCOUNT 1; the other counts zero) and its question, the
// query's name label by label as asked, into buf; it returns the offset
// after the question, or false for a name it cannot copy (escapes, empty
// or long labels, not fully qualified). buf must hold 12 + len(q.Name)
// + 5 octets.
func putQuestion(buf []byte, r *dns.Msg, q *dns.Question, rcode int) (int, bool) {
	clear(buf[:12])
	binary.BigEndian.PutUint16(buf[0:], r.Id)
	buf[2] = 0x80 | 0x04 // QR, AA
	if r.RecursionDesired {
		buf[2] |= 0x01
	}
	buf[3] = byte(rcode & 0x0f)
	if r.CheckingDisabled {
		buf[3] |= 0x10
	}
	binary.BigEndian.PutUint16(buf[4:], 1) // QDCOUNT
	pos := 12
	if q.Name != "." {
		start := 0
		for i := 0; i < len(q.Name); i++ {
			switch q.Name[i] {
			case '\\':
				return 0, false
			case '.':
			default:
				continue
			}
			l := i - start
			if l == 0 || l > 63 {
				return 0, false
			}
			buf[pos] = byte(l)
			copy(buf[pos+1:], q.Name[start:i])
			pos += 1 + l
			start = i + 1
		}
		if start != len(q.Name) {
			return 0, false // not fully qualified
		}
	}
	buf[pos] = 0
	pos++
	binary.BigEndian.PutUint16(buf[pos:], q.Qtype)
	binary.BigEndian.PutUint16(buf[pos+2:], dns.ClassINET)
	return pos + 4, true
}

// questionLen is the wire length of the question putQuestion writes for
// an escape-free fully qualified name.
func questionLen(name string) int {
	if name == "." {
		return 1 + 4
	}
	return len(name) + 1 + 4
}

// writeNegative sends a negative reply (rcode NXDOMAIN, or NOERROR for
// NODATA) to r with the zone's SOA in the authority section (RFC 2308),
// built as bytes: the question is the query's, and the SOA's owner is a
// pointer to the zone's labels inside it. It reports whether it did.
func writeNegative(w dns.ResponseWriter, r *dns.Msg, q *dns.Question, qname string, z *zone, rcode int, serial uint32) bool {
	tail := z.soaTail
	if tail == nil || q.Qclass != dns.ClassINET || r.Opcode != dns.OpcodeQuery ||
		len(q.Name) != len(qname) || len(qname) < len(z.name) || len(qname) > 254 || !rawWriter(w) {
		return false
	}
	opt, ok := queryOPT(r)
	if !ok {
		return false
	}
	n := 12 + questionLen(q.Name) + 2 + len(tail.b)
	if z.name == "." {
		n-- // the root owner is one octet, not a two-octet pointer
	}
	if opt != nil {
		n += optLen
	}
	if n > 512 { // cannot happen for a name of at most 255 octets; be safe
		return false
	}
	bp, buf := replyBuf(n)
	defer replyBufs.Put(bp)
	pos, ok := putQuestion(buf, r, q, rcode)
	if !ok {
		return false
	}
	binary.BigEndian.PutUint16(buf[8:], 1) // NSCOUNT
	if z.name == "." {
		buf[pos] = 0
		pos++
	} else {
		zoneAt := 12 + len(qname) - len(z.name)
		binary.BigEndian.PutUint16(buf[pos:], 0xc000|uint16(zoneAt)) // #nosec G115 -- < 12+255
		pos += 2
	}
	copy(buf[pos:], tail.b)
	binary.BigEndian.PutUint32(buf[pos+tail.serialAt:], serial)
	pos += len(tail.b)
	if opt != nil {
		putOPT(buf[pos:], opt)
		binary.BigEndian.PutUint16(buf[10:], 1) // ARCOUNT
	}
	setRcode(w, rcode)
	_, _ = w.Write(buf) // as in writePacked, a failed write counts as written
	return true
}

// writePTR sends the PTR records of the reverse name qname (the query's
// q.Name in lower case), pointing at the owner names of targets, built
// as bytes: each record's owner is a pointer to the question, the
// targets are written uncompressed (they share no suffix with a reverse
// name). It reports whether it did: a reply that does not fit the
// client's buffer takes the dns.Msg path, which truncates it.
func writePTR(w dns.ResponseWriter, r *dns.Msg, q *dns.Question, qname string, targets []*answers.Node, ttl uint32) bool {
	if q.Qclass != dns.ClassINET || r.Opcode != dns.OpcodeQuery || len(q.Name) != len(qname) ||
		len(qname) > 254 || len(targets) > 0xffff || !rawWriter(w) {
		return false
	}
	opt, ok := queryOPT(r)
	if !ok {
		return false
	}
	n := 12 + questionLen(q.Name)
	for _, t := range targets {
		n += 2 + 10 + len(t.Owner()) + 1 // pointer, type..RDLENGTH, name
	}
	if opt != nil {
		n += optLen
	}
	state := request.Request{W: w, Req: r}
	if n > state.Size() {
		return false
	}
	bp, buf := replyBuf(n)
	defer replyBufs.Put(bp)
	pos, ok := putQuestion(buf, r, q, dns.RcodeSuccess)
	if !ok {
		return false
	}
	binary.BigEndian.PutUint16(buf[6:], uint16(len(targets))) // #nosec G115 -- checked above
	for _, t := range targets {
		binary.BigEndian.PutUint16(buf[pos:], 0xc000|12) // the question's name
		binary.BigEndian.PutUint16(buf[pos+2:], dns.TypePTR)
		binary.BigEndian.PutUint16(buf[pos+4:], dns.ClassINET)
		binary.BigEndian.PutUint32(buf[pos+6:], ttl)
		end, err := dns.PackDomainName(t.Owner(), buf, pos+12, nil, false)
		if err != nil || end != pos+12+len(t.Owner())+1 {
			return false // an owner with escapes: not what the size assumed
		}
		binary.BigEndian.PutUint16(buf[pos+10:], uint16(end-pos-12)) // #nosec G115 -- <= 255
		pos = end
	}
	if opt != nil {
		putOPT(buf[pos:], opt)
		binary.BigEndian.PutUint16(buf[10:], 1) // ARCOUNT
	}
	_, _ = w.Write(buf) // as in writePacked, a failed write counts as written
	return true
}

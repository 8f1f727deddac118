// Package dnswire builds DNS replies as bytes, with no dns.Msg per query:
// reply templates packed once and patched per query (ID, flags,
// question-name case, OPT), negative replies with the zone's SOA, PTR
// replies, and the reverse names of addresses. It is pure wire format: it
// knows nothing of services, indexes or CoreDNS.
package dnswire

import (
	"encoding/binary"
	"strings"

	"github.com/miekg/dns"
)

// Template is a reply to one question packed once into DNS wire format,
// so that the query path copies bytes instead of compressing and packing
// records on every query (for a 50-record answer, packing is most of the
// cost of a query). A Template is immutable.
//
// The packed reply has ID 0, the flags QR and AA, one question (Name, the
// record type, class IN), the answer section, the additional section (in
// Full only) and no OPT record; names are compressed. A reply is the
// template with the query's ID, RD and CD bits and question-name case
// written over it, and the OPT record appended when the query has one
// (AppendReply).
type Template struct {
	// Name is the question name of the template: lower case, the owner
	// name of the answer records.
	Name string
	// Full holds the answer and additional sections; Short the answer
	// only (nil when there are no additional records, or they do not
	// change the size).
	Full, Short []byte
}

// NewTemplate packs the reply template of a question (qname, lower case,
// and qtype) answered with answer and extra (see Template); nil when it
// cannot be packed, no transport could carry it whole, or qname has
// escapes (a query's name is copied into the template label by label).
func NewTemplate(qname string, qtype uint16, answer, extra []dns.RR) *Template {
	if strings.IndexByte(qname, '\\') >= 0 {
		return nil
	}
	m := &dns.Msg{
		MsgHdr:   dns.MsgHdr{Response: true, Authoritative: true},
		Compress: true,
		Question: []dns.Question{{Name: qname, Qtype: qtype, Qclass: dns.ClassINET}},
		Answer:   answer,
	}
	short, err := m.Pack()
	if err != nil || len(short) > dns.MaxMsgSize {
		return nil
	}
	t := &Template{Name: qname, Full: short}
	if len(extra) > 0 {
		m.Extra = extra
		full, err := m.Pack()
		if err == nil && len(full) > len(short) && len(full) <= dns.MaxMsgSize {
			t.Full, t.Short = full, short
		}
	}
	return t
}

// AppendReply appends t as the reply to r to dst: the Full template when
// the reply fits limit octets, else the Short one; with the query's ID,
// RD and CD bits and question name (its case), and the reply's OPT
// record for opt, the query's (nil: none; see putOPT). It reports
// false, appending nothing, when neither template fits, or r is not a
// QUERY of one question of class IN whose name is t.Name up to ASCII
// case and has no escapes.
func (t *Template) AppendReply(dst []byte, r *dns.Msg, opt *dns.OPT, limit int) ([]byte, bool) {
	if len(r.Question) != 1 || r.Opcode != dns.OpcodeQuery || r.Question[0].Qclass != dns.ClassINET {
		return dst, false
	}
	extra := 0
	if opt != nil {
		extra = optLen
	}
	tmpl := t.Full
	if len(tmpl)+extra > limit {
		tmpl = t.Short
		if tmpl == nil || len(tmpl)+extra > limit {
			return dst, false
		}
	}
	name := r.Question[0].Name
	// t.Name has no escapes (NewTemplate), so neither has a name equal to
	// it up to case.
	if name != t.Name && !equalFold(name, t.Name) {
		return dst, false
	}
	start := len(dst)
	dst = append(dst, tmpl...)
	buf := dst[start:]
	if !patch(buf, r, name) {
		return dst[:start], false
	}
	if opt != nil {
		var o []byte
		dst, o = grow(dst, optLen)
		putOPT(o, opt)
		buf = dst[start:]
		binary.BigEndian.PutUint16(buf[10:], binary.BigEndian.Uint16(buf[10:])+1) // ARCOUNT
	}
	return dst, true
}

// patch writes the query's ID, RD and CD bits and question name (its
// case) over a copied template. name is the query's name, the template's
// name up to ASCII case and without escapes (same length): its labels are
// copied into the template's label octets.
func patch(buf []byte, r *dns.Msg, name string) bool {
	if len(buf) < 12 {
		return false
	}
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

// equalFold reports whether a and b are equal up to ASCII case (and only
// ASCII: no Unicode folding, which could match names of other lengths).
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

// lower is c in ASCII lower case.
func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// optLen is the size of the OPT record a reply gets (putOPT): root
// name, type, class, TTL, RDLENGTH 0.
const optLen = 11

// putOPT writes the reply's OPT record for the query's opt into o (optLen
// octets), as CoreDNS's request.SizeAndDo makes it: the client's UDP size
// echoed, extended rcode and version 0, the DO bit (and the other bits of
// its octet) echoed, no options.
func putOPT(o []byte, opt *dns.OPT) {
	o[0] = 0 // root
	binary.BigEndian.PutUint16(o[1:], dns.TypeOPT)
	binary.BigEndian.PutUint16(o[3:], opt.Hdr.Class)
	binary.BigEndian.PutUint32(o[5:], opt.Hdr.Ttl&0xff00)
	binary.BigEndian.PutUint16(o[9:], 0) // RDLENGTH
}

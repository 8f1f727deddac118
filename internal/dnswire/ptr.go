package dnswire

import (
	"encoding/binary"

	"github.com/miekg/dns"
)

// Owner is a PTR target: its Owner is the name the record points at, a
// fully qualified name without escapes.
type Owner interface{ Owner() string }

// AppendPTR appends to dst the reply to r with one PTR record per target,
// in order, with ttl, and the reply's OPT record for opt, the query's
// (nil: none). The question is the query's, as asked; each record's owner
// is a pointer to it, and the targets are written uncompressed (they
// share no suffix with a reverse name). It reports false, appending
// nothing, when the reply would exceed limit octets, or r is not a QUERY
// of one question of class IN with a name without escapes, or a target
// has escapes.
func AppendPTR[T Owner](dst []byte, r *dns.Msg, targets []T, ttl uint32, opt *dns.OPT, limit int) ([]byte, bool) {
	if !queryOK(r) || len(targets) > 0xffff {
		return dst, false
	}
	q := &r.Question[0]
	n := 12 + questionLen(q.Name)
	for _, t := range targets {
		n += 2 + 10 + len(t.Owner()) + 1 // pointer, type..RDLENGTH, name
	}
	if opt != nil {
		n += optLen
	}
	if n > limit {
		return dst, false
	}
	start := len(dst)
	dst, buf := grow(dst, n)
	pos, ok := putQuestion(buf, r, q, dns.RcodeSuccess)
	if !ok {
		return dst[:start], false
	}
	binary.BigEndian.PutUint16(buf[6:], uint16(len(targets))) // #nosec G115 -- checked above
	for _, t := range targets {
		owner := t.Owner()
		binary.BigEndian.PutUint16(buf[pos:], 0xc000|12) // the question's name
		binary.BigEndian.PutUint16(buf[pos+2:], dns.TypePTR)
		binary.BigEndian.PutUint16(buf[pos+4:], dns.ClassINET)
		binary.BigEndian.PutUint32(buf[pos+6:], ttl)
		end, err := dns.PackDomainName(owner, buf, pos+12, nil, false)
		if err != nil || end != pos+12+len(owner)+1 {
			return dst[:start], false // a name with escapes: not what the size assumed
		}
		binary.BigEndian.PutUint16(buf[pos+10:], uint16(end-pos-12)) // #nosec G115 -- <= 255
		pos = end
	}
	if opt != nil {
		putOPT(buf[pos:], opt)
		binary.BigEndian.PutUint16(buf[10:], 1) // ARCOUNT
	}
	return dst, true
}

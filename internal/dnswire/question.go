package dnswire

import (
	"encoding/binary"
	"slices"

	"github.com/miekg/dns"
)

// putQuestion writes a reply's header (QR, AA, the query's ID, RD and CD,
// rcode, QDCOUNT 1; the other counts zero) and its question, the query's
// name label by label as asked, qtype and class IN, into buf; it returns
// the offset after the question, or false for a name it cannot copy
// (escapes, empty or long labels, not fully qualified). buf must hold
// questionLen(q.Name) + 12 octets.
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

// queryOK reports whether r is a QUERY of one question of class IN whose
// name fits a reply written label by label (at most 254 characters: 255
// octets in wire format).
func queryOK(r *dns.Msg) bool {
	return len(r.Question) == 1 && r.Opcode == dns.OpcodeQuery && r.Question[0].Qclass == dns.ClassINET &&
		len(r.Question[0].Name) > 0 && len(r.Question[0].Name) <= 254
}

// grow returns dst extended by n octets, and those octets, which hold
// garbage: the caller writes every one.
func grow(dst []byte, n int) ([]byte, []byte) {
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	return dst, dst[start:]
}

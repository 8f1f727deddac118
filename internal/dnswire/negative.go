package dnswire

import (
	"encoding/binary"

	"github.com/miekg/dns"
)

// SOATail is a zone's SOA record after its owner name, packed without
// compression (type, class, TTL, RDLENGTH, MNAME, RNAME, serial, refresh,
// retry, expire, minimum), for negative replies; the serial is written
// per reply.
type SOATail struct {
	b        []byte
	serialAt int
}

// NewSOATail packs soa, but for its owner name and serial, for
// AppendNegative.
func NewSOATail(soa *dns.SOA) (*SOATail, error) {
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
	return &SOATail{b: b, serialAt: at}, nil
}

// AppendNegative appends to dst a negative reply to r (rcode NXDOMAIN, or
// NOERROR for NODATA; any rcode of 4 bits) with the SOA of zone (a lower-
// case FQDN, whose record soa is, with serial) in the authority section
// (RFC 2308), and the reply's OPT record for opt, the query's (nil:
// none). The question is the query's, as asked; the SOA's owner is a
// pointer to the zone's labels inside it. It reports false, appending
// nothing, when r is not a QUERY of one question of class IN whose name,
// without escapes, is in zone (up to ASCII case).
func AppendNegative(dst []byte, r *dns.Msg, zone string, rcode int, soa *SOATail, serial uint32, opt *dns.OPT) ([]byte, bool) {
	if soa == nil || rcode < 0 || rcode > 0x0f || !queryOK(r) {
		return dst, false
	}
	q := &r.Question[0]
	if !inZone(q.Name, zone) {
		return dst, false
	}
	n := 12 + questionLen(q.Name) + 2 + len(soa.b)
	if zone == "." {
		n-- // the root owner is one octet, not a two-octet pointer
	}
	if opt != nil {
		n += optLen
	}
	if n > dns.MinMsgSize { // cannot happen for a name of at most 255 octets; be safe
		return dst, false
	}
	start := len(dst)
	dst, buf := grow(dst, n)
	pos, ok := putQuestion(buf, r, q, rcode)
	if !ok {
		return dst[:start], false
	}
	binary.BigEndian.PutUint16(buf[8:], 1) // NSCOUNT
	if zone == "." {
		buf[pos] = 0
		pos++
	} else {
		zoneAt := 12 + len(q.Name) - len(zone)
		binary.BigEndian.PutUint16(buf[pos:], 0xc000|uint16(zoneAt)) // #nosec G115 -- < 12+255
		pos += 2
	}
	copy(buf[pos:], soa.b)
	binary.BigEndian.PutUint32(buf[pos+soa.serialAt:], serial)
	pos += len(soa.b)
	if opt != nil {
		putOPT(buf[pos:], opt)
		binary.BigEndian.PutUint16(buf[10:], 1) // ARCOUNT
	}
	return dst, true
}

// inZone reports whether the fully qualified name is zone or below it, up
// to ASCII case.
func inZone(name, zone string) bool {
	if zone == "." {
		return len(name) > 0 && name[len(name)-1] == '.'
	}
	if len(name) < len(zone) {
		return false
	}
	cut := len(name) - len(zone)
	if cut > 0 && name[cut-1] != '.' {
		return false
	}
	return name[cut:] == zone || equalFold(name[cut:], zone)
}

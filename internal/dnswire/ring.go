package dnswire

import (
	"encoding/binary"
	"strings"
	"sync/atomic"

	"github.com/miekg/dns"
)

// Ring is the answer to one question packed once as a list of units (the
// records of one endpoint each) in groups, so that a reply can take any
// rotation of each group and the longest prefix that fits the client's
// buffer by copying bytes: no records are built, sorted or shuffled per
// query, and nothing is allocated.
//
// A reply lists the groups in order (the first one, say this cluster's
// endpoints, before the second), each from its rotation offset on and
// wrapping around; it takes units from the front of that order while
// they fit, and never sets TC. Every record's owner name is a pointer to
// the question name and no record points into another, so any such
// choice of units is a valid answer section. The additional section is
// sent only with every unit, when it fits as well.
type Ring struct {
	// Name is the question name (lower case, without escapes).
	Name string
	// head is the reply's header (QR and AA, QDCOUNT 1) and question.
	head   []byte
	groups []RingGroup
	units  int
	// recLen, when not 0, is the length of every record (A, AAAA): the
	// record count is the octets over it; else every unit has perUnit.
	recLen  int
	perUnit int
	max     int
	rotate  bool
	extraN  int
	// counted: the groups have Count and PairCount (see RingGroup).
	counted bool
	// unitLen and pairLen, when unitLen is not 0, are the octets of every
	// unit in the answer and in the paired one (the usual case: one
	// address per endpoint): Choose divides instead of searching.
	unitLen, pairLen int
	next             atomic.Uint32
}

// MaxGroups is the most groups (with units) a Ring has: the tiers of
// local-first answers (this cluster, its region, the rest).
const MaxGroups = 3

// Offsets are the rotation offsets of a reply's groups (see Choose).
type Offsets [MaxGroups]int

// RingGroup is one group of units: Recs holds their answer records in
// order, Ends[i] the octets of units [0, i) (len(Ends) is the number of
// units plus one). Pair, when not nil, are the Ends of the same units in
// another answer that must name the same units (AAAA for A): a reply
// takes only as many units as fit in both. Extra and ExtraEnds are the
// units' additional records in the same way.
//
// Count and PairCount, when not nil (with Pair), are the number of units
// among [0, i) that have records in this answer and in the paired one: a
// unit may have none in one of them (an endpoint with one address
// family), and then takes no octets there. The units with records in
// both are shared: a reply and the paired reply of the same buffer and
// rotation offsets hold the same shared units (see Choose). Without
// Count, every unit has records in both. The paired rings have the same
// units in the same groups.
type RingGroup struct {
	Recs             []byte
	Ends             []uint32
	Pair             []uint32
	Count, PairCount []uint32
	Extra            []byte
	ExtraEnds        []uint32
	ExtraCount       int
}

func (g *RingGroup) n() int { return len(g.Ends) - 1 }

// RingOptions say how replies take units from a Ring.
type RingOptions struct {
	// RecLen is the length of every answer record (A 16, AAAA 28 octets:
	// a compressed owner name); 0 when they differ, and then PerUnit is
	// the number of records of every unit (SRV: one per port).
	RecLen, PerUnit int
	// Max caps the units of a reply (0: none); with Count, the units
	// with records in the reply, and in the paired one.
	Max int
	// Rotate starts each group of successive replies one unit further,
	// from Start on: paired rings given the same Start turn in step.
	Rotate bool
	Start  uint32
}

// AddrRRLen and AAAARRLen are the lengths of an address record whose
// owner name is compressed to a pointer.
const (
	ARRLen    = 2 + 10 + 4
	AAAARRLen = 2 + 10 + 16
)

// NewRing returns the Ring of the question (qname, lower case, and
// qtype) answered by groups (the empty ones left out); nil when qname
// has escapes or is not a valid name, there are no units, or more than
// MaxGroups groups have some.
func NewRing(qname string, qtype uint16, groups []RingGroup, o RingOptions) *Ring {
	if strings.IndexByte(qname, '\\') >= 0 || len(qname) == 0 || len(qname) > 254 {
		return nil
	}
	head := make([]byte, 12+questionLen(qname))
	q := &dns.Question{Name: qname, Qtype: qtype, Qclass: dns.ClassINET}
	if _, ok := putQuestion(head, &dns.Msg{}, q, dns.RcodeSuccess); !ok {
		return nil
	}
	g := &Ring{Name: qname, head: head, recLen: o.RecLen, perUnit: o.PerUnit, max: o.Max, rotate: o.Rotate}
	if o.Rotate {
		g.next.Store(o.Start)
	}
	for _, gr := range groups {
		if gr.n() > 0 {
			g.groups = append(g.groups, gr)
			g.units += gr.n()
			g.extraN += gr.ExtraCount
			g.counted = g.counted || gr.Count != nil
		}
	}
	if g.units == 0 || len(g.groups) > MaxGroups {
		return nil
	}
	if g.max <= 0 || g.max > g.units {
		g.max = g.units
	}
	if !g.counted {
		g.unitLen, g.pairLen = uniform(g.groups)
	}
	return g
}

// uniform returns the octets every unit of groups has in the answer and
// in the paired one (0 when there is no pair), or 0, 0 when they differ.
func uniform(groups []RingGroup) (unit, pair int) {
	unit, pair = -1, -1
	for i := range groups {
		gr := &groups[i]
		for j := 1; j < len(gr.Ends); j++ {
			u, p := int(gr.Ends[j]-gr.Ends[j-1]), 0
			if gr.Pair != nil {
				p = int(gr.Pair[j] - gr.Pair[j-1])
			}
			if unit < 0 {
				unit, pair = u, p
			}
			if u != unit || p != pair || u == 0 {
				return 0, 0
			}
		}
	}
	return max(unit, 0), max(pair, 0)
}

// Units is the number of units of the ring.
func (g *Ring) Units() int { return g.units }

// window is the octets of j units of a group of n from offset o on,
// wrapping around, by ends.
func window(ends []uint32, n, o, j int) int {
	if o+j <= n {
		return int(ends[o+j] - ends[o])
	}
	return int(ends[n]-ends[o]) + int(ends[o+j-n])
}

// size returns the octets of the first k units at offsets off, in the
// answer (by Ends) and in the paired one (by Pair).
func (g *Ring) size(k int, off *Offsets) (ans, pair int) {
	for i := range g.groups {
		gr := &g.groups[i]
		j := min(k, gr.n())
		ans += window(gr.Ends, gr.n(), off[i], j)
		if gr.Pair != nil {
			pair += window(gr.Pair, gr.n(), off[i], j)
		}
		k -= j
	}
	return ans, pair
}

// counts returns the units with records in the answer and in the paired
// one among the first k at offsets off (k, k without Count).
func (g *Ring) counts(k int, off *Offsets) (own, pair int) {
	if !g.counted {
		return k, k
	}
	for i := range g.groups {
		gr := &g.groups[i]
		j := min(k, gr.n())
		own += window(gr.Count, gr.n(), off[i], j)
		pair += window(gr.PairCount, gr.n(), off[i], j)
		k -= j
	}
	return own, pair
}

// largest returns the largest k in [lo, hi] for which ok holds, given
// that it holds for lo and, past some k, for none after: sizes and
// counts grow with k. O(log(hi-lo)) calls.
func largest(lo, hi int, ok func(int) bool) int {
	if ok(hi) {
		return hi
	}
	for hi-lo > 1 { // ok(lo), !ok(hi)
		mid := int(uint(lo+hi) >> 1)
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// Choose returns how many units a reply of at most limit octets (with
// an OPT record when opt) takes and the groups' rotation offsets, and
// whether it carries the additional section; 0 units when not even one
// fits. With Rotate, every call turns the ring one unit further.
//
// Paired rings (Pair) take the longest prefix of units that fits both
// replies. With Count, each reply then takes the units that follow with
// records of its own only (one address family), as long as they fit and
// no shared unit comes: the two replies hold the same shared units, and
// each as many others as fit. Only when that leaves a reply without
// records (its first unit with any lies past what fits the paired
// reply) does it take what fits of its own alone.
func (g *Ring) Choose(limit int, opt bool) (k int, off Offsets, extra bool) {
	room := limit - len(g.head)
	if opt {
		room -= optLen
	}
	if g.rotate && len(g.groups) > 0 {
		c := g.next.Add(1) - 1
		for i := range g.groups {
			off[i] = int(c % uint32(g.groups[i].n())) // #nosec G115 -- a group has fewer than 2^32 units
		}
	}
	if room < 0 {
		return 0, off, false
	}
	k = g.choose(room, &off)
	return k, off, g.withExtra(k, room, &off)
}

// choose is Choose's number of units for room octets at offsets off.
func (g *Ring) choose(room int, off *Offsets) int {
	if g.unitLen > 0 {
		k := min(g.max, room/g.unitLen)
		if g.pairLen > 0 && room/g.pairLen > 0 {
			k = min(k, room/g.pairLen)
		}
		return k
	}
	if !g.counted {
		k := largest(0, g.max, func(k int) bool {
			a, p := g.size(k, off)
			return a <= room && p <= room
		})
		if k == 0 && g.groups[0].Pair != nil {
			k = largest(0, g.max, func(k int) bool { a, _ := g.size(k, off); return a <= room })
		}
		return k
	}
	k := largest(0, g.units, func(k int) bool {
		a, p := g.size(k, off)
		c, pc := g.counts(k, off)
		return a <= room && p <= room && c <= g.max && pc <= g.max
	})
	c, pc := g.counts(k, off)
	shared := c + pc - k // every unit has records in one reply at least
	k = largest(k, g.units, func(k int) bool {
		a, _ := g.size(k, off)
		c, pc := g.counts(k, off)
		return a <= room && c <= g.max && c+pc-k == shared
	})
	if c, _ = g.counts(k, off); c > 0 {
		return k
	}
	k = largest(0, g.units, func(k int) bool {
		a, _ := g.size(k, off)
		c, _ := g.counts(k, off)
		return a <= room && c <= g.max
	})
	if c, _ = g.counts(k, off); c == 0 {
		return 0
	}
	return k
}

// withExtra reports whether a reply of k units at offsets off carries
// the additional section: only with every unit, when it fits as well.
func (g *Ring) withExtra(k, room int, off *Offsets) bool {
	if k != g.units || g.extraN == 0 {
		return false
	}
	a, _ := g.size(k, off)
	x := 0
	for i := range g.groups {
		gr := &g.groups[i]
		x += int(gr.ExtraEnds[gr.n()])
	}
	return a+x <= room
}

// AppendReply appends the reply to r to dst: k units at offsets off (see
// Choose), the additional section when extra, the query's ID, RD and CD
// bits and question-name case, and the reply's OPT record for opt (nil:
// none). It reports false, appending nothing, when k is 0 or r is not a
// QUERY of one question of class IN whose name is g.Name up to ASCII
// case.
func (g *Ring) AppendReply(dst []byte, r *dns.Msg, opt *dns.OPT, k int, off Offsets, extra bool) ([]byte, bool) {
	if k <= 0 || len(r.Question) != 1 || r.Opcode != dns.OpcodeQuery || r.Question[0].Qclass != dns.ClassINET {
		return dst, false
	}
	name := r.Question[0].Name
	if name != g.Name && !equalFold(name, g.Name) {
		return dst, false
	}
	start := len(dst)
	dst = append(dst, g.head...)
	if !patch(dst[start:], r, name) {
		return dst[:start], false
	}
	left := k
	for i := range g.groups {
		gr := &g.groups[i]
		j := min(left, gr.n())
		dst = appendWindow(dst, gr.Recs, gr.Ends, gr.n(), off[i], j)
		left -= j
	}
	var an int
	if g.recLen > 0 {
		an = (len(dst) - start - len(g.head)) / g.recLen
	} else {
		an = k * g.perUnit
	}
	ar := 0
	if extra {
		for i := range g.groups {
			gr := &g.groups[i]
			dst = appendWindow(dst, gr.Extra, gr.ExtraEnds, gr.n(), off[i], gr.n())
		}
		ar = g.extraN
	}
	if opt != nil {
		var o []byte
		dst, o = grow(dst, optLen)
		putOPT(o, opt)
		ar++
	}
	buf := dst[start:]
	binary.BigEndian.PutUint16(buf[6:], uint16(an))  // #nosec G115 -- a reply of at most 64 KiB
	binary.BigEndian.PutUint16(buf[10:], uint16(ar)) // #nosec G115 -- idem
	return dst, true
}

// appendWindow appends the bytes of j units from offset o on (wrapping
// around) of recs, by ends, to dst.
func appendWindow(dst, recs []byte, ends []uint32, n, o, j int) []byte {
	if j == 0 {
		return dst
	}
	if o+j <= n {
		return append(dst, recs[ends[o]:ends[o+j]]...)
	}
	dst = append(dst, recs[ends[o]:ends[n]]...)
	return append(dst, recs[:ends[o+j-n]]...)
}

// AppendAddrRR appends an A or AAAA record of ip (by its family) whose
// owner name is the question's (a pointer) to dst.
func AppendAddrRR(dst []byte, ip []byte, ttl uint32) []byte {
	t := dns.TypeA
	if len(ip) == 16 {
		t = dns.TypeAAAA
	}
	dst = append(dst, 0xc0, 12)
	dst = binary.BigEndian.AppendUint16(dst, t)
	dst = binary.BigEndian.AppendUint16(dst, dns.ClassINET)
	dst = binary.BigEndian.AppendUint32(dst, ttl)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(ip))) // #nosec G115 -- 4 or 16
	return append(dst, ip...)
}

// AppendNamedAddrRR is AppendAddrRR with owner written in full (an
// additional record, which cannot point into a rotated answer).
func AppendNamedAddrRR(dst []byte, owner string, ip []byte, ttl uint32) []byte {
	dst = appendName(dst, owner)
	t := dns.TypeA
	if len(ip) == 16 {
		t = dns.TypeAAAA
	}
	dst = binary.BigEndian.AppendUint16(dst, t)
	dst = binary.BigEndian.AppendUint16(dst, dns.ClassINET)
	dst = binary.BigEndian.AppendUint32(dst, ttl)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(ip))) // #nosec G115 -- 4 or 16
	return append(dst, ip...)
}

// AppendSRVRR appends an SRV record whose owner name is the question's
// (a pointer) to dst; the target is written in full, as RFC 2782 asks.
func AppendSRVRR(dst []byte, ttl uint32, priority, weight, port uint16, target string) []byte {
	dst = append(dst, 0xc0, 12)
	dst = binary.BigEndian.AppendUint16(dst, dns.TypeSRV)
	dst = binary.BigEndian.AppendUint16(dst, dns.ClassINET)
	dst = binary.BigEndian.AppendUint32(dst, ttl)
	dst = binary.BigEndian.AppendUint16(dst, uint16(6+nameLen(target))) // #nosec G115 -- a name is at most 255 octets
	dst = binary.BigEndian.AppendUint16(dst, priority)
	dst = binary.BigEndian.AppendUint16(dst, weight)
	dst = binary.BigEndian.AppendUint16(dst, port)
	return appendName(dst, target)
}

// nameLen is the wire length of a fully qualified name without escapes.
func nameLen(name string) int {
	if name == "." {
		return 1
	}
	return len(name) + 1
}

// appendName appends a fully qualified name without escapes, label by
// label, uncompressed.
func appendName(dst []byte, name string) []byte {
	start := 0
	for i := 0; i < len(name); i++ {
		if name[i] != '.' {
			continue
		}
		if i > start {
			dst = append(dst, byte(i-start)) // #nosec G115 -- a label is at most 63 octets
			dst = append(dst, name[start:i]...)
		}
		start = i + 1
	}
	return append(dst, 0)
}

package answers

import (
	"sync/atomic"

	"github.com/miekg/dns"
)

// Packed is a reply to one question packed once into DNS wire format, so
// that the query path copies bytes instead of compressing and packing
// records on every query (for a 50-record answer, packing is most of the
// cost of a query). A Packed is immutable.
//
// The template has ID 0, the flags QR and AA, one question (Name, the
// record type, class IN), the answer section, the additional section (in
// Full only) and no OPT record; names are compressed. A reply is the
// template with the query's ID, RD and CD bits and question-name case
// written over it, and the OPT record appended when the query has one.
type Packed struct {
	// Name is the question name of the template: lower case, the owner
	// name of the answer records.
	Name string
	// Full holds the answer and additional sections; Short the answer
	// only (nil when there are no additional records, or they do not
	// change the size).
	Full, Short []byte
}

// packedSet holds a node's packed replies by record type.
type packedSet [3]*Packed

func packedSlot(qtype uint16) int {
	switch qtype {
	case dns.TypeA:
		return 0
	case dns.TypeAAAA:
		return 1
	case dns.TypeSRV:
		return 2
	}
	return -1
}

// Packed returns the packed reply of qtype at n, whose lower-case owner
// name is qname, packing it on first use: only names that are asked for
// pay its memory. It returns nil for NODATA and for types it does not
// pack. Safe for concurrent use; two racing first queries may both pack,
// and one result is kept.
func (n *Node) Packed(qname string, qtype uint16) *Packed {
	slot := packedSlot(qtype)
	if slot < 0 || n == emptyNode {
		return nil
	}
	cur := n.packed.Load()
	if cur == nil || cur[slot] == nil {
		answer, extra := n.Records(qtype)
		if len(answer) == 0 {
			return nil
		}
		p := Pack(qname, qtype, answer, extra)
		if p == nil {
			p = unpackable // remembered: no use trying again
		}
		cur = n.storePacked(cur, slot, p)
	}
	if cur[slot] == unpackable {
		return nil
	}
	return cur[slot]
}

// unpackable marks a reply that cannot be packed (a name longer than DNS
// allows, under a long zone); the dns.Msg path answers it.
var unpackable = &Packed{}

// storePacked sets slot to p unless another query did first, and returns
// the node's packed replies after that.
func (n *Node) storePacked(cur *packedSet, slot int, p *Packed) *packedSet {
	for {
		var next packedSet
		if cur != nil {
			if cur[slot] != nil {
				return cur
			}
			next = *cur
		}
		next[slot] = p
		if n.packed.CompareAndSwap(cur, &next) {
			return &next
		}
		cur = n.packed.Load()
	}
}

// Pack packs the reply template of a question (qname, qtype) answered
// with answer and extra (see Packed); nil when it cannot be packed.
func Pack(qname string, qtype uint16, answer, extra []dns.RR) *Packed {
	m := &dns.Msg{
		MsgHdr:   dns.MsgHdr{Response: true, Authoritative: true},
		Compress: true,
		Question: []dns.Question{{Name: qname, Qtype: qtype, Qclass: dns.ClassINET}},
		Answer:   answer,
	}
	short, err := m.Pack()
	if err != nil || len(short) > dns.MaxMsgSize {
		// No transport can carry it whole: the dns.Msg path truncates.
		return nil
	}
	p := &Packed{Name: qname, Full: short}
	if len(extra) > 0 {
		m.Extra = extra
		full, err := m.Pack()
		if err == nil && len(full) > len(short) && len(full) <= dns.MaxMsgSize {
			p.Full, p.Short = full, short
		}
	}
	return p
}

// atomicPacked is the lazily filled packed replies of a node.
type atomicPacked = atomic.Pointer[packedSet]

package answers

import (
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/mcs-dns/mcs-dns/internal/dnswire"
)

// The query path sends a node's positive replies as bytes: its reply
// templates, packed once on first use and kept on the node.

// packedSet holds a node's packed replies by record type (packedSlot):
// templates, and the rings of shaped answers (shape.go).
type packedSet struct {
	tmpl  [3]*dnswire.Template
	rings [3]*dnswire.Ring
}

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

// Packed returns the reply template of qtype at n (see dnswire.Template),
// whose lower-case owner name is qname, packing it on first use: only
// names that are asked for pay its memory. It returns nil for NODATA and
// for types it does not pack. Safe for concurrent use; two racing first
// queries may both pack, and one result is kept.
func (n *Node) Packed(qname string, qtype uint16) *dnswire.Template {
	slot := packedSlot(qtype)
	if slot < 0 || n == emptyNode {
		return nil
	}
	cur := n.packed.Load()
	if cur == nil || cur.tmpl[slot] == nil {
		answer, extra := n.Records(qtype)
		if len(answer) == 0 {
			return nil
		}
		p := dnswire.NewTemplate(qname, qtype, answer, extra)
		if p == nil {
			p = unpackable // remembered: no use trying again
		}
		cur = n.storePacked(cur, slot, p)
	}
	if cur.tmpl[slot] == unpackable {
		return nil
	}
	return cur.tmpl[slot]
}

// unpackable marks a reply that cannot be packed (a name longer than DNS
// allows, under a long zone); the dns.Msg path answers it.
var unpackable = &dnswire.Template{}

// storePacked sets slot to p unless another query did first, and returns
// the node's packed replies after that.
func (n *Node) storePacked(cur *packedSet, slot int, p *dnswire.Template) *packedSet {
	for {
		var next packedSet
		if cur != nil {
			if cur.tmpl[slot] != nil {
				return cur
			}
			next.tmpl, next.rings = cur.tmpl, cur.rings
		}
		next.tmpl[slot] = p
		if n.packed.CompareAndSwap(cur, &next) {
			return &next
		}
		cur = n.packed.Load()
	}
}

// storeRings sets the rings given (not nil) that are not set yet, and
// returns the node's packed replies after that.
func (n *Node) storeRings(cur *packedSet, rings [3]*dnswire.Ring) *packedSet {
	for {
		var next packedSet
		if cur != nil {
			next.tmpl, next.rings = cur.tmpl, cur.rings
		}
		changed := false
		for i, r := range rings {
			if r != nil && next.rings[i] == nil {
				next.rings[i], changed = r, true
			}
		}
		if !changed {
			return cur
		}
		if n.packed.CompareAndSwap(cur, &next) {
			return &next
		}
		cur = n.packed.Load()
	}
}

// atomicPacked is the lazily filled packed replies of a node.
type atomicPacked = atomic.Pointer[packedSet]

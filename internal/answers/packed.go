package answers

import (
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/mcs-dns/mcs-dns/internal/dnswire"
)

// The query path sends a node's positive replies as bytes: its reply
// templates, packed once on first use and kept on the node.

// packedSet holds a node's packed replies by record type.
type packedSet [3]*dnswire.Template

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
	if cur == nil || cur[slot] == nil {
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
	if cur[slot] == unpackable {
		return nil
	}
	return cur[slot]
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

// atomicPacked is the lazily filled packed replies of a node.
type atomicPacked = atomic.Pointer[packedSet]

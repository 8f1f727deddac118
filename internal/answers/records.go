package answers

import (
	"net/netip"
	"slices"

	"github.com/miekg/dns"
)

// Building a Node's records (dns.RR) when a query asks for them.

// Records returns the answer and additional records of qtype at n, built
// for this call (the caller may keep and modify the slices). No answer
// records and n != nil means NODATA.
func (n *Node) Records(qtype uint16) (answer, extra []dns.RR) {
	switch qtype {
	case dns.TypeA:
		if n.v4 == 0 {
			return nil, nil
		}
		return addrRRs(nil, n.owner, n.addrs[:min(int(n.v4), maxRRs(minARR))], n.ttl), nil
	case dns.TypeAAAA:
		if len(n.addrs) == int(n.v4) {
			return nil, nil
		}
		v6 := n.addrs[n.v4:]
		return addrRRs(nil, n.owner, v6[:min(len(v6), maxRRs(minAAAARR))], n.ttl), nil
	case dns.TypeSRV:
		if n.srv == nil {
			return nil, nil
		}
		return n.srvRRs(), n.srvExtra()
	}
	return nil, nil
}

// aRR and aaaaRR hold an address record and its address octets in one
// allocation.
type aRR struct {
	dns.A
	ip [4]byte
}

type aaaaRR struct {
	dns.AAAA
	ip [16]byte
}

// addrRRs appends the address records of ips (all of one family) to out,
// in two allocations.
func addrRRs(out []dns.RR, owner string, ips []netip.Addr, ttl uint32) []dns.RR {
	if len(ips) == 0 {
		return out
	}
	out = slices.Grow(out, len(ips))
	if ips[0].Is4() {
		recs := make([]aRR, len(ips))
		for i, ip := range ips {
			r := &recs[i]
			r.ip = ip.As4()
			r.A = dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: r.ip[:]}
			out = append(out, &r.A)
		}
		return out
	}
	recs := make([]aaaaRR, len(ips))
	for i, ip := range ips {
		r := &recs[i]
		r.ip = ip.As16()
		r.AAAA = dns.AAAA{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: r.ip[:]}
		out = append(out, &r.AAAA)
	}
	return out
}

// Wire sizes of the smallest record of each type in a reply (owner name
// compressed to a pointer; an SRV target at least the root): a message of
// at most dns.MaxMsgSize octets holds no more than dns.MaxMsgSize divided
// by these, so Records builds no more (a bare-name SRV of a large headless
// service with many ports would otherwise build endpoints x ports records
// per query, almost all of them thrown away by the fitting).
const (
	minARR    = 2 + 10 + 4
	minAAAARR = 2 + 10 + 16
	minSRVRR  = 2 + 10 + 6 + 1
)

func maxRRs(minLen int) int { return dns.MaxMsgSize / minLen }

func (n *Node) srvRRs() []dns.RR {
	spec := n.srv
	all := len(spec.targets) * len(spec.ports)
	weight := uint16(100 / all) // #nosec G115 -- at most 100
	if weight == 0 {
		weight = 1
	}
	count := min(all, maxRRs(minSRVRR))
	recs := make([]dns.SRV, 0, count)
	out := make([]dns.RR, count)
	hdr := dns.RR_Header{Name: n.owner, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: n.ttl}
	for _, t := range spec.targets {
		for _, p := range spec.ports {
			if len(recs) == count {
				return out
			}
			recs = append(recs, dns.SRV{Hdr: hdr, Priority: 0, Weight: weight, Port: p, Target: t.owner})
			out[len(recs)-1] = &recs[len(recs)-1]
		}
	}
	return out
}

func (n *Node) srvExtra() []dns.RR {
	count := 0
	for _, t := range n.srv.targets {
		count += len(t.addrs)
	}
	if count == 0 {
		return nil
	}
	limit := maxRRs(minARR)
	out := make([]dns.RR, 0, min(count, limit))
	for _, t := range n.srv.targets {
		v4, v6 := t.addrs[:t.v4], t.addrs[t.v4:]
		v4 = v4[:min(len(v4), limit-len(out))]
		out = addrRRs(out, t.owner, v4, t.ttl)
		v6 = v6[:min(len(v6), limit-len(out))]
		out = addrRRs(out, t.owner, v6, t.ttl)
		if len(out) == limit {
			break
		}
	}
	return out
}

package dnswire

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

// pairedUnit is one endpoint of a paired-ring test: its IPv4 and IPv6
// addresses (counts) and whether it is in the first group.
type pairedUnit struct {
	v4, v6 int
	local  bool
}

// pairedRings builds the A and AAAA rings of units the way a service
// name's are built (answers.Set.addrRings): every unit in both, in the
// same groups, paired, with Count when some unit has one family only.
func pairedRings(units []pairedUnit, o RingOptions) (a, aaaa *Ring, groups [2][]int) {
	for i, u := range units {
		if u.local {
			groups[0] = append(groups[0], i)
		} else {
			groups[1] = append(groups[1], i)
		}
	}
	mixed := false
	for _, u := range units {
		mixed = mixed || u.v4 == 0 || u.v6 == 0
	}
	var g4s, g6s []RingGroup
	for _, g := range groups {
		g4 := RingGroup{Ends: []uint32{0}}
		g6 := RingGroup{Ends: []uint32{0}}
		if mixed {
			g4.Count, g6.Count = []uint32{0}, []uint32{0}
		}
		for _, ui := range g {
			u := units[ui]
			for i := range u.v4 {
				g4.Recs = AppendAddrRR(g4.Recs, []byte{10, 0, byte(ui), byte(i)}, 5)
			}
			for i := range u.v6 {
				g6.Recs = AppendAddrRR(g6.Recs, []byte{0xfd, 14: byte(ui), 15: byte(i)}, 5)
			}
			g4.Ends = append(g4.Ends, uint32(len(g4.Recs)))
			g6.Ends = append(g6.Ends, uint32(len(g6.Recs)))
			if mixed {
				g4.Count = append(g4.Count, g4.Count[len(g4.Count)-1]+uint32(min(u.v4, 1)))
				g6.Count = append(g6.Count, g6.Count[len(g6.Count)-1]+uint32(min(u.v6, 1)))
			}
		}
		g4.Pair, g6.Pair = g6.Ends, g4.Ends
		g4.PairCount, g6.PairCount = g6.Count, g4.Count
		g4s, g6s = append(g4s, g4), append(g6s, g6)
	}
	o.RecLen = ARRLen
	a = NewRing("svc.example.", dns.TypeA, g4s, o)
	o.RecLen = AAAARRLen
	aaaa = NewRing("svc.example.", dns.TypeAAAA, g6s, o)
	return a, aaaa, groups
}

// order is the units a reply of k units at offsets off lists.
func order(groups [2][]int, k int, off Offsets) []int {
	var out []int
	gi := 0
	for _, g := range groups {
		if len(g) == 0 {
			continue
		}
		for j := range len(g) {
			if len(out) == k {
				return out
			}
			out = append(out, g[(off[gi]+j)%len(g)])
		}
		gi++
	}
	return out
}

// wantUnits is Choose's rule spelled out, by linear scans over seq (the
// units in the reply's order): the longest prefix that fits both
// replies, then the units that follow with records in this reply only,
// while they fit and no unit with both families comes; a reply with no
// records then takes what fits of its own alone.
// It reports whether the reply fell back to its own family alone.
func wantUnits(units []pairedUnit, seq []int, v6 bool, room, maxUnits int) (k int, alone bool) {
	own := func(u pairedUnit) (n, octets int) {
		if v6 {
			return u.v6, u.v6 * AAAARRLen
		}
		return u.v4, u.v4 * ARRLen
	}
	other := func(u pairedUnit) (n, octets int) {
		if v6 {
			return u.v4, u.v4 * ARRLen
		}
		return u.v6, u.v6 * AAAARRLen
	}
	type sums struct{ octets, pairOctets, count, pairCount, shared int }
	prefix := make([]sums, len(seq)+1)
	for i, ui := range seq {
		p := prefix[i]
		n, b := own(units[ui])
		pn, pb := other(units[ui])
		p.octets += b
		p.pairOctets += pb
		p.count += min(n, 1)
		p.pairCount += min(pn, 1)
		if n > 0 && pn > 0 {
			p.shared++
		}
		prefix[i+1] = p
	}
	ownFits := func(k int) bool { return prefix[k].octets <= room && prefix[k].count <= maxUnits }
	kp := 0
	for k := range prefix {
		if ownFits(k) && prefix[k].pairOctets <= room && prefix[k].pairCount <= maxUnits {
			kp = k
		}
	}
	k = kp
	for x := kp; x < len(prefix) && ownFits(x) && prefix[x].shared == prefix[kp].shared; x++ {
		k = x
	}
	if prefix[k].count == 0 {
		k, alone = 0, true
		for x := 0; x < len(prefix) && ownFits(x); x++ {
			k = x
		}
		if prefix[k].count == 0 {
			k = 0
		}
	}
	return k, alone
}

// FuzzPairedRings: the A and AAAA rings of endpoints of either or both
// families, local ones first, rotating from the same start, cut at any
// buffer size and max_answers. Each reply fits and is what the rule says
// (wantUnits); the two replies hold the same dual-stack endpoints unless
// one of them would have been empty; a reply is empty only when not one
// record of its family fits (that of the first endpoint).
func FuzzPairedRings(f *testing.F) {
	f.Add([]byte{0x02, 0x00, 0, 0, 0x15, 0x05, 0x04, 0x01, 0x14, 0x11, 0x05, 0x04, 0x04, 0x01})
	f.Add([]byte{0x04, 0xd0, 3, 7, 0x14, 0x14, 0x14, 0x14, 0x14, 0x14, 0x14, 0x14, 0x14, 0x14, 0x14, 0x14, 0x14, 0x14, 0x14, 0x14, 0x14, 0x14, 0x14, 0x14, 0x01, 0x05})
	f.Add([]byte{0x02, 0x00, 5, 1, 0x05, 0x06, 0x09, 0x0a, 0x15, 0x16, 0x19, 0x1a, 0x01, 0x04, 0x11, 0x14})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 5 {
			return
		}
		limit := int(binary.BigEndian.Uint16(data)) % 2048
		maxUnits, start := int(data[2]%16), uint32(data[3])
		var units []pairedUnit
		has4, has6 := false, false
		for _, b := range data[4:] {
			u := pairedUnit{v4: int(b & 3 % 3), v6: int(b >> 2 & 3 % 3), local: b&0x10 != 0}
			if u.v4 == 0 && u.v6 == 0 {
				continue
			}
			has4, has6 = has4 || u.v4 > 0, has6 || u.v6 > 0
			units = append(units, u)
		}
		if !has4 || !has6 {
			return // one family: not paired
		}
		a, aaaa, groups := pairedRings(units, RingOptions{Max: maxUnits, Rotate: true, Start: start})
		if a == nil || aaaa == nil {
			t.Fatal("no rings")
		}
		if maxUnits == 0 {
			maxUnits = len(units)
		}
		room := limit - len(a.head)
		for range 3 {
			ka, offA, _ := a.Choose(limit, false)
			k6, off6, _ := aaaa.Choose(limit, false)
			if offA != off6 {
				t.Fatalf("offsets %v and %v: the rings do not turn in step", offA, off6)
			}
			var shared [2][]int
			fellBack := false
			for i, r := range []struct {
				ring  *Ring
				k     int
				v6    bool
				qtype uint16
			}{{a, ka, false, dns.TypeA}, {aaaa, k6, true, dns.TypeAAAA}} {
				seq := order(groups, len(units), offA)
				want, alone := 0, false
				if room >= 0 {
					want, alone = wantUnits(units, seq, r.v6, room, maxUnits)
				}
				fellBack = fellBack || alone
				if r.k != want {
					t.Fatalf("v6 %v, limit %d, max %d, offsets %v: %d units, want %d", r.v6, limit, maxUnits, offA, r.k, want)
				}
				records, fits := 0, false
				for _, ui := range seq[:r.k] {
					u := units[ui]
					n, other := u.v4, u.v6
					if r.v6 {
						n, other = other, n
					}
					records += n
					if n > 0 && other > 0 {
						shared[i] = append(shared[i], ui)
					}
				}
				for _, ui := range seq { // the first unit with records of the family
					n, octets := units[ui].v4, units[ui].v4*ARRLen
					if r.v6 {
						n, octets = units[ui].v6, units[ui].v6*AAAARRLen
					}
					if n > 0 {
						fits = octets <= room
						break
					}
				}
				if records == 0 && fits {
					t.Fatalf("v6 %v, limit %d: an empty reply, yet the first endpoint of the family fits", r.v6, limit)
				}
				q := new(dns.Msg)
				q.SetQuestion("svc.example.", r.qtype)
				b, ok := r.ring.AppendReply(nil, q, nil, r.k, offA, false)
				if ok != (records > 0) {
					t.Fatalf("v6 %v: reply %v with %d records", r.v6, ok, records)
				}
				if !ok {
					continue
				}
				m := new(dns.Msg)
				if err := m.Unpack(b); err != nil || len(b) > limit || len(m.Answer) != records || m.Truncated {
					t.Fatalf("v6 %v: %d octets (limit %d), %d answers (want %d), err %v", r.v6, len(b), limit, len(m.Answer), records, err)
				}
				pk, _ := r.ring.counts(r.k, &offA)
				own := 0
				for _, ui := range seq[:r.k] {
					if r.v6 && units[ui].v6 > 0 || !r.v6 && units[ui].v4 > 0 {
						own++
					}
				}
				if pk != own || own > maxUnits {
					t.Fatalf("v6 %v: %d units with records, counted %d, max %d", r.v6, own, pk, maxUnits)
				}
			}
			if !fellBack && !slices.Equal(shared[0], shared[1]) {
				t.Fatalf("limit %d, max %d, offsets %v: A has dual-stack units %v, AAAA %v", limit, maxUnits, offA, shared[0], shared[1])
			}
		}
	})
}

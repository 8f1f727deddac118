package answers

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
	"sync/atomic"
)

// ptrTable maps addresses to their PTR targets for the Index. It is built
// for memory and for lock-free reads: a power-of-two number of shards,
// each an immutable array of entries sorted by address, published through
// an atomic pointer. A read is two atomic loads and a binary search of a
// few dozen entries; a write (serialised by the Index's mutex) copies the
// one shard it changes. An IPv4 entry is 16 bytes, no allocation of its
// own: a hash map keeping an entry per address, as xsync's does, takes
// three times that, which at 100,000 endpoints is several MiB.
//
// The shards double when they average more than ptrShardGrowAt entries,
// so that a write copies a bounded amount; they never shrink.
type ptrTable[K ptrKey[K]] struct {
	cur atomic.Pointer[ptrShards[K]]
	n   int // entries; writer-only
}

// ptrKey is an address as a table key: IPv4 as a uint32, IPv6 as two
// uint64s, both in network order so that keys sort as addresses do.
type ptrKey[K any] interface {
	comparable
	compare(K) int
	hash() uint32
}

type key4 uint32

func (k key4) compare(o key4) int { return cmp.Compare(k, o) }

// hash is Fibonacci hashing: neighbouring addresses, as pods of one
// cluster have, land in different shards.
func (k key4) hash() uint32 { return uint32(k) * 0x9e3779b1 }

type key6 struct{ hi, lo uint64 }

func (k key6) compare(o key6) int {
	if c := cmp.Compare(k.hi, o.hi); c != 0 {
		return c
	}
	return cmp.Compare(k.lo, o.lo)
}

func (k key6) hash() uint32 {
	x := (k.hi ^ k.lo*0x9e3779b97f4a7c15) * 0xbf58476d1ce4e5b9
	return uint32(x >> 32)
}

func keyOf4(ip netip.Addr) key4 {
	b := ip.As4()
	return key4(binary.BigEndian.Uint32(b[:]))
}

func keyOf6(ip netip.Addr) key6 {
	b := ip.As16()
	return key6{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// ptrEntry is one address and its PTR targets (a ptrRef, flattened so
// that an IPv4 entry packs into 16 bytes).
type ptrEntry[K any] struct {
	set *Set
	j   uint32
	key K
}

func (e *ptrEntry[K]) ref() ptrRef { return ptrRef{set: e.set, j: e.j} }

// ptrShards is one generation of the shard array: shard i holds the keys
// whose hash has i as its top bits.
type ptrShards[K any] struct {
	shift  uint8
	shards []atomic.Pointer[[]ptrEntry[K]]
}

const (
	ptrShardBitsMin = 6  // 64 shards to begin with
	ptrShardGrowAt  = 32 // average entries per shard that doubles them
)

func newPTRShards[K any](bits uint8) *ptrShards[K] {
	return &ptrShards[K]{shift: 32 - bits, shards: make([]atomic.Pointer[[]ptrEntry[K]], 1<<bits)}
}

func (s *ptrShards[K]) shard(h uint32) *atomic.Pointer[[]ptrEntry[K]] { return &s.shards[h>>s.shift] }

// entries returns the sorted entries of a shard (nil when empty).
func entriesOf[K any](p *atomic.Pointer[[]ptrEntry[K]]) []ptrEntry[K] {
	if e := p.Load(); e != nil {
		return *e
	}
	return nil
}

func searchKey[K ptrKey[K]](ents []ptrEntry[K], k K) (int, bool) {
	return slices.BinarySearchFunc(ents, k, func(e ptrEntry[K], k K) int { return e.key.compare(k) })
}

// load returns the targets of k. Safe for concurrent use with writers.
func (t *ptrTable[K]) load(k K) (ptrRef, bool) {
	s := t.cur.Load()
	if s == nil {
		return ptrRef{}, false
	}
	ents := entriesOf(s.shard(k.hash()))
	i, ok := searchKey(ents, k)
	if !ok {
		return ptrRef{}, false
	}
	return ents[i].ref(), true
}

// store sets the targets of k. Writers must be serialised.
func (t *ptrTable[K]) store(k K, r ptrRef) {
	s := t.cur.Load()
	if s == nil {
		s = newPTRShards[K](ptrShardBitsMin)
		t.cur.Store(s)
	}
	p := s.shard(k.hash())
	old := entriesOf(p)
	i, found := searchKey(old, k)
	e := ptrEntry[K]{set: r.set, j: r.j, key: k}
	var next []ptrEntry[K]
	if found {
		next = slices.Clone(old)
		next[i] = e
	} else {
		next = make([]ptrEntry[K], len(old)+1)
		copy(next, old[:i])
		next[i] = e
		copy(next[i+1:], old[i:])
		t.n++
	}
	p.Store(&next)
	if !found && t.n > ptrShardGrowAt*len(s.shards) && s.shift > 0 {
		t.grow(s)
	}
}

// delete removes k. Writers must be serialised.
func (t *ptrTable[K]) delete(k K) {
	s := t.cur.Load()
	if s == nil {
		return
	}
	p := s.shard(k.hash())
	old := entriesOf(p)
	i, found := searchKey(old, k)
	if !found {
		return
	}
	t.n--
	if len(old) == 1 {
		p.Store(nil)
		return
	}
	next := make([]ptrEntry[K], 0, len(old)-1)
	next = append(append(next, old[:i]...), old[i+1:]...)
	p.Store(&next)
}

// grow publishes a shard array twice the size of s holding the same
// entries. Readers still holding s see its (unchanged) shards.
func (t *ptrTable[K]) grow(s *ptrShards[K]) {
	n := newPTRShards[K](32 - s.shift + 1)
	for i := range s.shards {
		ents := entriesOf(&s.shards[i])
		// Shard i splits into 2i and 2i+1 by the next bit of the hash;
		// each half stays sorted.
		nHi := 0
		for _, e := range ents {
			nHi += int(e.key.hash() >> n.shift & 1)
		}
		lo := make([]ptrEntry[K], 0, len(ents)-nHi)
		hi := make([]ptrEntry[K], 0, nHi)
		for _, e := range ents {
			if e.key.hash()>>n.shift&1 == 0 {
				lo = append(lo, e)
			} else {
				hi = append(hi, e)
			}
		}
		for half, part := range [2][]ptrEntry[K]{lo, hi} {
			if len(part) > 0 {
				n.shards[2*i+half].Store(&part)
			}
		}
	}
	t.cur.Store(n)
}

// each calls f with every key (in no particular order).
func (t *ptrTable[K]) each(f func(K)) {
	s := t.cur.Load()
	if s == nil {
		return
	}
	for i := range s.shards {
		for _, e := range entriesOf(&s.shards[i]) {
			f(e.key)
		}
	}
}

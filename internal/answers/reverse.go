package answers

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcs-dns/mcs-dns/internal/dnswire"
)

// Empty non-terminals of the reverse zones. A partial reverse name such as
// 96.10.in-addr.arpa. exists (NOERROR, no records) when some address
// below it has PTR records; NXDOMAIN would tell an RFC 8020 resolver that
// nothing below exists. The PTR tables are sharded by a hash of the
// address and cannot answer "any address in this range?", so the question
// is asked of a sorted copy of their keys, built on the first such query
// and rebuilt on a later one once the tables have changed, at most once per
// reverseSnapshotAge: a name that just got its first address answers
// NXDOMAIN for at most that long. Service and PTR queries never touch it.

// reverseSnapshotAge bounds how often the sorted copy is rebuilt.
const reverseSnapshotAge = time.Second

// reverseSnapshot is a sorted copy of the PTR tables' keys.
type reverseSnapshot struct {
	gen   uint64 // reverseENTs.gen when it was taken
	taken time.Time
	v4    []uint32
	v6    [][16]byte
}

// reverseENTs holds the snapshot and serialises its rebuilds.
type reverseENTs struct {
	gen  atomic.Uint64 // bumped on every change of the PTR tables
	snap atomic.Pointer[reverseSnapshot]
	mu   sync.Mutex
}

// IsReverseENT reports whether the lower-case name is a partial reverse
// name (fewer labels than an address has, below in-addr.arpa. or
// ip6.arpa.) with an address that has PTR records below it.
func (ix *Index) IsReverseENT(name string) bool {
	v6, prefix, bits, ok := dnswire.ParseReversePrefix(name)
	if !ok {
		return false
	}
	s := ix.reverseSnapshot()
	if !v6 {
		lo := binary.BigEndian.Uint32(prefix[:4])
		hi := lo | ^uint32(0)>>bits // bits is 8, 16 or 24
		i, _ := slices.BinarySearch(s.v4, lo)
		return i < len(s.v4) && s.v4[i] <= hi
	}
	hi := prefix
	for b := bits; b < 128; b++ {
		hi[b/8] |= 0x80 >> (b % 8)
	}
	i, _ := slices.BinarySearchFunc(s.v6, prefix, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	return i < len(s.v6) && bytes.Compare(s.v6[i][:], hi[:]) <= 0
}

// reverseSnapshot returns a snapshot of the PTR tables' keys no older than
// reverseSnapshotAge when they have changed since (rebuilding it if
// needed; a query finding another one rebuilding uses the old one).
func (ix *Index) reverseSnapshot() *reverseSnapshot {
	e := &ix.rev
	s := e.snap.Load()
	if s != nil && (s.gen == e.gen.Load() || time.Since(s.taken) < reverseSnapshotAge) {
		return s
	}
	if s != nil {
		if !e.mu.TryLock() {
			return s
		}
	} else {
		e.mu.Lock()
	}
	defer e.mu.Unlock()
	if cur := e.snap.Load(); cur != s {
		return cur // rebuilt meanwhile
	}
	n := &reverseSnapshot{gen: e.gen.Load(), taken: time.Now()}
	ix.ptr4.each(func(k key4) { n.v4 = append(n.v4, uint32(k)) })
	ix.ptr6.each(func(k key6) {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], k.hi)
		binary.BigEndian.PutUint64(b[8:], k.lo)
		n.v6 = append(n.v6, b)
	})
	slices.Sort(n.v4)
	slices.SortFunc(n.v6, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	e.snap.Store(n)
	return n
}

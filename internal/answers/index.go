package answers

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/puzpuzpuz/xsync/v3"
)

// Index is the published answer state: one immutable Set per service, the
// namespaces that have names, and PTR targets by reverse name. Readers
// never lock and never wait for writers (the maps are lock-free for
// reads); Put costs O(size of the service it changes), never O(number of
// services).
type Index struct {
	ttl uint32

	services   *xsync.MapOf[string, *Set]
	namespaces *xsync.MapOf[string, int]
	// ptr maps a reverse name to its PTR targets: when one service owns
	// the name, a pointer into that Set's own owners (no allocation
	// beyond the map entry); when several do, a merged entry (key "")
	// with their targets by service key, without duplicates. PTR records
	// are built per query.
	ptr *xsync.MapOf[string, *ptrOwner]

	// mu serialises writers; multi is writer-only bookkeeping: the
	// owners of the reverse names that several services own, by key.
	mu    sync.Mutex
	multi map[string][]*ptrOwner

	serial atomic.Uint32
	// counts, for metrics
	imports   [3]atomic.Int64 // by Type
	endpoints atomic.Int64
}

// NewIndex returns an empty Index whose PTR records carry ttl.
func NewIndex(ttl uint32) *Index {
	ix := &Index{
		ttl:        ttl,
		services:   xsync.NewMapOf[string, *Set](),
		namespaces: xsync.NewMapOf[string, int](),
		ptr:        xsync.NewMapOf[string, *ptrOwner](),
		multi:      map[string][]*ptrOwner{},
	}
	ix.serial.Store(uint32(time.Now().Unix())) // #nosec G115 -- SOA serial from Unix time
	return ix
}

// Service returns the answers of the service with key "<svc>.<ns>", or nil.
func (ix *Index) Service(key string) *Set {
	s, _ := ix.services.Load(key)
	return s
}

// HasNamespace reports whether any service of namespace ns has names.
func (ix *Index) HasNamespace(ns string) bool {
	n, _ := ix.namespaces.Load(ns)
	return n > 0
}

// HasPTR reports whether the lower-case reverse name has PTR records.
func (ix *Index) HasPTR(reverse string) bool {
	o, _ := ix.ptr.Load(reverse)
	return o != nil
}

// ptrOne is a single PTR record and the slice that holds it, allocated
// together.
type ptrOne struct {
	rrs [1]dns.RR
	ptr dns.PTR
}

// PTR returns the PTR records of a lower-case reverse name, or nil: the
// targets of the services that own it, by service key, without
// duplicates. The slice and records are fresh (built per call; one
// allocation for a single record).
func (ix *Index) PTR(reverse string) []dns.RR {
	o, _ := ix.ptr.Load(reverse)
	if o == nil || len(o.targets) == 0 {
		return nil
	}
	hdr := dns.RR_Header{Name: reverse, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ix.ttl}
	if len(o.targets) == 1 {
		one := &ptrOne{ptr: dns.PTR{Hdr: hdr, Ptr: o.targets[0]}}
		one.rrs[0] = &one.ptr
		return one.rrs[:]
	}
	recs := make([]dns.PTR, len(o.targets))
	rrs := make([]dns.RR, len(o.targets))
	for i, t := range o.targets {
		recs[i] = dns.PTR{Hdr: hdr, Ptr: t}
		rrs[i] = &recs[i]
	}
	return rrs
}

// Serial is the SOA serial: the Unix time of the last change.
func (ix *Index) Serial() uint32 { return ix.serial.Load() }

// Imports is the number of services with answers, by type.
func (ix *Index) Imports(t Type) int64 {
	if int(t) >= len(ix.imports) {
		return 0
	}
	return ix.imports[t].Load()
}

// Endpoints is the number of ready endpoints answered, over all services.
func (ix *Index) Endpoints() int64 { return ix.endpoints.Load() }

// Put publishes set as the answers of service key, replacing what was
// there; a nil set removes the service. It returns the previous set.
// Concurrent queries see either the old or the new set, never a mix
// within one service.
func (ix *Index) Put(key string, set *Set) (old *Set) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var loaded bool
	if set != nil {
		if set.key == key {
			key = set.key // keep one copy of the string
		}
		old, loaded = ix.services.LoadAndStore(key, set)
	} else {
		old, loaded = ix.services.LoadAndDelete(key)
	}
	if !loaded {
		old = nil
	}
	if old == nil && set == nil {
		return nil
	}
	ix.serial.Store(max(ix.serial.Load(), uint32(time.Now().Unix()))) // #nosec G115 -- SOA serial from Unix time

	if old != nil {
		ix.addNamespace(old.namespace, -1)
		ix.imports[old.typ].Add(-1)
		ix.endpoints.Add(-int64(old.endpoints))
	}
	if set != nil {
		ix.addNamespace(set.namespace, +1)
		ix.imports[set.typ].Add(1)
		ix.endpoints.Add(int64(set.endpoints))
	}
	ix.updatePTR(key, old, set)
	return old
}

func (ix *Index) addNamespace(ns string, delta int) {
	ix.namespaces.Compute(ns, func(n int, _ bool) (int, bool) {
		n += delta
		return n, n <= 0 // delete when no service is left
	})
}

// updatePTR replaces the PTR contributions of service key: the reverse
// names of old that set lacks lose key, those of set get set's targets.
func (ix *Index) updatePTR(key string, old, set *Set) {
	var revs []string
	var owners []ptrOwner
	if set != nil {
		revs, owners = set.revs, set.owners
	}
	if old != nil && len(old.revs) > 0 {
		keep := make(map[string]bool, len(revs))
		for _, rev := range revs {
			keep[rev] = true
		}
		for _, rev := range old.revs {
			if !keep[rev] {
				ix.replacePTR(rev, key, nil)
			}
		}
	}
	for i, rev := range revs {
		ix.replacePTR(rev, key, &owners[i])
	}
}

// replacePTR sets the targets of service key at reverse name rev to own
// (nil: none), keeping the other services' ones.
func (ix *Index) replacePTR(rev, key string, own *ptrOwner) {
	list, shared := ix.multi[rev]
	if !shared {
		cur, _ := ix.ptr.Load(rev)
		if cur == nil || cur.key == key {
			if own == nil {
				ix.ptr.Delete(rev)
			} else {
				ix.ptr.Store(rev, own)
			}
			return
		}
		list = []*ptrOwner{cur}
	}
	next := make([]*ptrOwner, 0, len(list)+1)
	for _, o := range list {
		if o.key != key {
			next = append(next, o)
		}
	}
	if own != nil {
		next = append(next, own)
	}
	slices.SortFunc(next, func(a, b *ptrOwner) int { return strings.Compare(a.key, b.key) })
	if own == nil {
		// rev belongs to the set being replaced: a substring of one
		// string holding all its reverse names. Stored as a key, it
		// would keep that whole string alive.
		rev = strings.Clone(rev)
	}
	switch len(next) {
	case 0:
		delete(ix.multi, rev)
		ix.ptr.Delete(rev)
	case 1:
		delete(ix.multi, rev)
		ix.ptr.Store(rev, next[0])
	default:
		ix.multi[rev] = next
		merged := &ptrOwner{}
		seen := map[string]bool{}
		for _, o := range next {
			for _, t := range o.targets {
				if !seen[strings.ToLower(t)] {
					seen[strings.ToLower(t)] = true
					merged.targets = append(merged.targets, t)
				}
			}
		}
		ix.ptr.Store(rev, merged)
	}
}

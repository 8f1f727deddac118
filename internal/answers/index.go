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
// namespaces that have names, and PTR records by reverse name. Readers
// never lock and never wait for writers (the maps are lock-free for
// reads); Put costs O(size of the service it changes), never O(number of
// services).
type Index struct {
	ttl uint32

	services   *xsync.MapOf[string, *Set]
	namespaces *xsync.MapOf[string, int]
	ptr        *xsync.MapOf[string, []dns.RR]

	// mu serialises writers; owners is writer-only bookkeeping:
	// reverse name -> service key -> PTR targets.
	mu     sync.Mutex
	owners map[string]map[string][]string

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
		ptr:        xsync.NewMapOf[string, []dns.RR](),
		owners:     map[string]map[string][]string{},
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

// PTR returns the PTR records of a lower-case reverse name, or nil.
func (ix *Index) PTR(reverse string) []dns.RR {
	rrs, _ := ix.ptr.Load(reverse)
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

// updatePTR replaces the PTR contributions of service key.
func (ix *Index) updatePTR(key string, old, set *Set) {
	var oldPTR, newPTR []PTR
	if old != nil {
		oldPTR = old.ptrs
	}
	if set != nil {
		newPTR = set.ptrs
	}
	touched := map[string]bool{}
	for _, p := range oldPTR {
		if owners := ix.owners[p.Reverse]; owners != nil {
			delete(owners, key)
		}
		touched[p.Reverse] = true
	}
	for _, p := range newPTR {
		owners := ix.owners[p.Reverse]
		if owners == nil {
			owners = map[string][]string{}
			ix.owners[p.Reverse] = owners
		}
		if !slices.Contains(owners[key], p.Target) {
			owners[key] = append(owners[key], p.Target)
		}
		touched[p.Reverse] = true
	}
	for rev := range touched {
		owners := ix.owners[rev]
		if len(owners) == 0 {
			delete(ix.owners, rev)
			ix.ptr.Delete(rev)
			continue
		}
		keys := make([]string, 0, len(owners))
		for k := range owners {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var rrs []dns.RR
		seen := map[string]bool{}
		for _, k := range keys {
			for _, target := range owners[k] {
				if seen[strings.ToLower(target)] {
					continue
				}
				seen[strings.ToLower(target)] = true
				rrs = append(rrs, &dns.PTR{
					Hdr: dns.RR_Header{Name: rev, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ix.ttl},
					Ptr: target,
				})
			}
		}
		ix.ptr.Store(rev, slices.Clip(rrs))
	}
}

package answers

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/puzpuzpuz/xsync/v3"

	"github.com/mcs-dns/mcs-dns/internal/dnswire"
)

// Index is the published answer state: one immutable Set per service, the
// namespaces that have names, and PTR targets by address. Readers never
// lock and never wait for writers (the maps and tables are lock-free for
// reads); Put costs O(size of the service it changes), amortised, never
// O(number of services).
type Index struct {
	ttl uint32

	services   *xsync.MapOf[string, *Set]
	namespaces *xsync.MapOf[string, int]
	// ptr4 and ptr6 map an address to its PTR targets: when one service
	// has the address, a reference into that Set's own targets; when
	// several do, a merged Set (key "") with their targets by service
	// key, without duplicates. Keyed by address rather than reverse name,
	// an entry is 16 bytes for IPv4 and stores no name; PTR records are
	// built per query.
	ptr4 ptrTable[key4]
	ptr6 ptrTable[key6]

	// mu serialises writers; multi is writer-only bookkeeping: the
	// owners of the addresses that several services have, by key.
	mu    sync.Mutex
	multi map[netip.Addr][]ptrRef

	// rev answers which partial reverse names exist (reverse.go).
	rev reverseENTs

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
		multi:      map[netip.Addr][]ptrRef{},
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

// ptrRef is the PTR targets of one address: set.ptrTargets(j).
type ptrRef struct {
	set *Set
	j   uint32
}

func (r ptrRef) targets() []*Node { return r.set.ptrTargets(int(r.j)) }

func (ix *Index) loadPTR(ip netip.Addr) (ptrRef, bool) {
	if ip.Is4() {
		return ix.ptr4.load(keyOf4(ip))
	}
	return ix.ptr6.load(keyOf6(ip))
}

// storePTR and deletePTR bump the reverse snapshot's generation after
// changing the tables: a snapshot taken in between records the older
// generation and is rebuilt on a later query.
func (ix *Index) storePTR(ip netip.Addr, r ptrRef) {
	if ip.Is4() {
		ix.ptr4.store(keyOf4(ip), r)
	} else {
		ix.ptr6.store(keyOf6(ip), r)
	}
	ix.rev.gen.Add(1)
}

func (ix *Index) deletePTR(ip netip.Addr) {
	if ip.Is4() {
		ix.ptr4.delete(keyOf4(ip))
	} else {
		ix.ptr6.delete(keyOf6(ip))
	}
	ix.rev.gen.Add(1)
}

// HasPTR reports whether the lower-case reverse name has PTR records.
func (ix *Index) HasPTR(reverse string) bool {
	ip, ok := dnswire.ParseReverse(reverse)
	if !ok {
		return false
	}
	_, ok = ix.loadPTR(ip)
	return ok
}

// PTRTargets returns the nodes whose owner names are the PTR targets of a
// lower-case reverse name (by service key, without duplicates), or nil.
// The slice is shared and must not be modified; it allocates nothing.
func (ix *Index) PTRTargets(reverse string) []*Node {
	ip, ok := dnswire.ParseReverse(reverse)
	if !ok {
		return nil
	}
	r, ok := ix.loadPTR(ip)
	if !ok {
		return nil
	}
	targets := r.targets()
	if len(targets) == 0 {
		return nil
	}
	return targets
}

// PTRTTL is the TTL of the PTR records.
func (ix *Index) PTRTTL() uint32 { return ix.ttl }

// ptrOne is a single PTR record and the slice that holds it, allocated
// together.
type ptrOne struct {
	rrs [1]dns.RR
	ptr dns.PTR
}

// PTR returns the PTR records of a lower-case reverse name, or nil (see
// PTRTargets). The slice and records are fresh.
func (ix *Index) PTR(reverse string) []dns.RR {
	return PTRRecords(reverse, ix.PTRTargets(reverse), ix.ttl)
}

// PTRRecords builds the PTR records of owner pointing at targets' owner
// names (fresh; one allocation for a single record), or nil.
func PTRRecords(owner string, targets []*Node, ttl uint32) []dns.RR {
	if len(targets) == 0 {
		return nil
	}
	hdr := dns.RR_Header{Name: owner, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ttl}
	if len(targets) == 1 {
		one := &ptrOne{ptr: dns.PTR{Hdr: hdr, Ptr: targets[0].owner}}
		one.rrs[0] = &one.ptr
		return one.rrs[:]
	}
	recs := make([]dns.PTR, len(targets))
	rrs := make([]dns.RR, len(targets))
	for i, t := range targets {
		recs[i] = dns.PTR{Hdr: hdr, Ptr: t.owner}
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

// updatePTR replaces the PTR contributions of service key: the addresses
// of old that set lacks lose key, those of set get set's targets.
func (ix *Index) updatePTR(key string, old, set *Set) {
	addrs := set.ptrAddrs()
	if oldAddrs := old.ptrAddrs(); len(oldAddrs) > 0 {
		keep := make(map[netip.Addr]struct{}, len(addrs))
		for _, ip := range addrs {
			keep[ip] = struct{}{}
		}
		for _, ip := range oldAddrs {
			if _, ok := keep[ip]; !ok {
				ix.replacePTR(ip, key, ptrRef{})
			}
		}
	}
	for j, ip := range addrs {
		own := ptrRef{set: set, j: uint32(j)} // #nosec G115 -- at most the addresses of a service
		if len(own.targets()) == 0 {
			own = ptrRef{} // only endpoints without a name have it
		}
		ix.replacePTR(ip, key, own)
	}
}

// replacePTR sets the targets of service key at address ip to own (a
// zero ptrRef: none), keeping the other services' ones.
func (ix *Index) replacePTR(ip netip.Addr, key string, own ptrRef) {
	// The maps key by the address's bytes; so must multi (an IPv6 zone is
	// not part of a reverse name).
	ip = ip.WithZone("")
	list, shared := ix.multi[ip]
	if !shared {
		cur, ok := ix.loadPTR(ip)
		if !ok || cur.set.key == key {
			if own.set == nil {
				ix.deletePTR(ip)
			} else {
				ix.storePTR(ip, own)
			}
			return
		}
		list = []ptrRef{cur}
	}
	next := make([]ptrRef, 0, len(list)+1)
	for _, o := range list {
		if o.set.key != key {
			next = append(next, o)
		}
	}
	if own.set != nil {
		next = append(next, own)
	}
	slices.SortFunc(next, func(a, b ptrRef) int { return strings.Compare(a.set.key, b.set.key) })
	switch len(next) {
	case 0:
		delete(ix.multi, ip)
		ix.deletePTR(ip)
	case 1:
		delete(ix.multi, ip)
		ix.storePTR(ip, next[0])
	default:
		ix.multi[ip] = next
		merged := &Set{}
		seen := map[string]bool{}
		for _, o := range next {
			for _, t := range o.targets() {
				if lower := strings.ToLower(t.owner); !seen[lower] {
					seen[lower] = true
					merged.ptrNodes = append(merged.ptrNodes, t)
				}
			}
		}
		merged.ptrEnd = []uint32{uint32(len(merged.ptrNodes))} // #nosec G115 -- a few services
		ix.storePTR(ip, ptrRef{set: merged})
	}
}

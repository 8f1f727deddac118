package vip

import (
	"cmp"
	"net/netip"
	"slices"
)

// claimIndex is which clusterset-CIDR addresses are claimed, and by which
// import, as each source of claims shows them: a source is one member's
// cache generation (the imports it holds) or this process's decisions not
// yet seen in any cache. It is kept up to date claim by claim, so that
// choosing an address reads only the addresses it probes and the claims
// of the import it chooses for, however many imports hold one.
type claimIndex struct {
	// sources: each source's claims, by import key (one per key).
	sources map[any]map[string]Claim
	// byAddr: who claims each address.
	byAddr map[netip.Addr]map[holder]struct{}
	// hidden, when set, hides claims from lookups (pending decisions
	// past their time, until they are swept).
	hidden func(src any, key string) bool
	// rank orders sources, for equally early claims of one import (nil:
	// all equal): the smaller rank first.
	rank func(src any) string
}

// holder is one source's claim of one import.
type holder struct {
	src any
	key string
}

func newClaimIndex() *claimIndex {
	return &claimIndex{sources: map[any]map[string]Claim{}, byAddr: map[netip.Addr]map[holder]struct{}{}}
}

// take records that src shows c (replacing what src showed for c.Key).
func (x *claimIndex) take(src any, c Claim) {
	x.release(src, c.Key)
	claims := x.sources[src]
	if claims == nil {
		claims = map[string]Claim{}
		x.sources[src] = claims
	}
	claims[c.Key] = c
	h := holder{src, c.Key}
	for _, a := range c.IPs {
		hs := x.byAddr[a]
		if hs == nil {
			hs = map[holder]struct{}{}
			x.byAddr[a] = hs
		}
		hs[h] = struct{}{}
	}
}

// release forgets src's claim of key, if any.
func (x *claimIndex) release(src any, key string) {
	claims := x.sources[src]
	c, ok := claims[key]
	if !ok {
		return
	}
	delete(claims, key)
	if len(claims) == 0 {
		delete(x.sources, src)
	}
	h := holder{src, key}
	for _, a := range c.IPs {
		hs := x.byAddr[a]
		delete(hs, h)
		if len(hs) == 0 {
			delete(x.byAddr, a)
		}
	}
}

// dropSource forgets every claim of src (a cache generation that is gone).
func (x *claimIndex) dropSource(src any) {
	for key := range x.sources[src] {
		x.release(src, key)
	}
}

func (x *claimIndex) visible(src any, key string) bool {
	return x.hidden == nil || !x.hidden(src, key)
}

// claimsOf returns key's claims, one per source that shows one, earliest
// first (equally early ones by source rank).
func (x *claimIndex) claimsOf(key string) []Claim {
	type ranked struct {
		c    Claim
		rank string
	}
	var found []ranked
	for src, claims := range x.sources {
		if c, ok := claims[key]; ok && x.visible(src, key) {
			r := ""
			if x.rank != nil {
				r = x.rank(src)
			}
			found = append(found, ranked{c, r})
		}
	}
	slices.SortFunc(found, func(a, b ranked) int {
		switch {
		case earlier(a.c, b.c):
			return -1
		case earlier(b.c, a.c):
			return 1
		}
		return cmp.Compare(a.rank, b.rank)
	})
	out := make([]Claim, len(found))
	for i, r := range found {
		out[i] = r.c
	}
	return out
}

// owner returns the import a belongs to (the earliest claim of it), ""
// if none claims it; taken whether an import other than key claims it.
func (x *claimIndex) owner(a netip.Addr, key string) (owner string, taken bool) {
	var first Claim
	found := false
	for h := range x.byAddr[a] {
		if !x.visible(h.src, h.key) {
			continue
		}
		c := x.sources[h.src][h.key]
		if !found || earlier(c, first) {
			first, found = c, true
		}
		if h.key != key {
			taken = true
		}
	}
	return first.Key, taken
}

// addresses is how many addresses are claimed (hidden claims included):
// at least as many as any import's probe can find taken.
func (x *claimIndex) addresses() int { return len(x.byAddr) }

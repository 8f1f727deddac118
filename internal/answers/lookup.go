package answers

import (
	"slices"
	"sort"
	"strings"
)

// Finding a name of a Set.

// Lookup returns the node of the name prefix (relative to the service
// name, "" for the service itself) in zone index zone, or nil.
func (s *Set) Lookup(zone int, prefix string) *Node {
	if s == nil || zone < 0 || zone >= len(s.zones) {
		return nil
	}
	z := &s.zones[zone]
	if prefix == "" {
		return z.top
	}
	if len(z.eps) > 0 {
		// sort.Search by index rather than slices.BinarySearchFunc, whose
		// comparison takes each probed Node by value: copying a Node
		// reads its template cache non-atomically while queries fill it.
		cut := len(z.top.owner) + 1 // "." and the service name
		rel := func(i int) string { o := z.eps[i].owner; return o[:len(o)-cut] }
		if i := sort.Search(len(z.eps), func(i int) bool { return rel(i) >= prefix }); i < len(z.eps) && rel(i) == prefix {
			return &z.eps[i]
		}
	}
	return findEntry(z.other, prefix)
}

// findEntry returns the node of rel in the sorted entries, or nil.
func findEntry(entries []tableEntry, rel string) *Node {
	if len(entries) <= 8 {
		for i := range entries {
			if entries[i].rel == rel {
				return entries[i].n
			}
		}
		return nil
	}
	i, ok := slices.BinarySearchFunc(entries, rel, func(e tableEntry, rel string) int { return strings.Compare(e.rel, rel) })
	if !ok {
		return nil
	}
	return entries[i].n
}

// Names returns the relative names of zone index zone, sorted (for tests).
func (s *Set) Names(zone int) []string {
	z := &s.zones[zone]
	out := []string{""}
	cut := len(z.top.owner) + 1
	for i := range z.eps {
		o := z.eps[i].owner
		out = append(out, o[:len(o)-cut])
	}
	for _, e := range z.other {
		out = append(out, e.rel)
	}
	slices.Sort(out)
	return out
}

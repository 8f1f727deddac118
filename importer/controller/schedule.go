package controller

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// keyPasses holds what the work queue cannot know about a key's passes:
// whether one is running (the key is busy), the passes handed out while
// it was (parked, each at the highest priority it was handed out with),
// and since when its full pass has been owed. It decides nothing about
// the queue itself; the controller queues what it returns.
type keyPasses struct {
	mu sync.Mutex
	// busy: keys being reconciled (by either pass), with the items
	// handed out meanwhile and their priorities.
	busy map[string]map[item]int
	// fullSince: keys whose full pass is queued and has not run since,
	// with when it was first queued (for fullPassMaxWait).
	fullSince map[string]time.Time
}

func newKeyPasses() *keyPasses {
	return &keyPasses{busy: map[string]map[item]int{}, fullSince: map[string]time.Time{}}
}

// claim marks it's key busy and reports true, or, when the key is busy
// already, parks it (at the highest priority it was handed out with) and
// reports false.
func (s *keyPasses) claim(it item, priority int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	parked, busy := s.busy[it.key]
	if !busy {
		s.busy[it.key] = nil
		return true
	}
	if parked == nil {
		parked = map[item]int{}
		s.busy[it.key] = parked
	}
	if p, ok := parked[it]; !ok || priority > p {
		parked[it] = priority
	}
	return false
}

// parkedItem is an item parked while its key was busy, to be queued again
// at priority.
type parkedItem struct {
	item     item
	priority int
}

// release unmarks k and returns the items parked meanwhile, to be queued
// again (highest priority first, serve before full pass at equal
// priority).
func (s *keyPasses) release(k string) []parkedItem {
	s.mu.Lock()
	parked := s.busy[k]
	delete(s.busy, k)
	s.mu.Unlock()
	out := make([]parkedItem, 0, len(parked))
	for it, p := range parked {
		out = append(out, parkedItem{it, p})
	}
	slices.SortFunc(out, func(a, b parkedItem) int {
		if c := cmp.Compare(b.priority, a.priority); c != 0 {
			return c
		}
		return cmp.Compare(b.item.pass, a.item.pass)
	})
	return out
}

// oweFull records that k's full pass is queued, at now unless it was
// already owed: a stream of serve passes does not postpone it.
func (s *keyPasses) oweFull(k string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.fullSince[k]; !ok {
		s.fullSince[k] = now
	}
}

// fullRan records that k's full pass ran (a failure is retried with
// backoff, not promoted).
func (s *keyPasses) fullRan(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.fullSince, k)
}

// overdue says whether k's full pass has been owed fullPassMaxWait at now.
func (s *keyPasses) overdue(k string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.fullSince[k]
	return ok && now.Sub(t) >= fullPassMaxWait
}

// allOverdue lists the keys whose full pass has been owed fullPassMaxWait
// at now.
func (s *keyPasses) allOverdue(now time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var due []string
	for k, t := range s.fullSince {
		if now.Sub(t) >= fullPassMaxWait {
			due = append(due, k)
		}
	}
	return due
}

// owed counts the keys whose full pass is owed (the statuses_owed gauge).
func (s *keyPasses) owed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.fullSince)
}

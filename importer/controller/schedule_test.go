package controller

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A key is claimed once at a time; what is handed out meanwhile is parked
// and returned by release, highest priority first, each item once; after
// release the key can be claimed again.
func TestKeyPassesClaimParkRelease(t *testing.T) {
	s := newKeyPasses()
	serve, full := item{"ns/a", passServe}, item{"ns/a", passFull}
	require.True(t, s.claim(serve, priorityServe))
	assert.True(t, s.claim(item{"ns/b", passServe}, priorityServe), "other keys are not held back")
	assert.False(t, s.claim(full, 0), "busy: parked")
	assert.False(t, s.claim(serve, priorityServe), "busy: parked")
	assert.False(t, s.claim(full, priorityOverdue), "parked again, higher")
	assert.False(t, s.claim(full, 0), "parked again, lower: the higher one holds")

	assert.Equal(t, []parkedItem{{full, priorityOverdue}, {serve, priorityServe}}, s.release("ns/a"))
	assert.Empty(t, s.release("ns/a"), "released once: nothing left")
	assert.True(t, s.claim(full, 0), "free again")
	assert.Empty(t, s.release("ns/a"), "nothing was parked")

	// At equal priority the serve pass is queued first.
	require.True(t, s.claim(item{"ns/c", passServe}, 0))
	s.claim(item{"ns/c", passFull}, 0)
	s.claim(item{"ns/c", passServe}, 0)
	assert.Equal(t, []parkedItem{{item{"ns/c", passServe}, 0}, {item{"ns/c", passFull}, 0}}, s.release("ns/c"))
}

// A full pass is owed from when it was first queued: queueing it again
// does not postpone it; it is overdue after fullPassMaxWait, and owed no
// longer once it ran.
func TestKeyPassesFullSince(t *testing.T) {
	s := newKeyPasses()
	t0 := time.Unix(1000, 0)
	assert.False(t, s.overdue("ns/a", t0.Add(time.Hour)), "not owed")
	s.oweFull("ns/a", t0)
	s.oweFull("ns/a", t0.Add(20*time.Second)) // queued again: t0 holds
	s.oweFull("ns/b", t0.Add(10*time.Second))
	assert.Equal(t, 2, s.owed())

	assert.False(t, s.overdue("ns/a", t0.Add(fullPassMaxWait-time.Nanosecond)))
	assert.True(t, s.overdue("ns/a", t0.Add(fullPassMaxWait)), "owed since its first queueing")
	assert.Equal(t, []string{"ns/a"}, s.allOverdue(t0.Add(fullPassMaxWait)))
	assert.ElementsMatch(t, []string{"ns/a", "ns/b"}, s.allOverdue(t0.Add(fullPassMaxWait+10*time.Second)))

	s.fullRan("ns/a")
	assert.False(t, s.overdue("ns/a", t0.Add(time.Hour)))
	assert.Equal(t, 1, s.owed())
	s.oweFull("ns/a", t0.Add(time.Hour))
	assert.False(t, s.overdue("ns/a", t0.Add(time.Hour+fullPassMaxWait-time.Second)), "owed afresh")
	s.fullRan("ns/a")
	s.fullRan("ns/b")
	assert.Zero(t, s.owed())
}

// Items handed out concurrently for a few keys are each either claimed or
// returned, once, by the release of their key: none is lost, and a key is
// never claimed twice at once. (Every item is distinct here, so that
// parking never merges two of them.)
func TestKeyPassesNoLostItems(t *testing.T) {
	s := newKeyPasses()
	const keys, workers, rounds = 3, 8, 2000
	var mu sync.Mutex
	running := map[string]bool{}
	handled := map[item]int{} // claimed, or returned by a release
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				it := item{fmt.Sprintf("ns/%d", i%keys), pass(w*rounds + i)}
				if !s.claim(it, i%3) {
					continue // parked: the claimer's release returns it
				}
				mu.Lock()
				if running[it.key] {
					t.Errorf("%s claimed twice at once", it.key)
				}
				running[it.key] = true
				handled[it]++
				mu.Unlock()
				runtime.Gosched() // the pass
				mu.Lock()
				running[it.key] = false
				mu.Unlock()
				for _, p := range s.release(it.key) {
					mu.Lock()
					handled[p.item]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for k := range keys {
		assert.Empty(t, s.release(fmt.Sprintf("ns/%d", k)), "nothing left parked")
	}
	assert.Len(t, handled, workers*rounds, "every item claimed or given back")
	for it, n := range handled {
		if n != 1 {
			t.Errorf("%v handled %d times", it, n)
		}
	}
}

package mcs

import (
	"os"
	"runtime/debug"
	"sync"
)

// releaseListGarbage returns the heap freed since the initial lists to
// the OS. Decoding the lists left garbage several times the size of what
// is kept; without this it stays resident until the scavenger gets to
// it. Queries allocate nothing, so the heap stays near its live size
// afterwards.
func releaseListGarbage() { debug.FreeOSMemory() }

// syncGCPercent is the garbage collector's target while initial lists
// stream in. Decoding them makes garbage several times the size of what
// is kept; at Go's default of 100 the heap grows to twice the live size
// between collections, and the objects kept end up spread over that many
// spans. Collecting twice as often until sync lowers the start-up peak
// and the memory held after sync (make bench at 100,000 endpoints: peak
// 141-151 to 134-137 MiB, RSS after sync 126-129 to 123-126 MiB) for a
// little more CPU, once. Lower targets saved no more after sync and
// slowed start-up. An operator's own GOGC is left alone.
const syncGCPercent = 50

// syncGC counts the controllers still syncing, so that the first one
// lowers the target and the last one restores it.
var syncGC struct {
	mu      sync.Mutex
	syncing int
	saved   int
}

// lowerGCUntilSynced lowers the collector's target for an initial sync
// and returns the function that ends it (idempotent; call it at sync and
// on every way out).
func lowerGCUntilSynced() (done func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	syncGC.mu.Lock()
	if syncGC.syncing == 0 {
		syncGC.saved = debug.SetGCPercent(syncGCPercent)
	}
	syncGC.syncing++
	syncGC.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			syncGC.mu.Lock()
			defer syncGC.mu.Unlock()
			if syncGC.syncing--; syncGC.syncing == 0 {
				debug.SetGCPercent(syncGC.saved)
			}
		})
	}
}

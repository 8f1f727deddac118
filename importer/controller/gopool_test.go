package controller

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Work handed to the pool one piece after another runs on the goroutine
// kept from the first, not on a new one each time.
func TestGoPoolKeepsGoroutines(t *testing.T) {
	p := newGoPool()
	defer p.Stop()
	for range 200 {
		done := make(chan struct{})
		p.Go(func() { close(done) })
		<-done
		// Wait until the kept goroutine waits for work again, so the
		// next Go finds it.
		require.Eventually(t, func() bool { return p.idle.Load() == 1 }, time.Second, time.Millisecond)
	}
	assert.EqualValues(t, 1, p.started.Load(), "goroutines started for 200 pieces of work, one at a time")
}

// Go never waits for a goroutine to come free: pieces of work that wait
// for each other all run at once.
func TestGoPoolNeverWaits(t *testing.T) {
	p := newGoPool()
	defer p.Stop()
	const n = 50
	var all sync.WaitGroup
	all.Add(n)
	release := make(chan struct{})
	var done sync.WaitGroup
	for range n {
		done.Add(1)
		p.Go(func() {
			defer done.Done()
			all.Done()
			<-release
		})
	}
	all.Wait() // every piece is running
	close(release)
	done.Wait()
	assert.EqualValues(t, n, p.started.Load())
}

// Stop waits for the work in progress, ends the kept goroutines, and
// work handed over after it still runs. (The package's goleak check
// finds any goroutine left.)
func TestGoPoolStop(t *testing.T) {
	p := newGoPool()
	release := make(chan struct{})
	finished := make(chan struct{})
	p.Go(func() { <-release; close(finished) })
	stopped := make(chan struct{})
	go func() { p.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while work was in progress")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-stopped
	select {
	case <-finished:
	default:
		t.Fatal("Stop returned before the work in progress finished")
	}
	ran := make(chan struct{})
	p.Go(func() { close(ran) })
	<-ran
	p.Stop() // again: nothing to do
}

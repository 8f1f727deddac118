package controller

import (
	"sync"
	"sync/atomic"
	"time"
)

// goPool runs functions on goroutines it keeps between calls. A
// reconcile's member parts and slice writes run deep in client-go (HTTP/2,
// TLS, protobuf): a fresh goroutine for each grows its stack through that
// depth and copies it on every growth, which was 6-7% of the importer's
// CPU in the member-scale profiles at 20 and 40 members. A kept goroutine
// has grown its stack already (the garbage collector halves an idle one
// now and then, so it grows back once, not on every part). A kept
// goroutine leaves after goPoolIdle without work, and all of them when
// the pool stops.
type goPool struct {
	work chan func()

	mu      sync.Mutex
	stopped bool
	stop    chan struct{}
	// kept counts the pool's goroutines, for Stop to wait for.
	kept sync.WaitGroup
	// started counts the goroutines the pool has started, kept or not;
	// idle those waiting for work.
	started, idle atomic.Int64
}

// goPoolIdle is how long a kept goroutine waits for work before it ends.
const goPoolIdle = 10 * time.Second

func newGoPool() *goPool {
	return &goPool{work: make(chan func()), stop: make(chan struct{})}
}

// Go runs f on a kept goroutine that is free, or on a new one (which is
// then kept). After Stop, f runs on a goroutine of its own.
func (p *goPool) Go(f func()) {
	select {
	case p.work <- f:
		return
	default:
	}
	p.started.Add(1)
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		go f()
		return
	}
	p.kept.Add(1)
	p.mu.Unlock()
	go p.serve(f)
}

// serve runs f, then the work handed to it until it has been idle for
// goPoolIdle or the pool stops.
func (p *goPool) serve(f func()) {
	defer p.kept.Done()
	f()
	timer := time.NewTimer(goPoolIdle)
	defer timer.Stop()
	p.idle.Add(1)
	defer p.idle.Add(-1)
	for {
		select {
		case f := <-p.work:
			p.idle.Add(-1)
			f()
			p.idle.Add(1)
			timer.Reset(goPoolIdle)
		case <-timer.C:
			return
		case <-p.stop:
			return
		}
	}
}

// Stop ends the kept goroutines, waiting for those still running work.
// Safe to call more than once.
func (p *goPool) Stop() {
	p.mu.Lock()
	if !p.stopped {
		p.stopped = true
		close(p.stop)
	}
	p.mu.Unlock()
	p.kept.Wait()
}

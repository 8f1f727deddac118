package stack

import (
	"context"
	"sync"

	"github.com/mcs-dns/mcs-dns/test/procs"
)

// Group is the processes started together (a stack's, or a program's),
// so that all of them are stopped together: on normal exit, on error and
// on Ctrl-C.
type Group struct {
	mu       sync.Mutex
	procs    map[*procs.Process]struct{}
	stopping map[*procs.Process]bool
	ctx      context.Context
	onExit   func(*procs.Process)
}

// NewGroup returns an empty group.
func NewGroup() *Group {
	return &Group{procs: map[*procs.Process]struct{}{}, stopping: map[*procs.Process]bool{}}
}

// OnUnexpectedExit makes the group call f, from a goroutine of its own,
// for every process of it started from now on that exits while ctx is
// live and without Stop or StopAll having been called for it.
func (g *Group) OnUnexpectedExit(ctx context.Context, f func(*procs.Process)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ctx, g.onExit = ctx, f
}

// Launch starts a child (see procs.Launch) with its output in logPath
// ("": kept in memory) and adds it to the group.
func (g *Group) Launch(name, logPath string, argv ...string) (*procs.Process, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, err := procs.Launch(name, logPath, argv...)
	if err != nil {
		return nil, err
	}
	g.procs[p] = struct{}{}
	if ctx, f := g.ctx, g.onExit; f != nil {
		go func() {
			_ = p.Wait()
			g.mu.Lock()
			stopping := g.stopping[p]
			delete(g.stopping, p)
			g.mu.Unlock()
			if ctx.Err() == nil && !stopping {
				f(p)
			}
		}()
	}
	return p, nil
}

// Stop ends the process and its group (TERM, then KILL after a grace
// period; see procs.Process.Stop) and removes it from the group.
func (g *Group) Stop(p *procs.Process) error {
	if p == nil {
		return nil
	}
	g.mu.Lock()
	if g.onExit != nil && !p.Exited() {
		g.stopping[p] = true
	}
	g.mu.Unlock()
	err := p.Stop()
	g.mu.Lock()
	delete(g.procs, p)
	g.mu.Unlock()
	return err
}

// StopAll stops every process of the group still running, in parallel.
func (g *Group) StopAll() {
	g.mu.Lock()
	all := make([]*procs.Process, 0, len(g.procs))
	for p := range g.procs {
		all = append(all, p)
	}
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Go(func() { _ = g.Stop(p) })
	}
	wg.Wait()
}

package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

// RelistResult is what one server's relist cost: the API server it watches
// was stopped, etcd compacted meanwhile (so no watch could resume: 410
// Gone) and the API server started again, with the fixture unchanged.
type RelistResult struct {
	Size string `json:"size"`
	// SteadyRSS is the RSS after sync and settle, before the API server
	// stopped; PeakRSS the largest RSS sampled (every 10 ms) from then
	// until the end of the window after its return.
	SteadyRSS int64 `json:"steady_rss"`
	PeakRSS   int64 `json:"peak_rss"`
	// HWMBefore and HWMAfter are the kernel's RSS high-water mark (VmHWM)
	// before the stop and at the end: a new high means the relist took
	// more than the start-up did.
	HWMBefore int64 `json:"hwm_before"`
	HWMAfter  int64 `json:"hwm_after"`
	// CompactedAt is the etcd revision compacted while the API server was
	// away; DownSeconds how long it was away; WindowSeconds how long RSS
	// was sampled after its return.
	CompactedAt   int64   `json:"compacted_at"`
	DownSeconds   float64 `json:"down_seconds"`
	WindowSeconds float64 `json:"window_seconds"`
	// Answers asked all along (the start-up sample, UDP with EDNS0 4096):
	// Wrong is those not equal to the fixture, ServFail the SERVFAILs among
	// them.
	Queries  int64 `json:"queries"`
	Wrong    int64 `json:"wrong"`
	ServFail int64 `json:"servfail"`
	// FirstWrong is the first wrong answer's detail.
	FirstWrong string `json:"first_wrong,omitempty"`
}

// relistDown is how long the API server stays away; relistWindow how long
// RSS is sampled after it is back (a relist at 10x takes a second or two).
const (
	relistDown   = 5 * time.Second
	relistWindow = 15 * time.Second
)

// relistPhase measures a forced relist at size s for a and b: each is
// started alone against c's API server, then the API server is stopped,
// etcd compacted, and the API server started again.
func (b *Bench) relistPhase(ctx context.Context, c *cluster.Cluster, size string, s Sizes) {
	for _, id := range []string{"a", "b"} {
		if ctx.Err() != nil {
			return
		}
		if _, gone := b.Results.Unavailable[id]; gone {
			continue
		}
		r, err := b.relistOne(ctx, c, id, size, s)
		if err != nil {
			b.note("relist of %s at %s: %v", id, size, err)
			continue
		}
		if b.Results.Relist == nil {
			b.Results.Relist = map[string]*RelistResult{}
		}
		b.Results.Relist[id] = r
		logf("relist %s at %s: RSS %.1f MiB steady, %.1f MiB peak (%.2fx); %d queries, %d wrong, %d SERVFAIL",
			id, size, mib(r.SteadyRSS), mib(r.PeakRSS), float64(r.PeakRSS)/float64(r.SteadyRSS), r.Queries, r.Wrong, r.ServFail)
	}
}

func (b *Bench) relistOne(ctx context.Context, c *cluster.Cluster, id, size string, s Sizes) (*RelistResult, error) {
	sample := b.sampleFor(id, s)
	srv, err := b.StartServer(id, "relist-"+size)
	if err != nil {
		return nil, err
	}
	defer b.StopServer(srv)
	if _, err := b.WaitAnswering(ctx, srv, sample, b.Opt.StartupTimeout); err != nil {
		return nil, err
	}
	if err := waitCtx(ctx, b.Opt.Settle); err != nil {
		return nil, err
	}
	pid := srv.Proc.Cmd.Process.Pid
	steady, hwm, err := procs.RSS(pid)
	if err != nil {
		return nil, err
	}
	res := &RelistResult{Size: size, SteadyRSS: steady, PeakRSS: steady, HWMBefore: hwm}

	// RSS sampled and the sample asked until the window ends.
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var peak, queries, wrong, servfail atomic.Int64
	var firstWrong atomic.Value
	peak.Store(steady)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for waitCtx(sctx, 10*time.Millisecond) == nil {
			if rss, _, err := procs.RSS(pid); err == nil && rss > peak.Load() {
				peak.Store(rss)
			}
		}
	}()
	go func() {
		defer wg.Done()
		ask := NewAsker(srv.Addr(), time.Second)
		for i := 0; sctx.Err() == nil; i++ {
			q := sample[i%len(sample)]
			r := ask.Check(q)
			queries.Add(1)
			if !r.OK {
				wrong.Add(1)
				firstWrong.CompareAndSwap(nil, q.String()+": "+r.Detail)
				if strings.HasPrefix(r.Detail, "rcode SERVFAIL") {
					servfail.Add(1)
				}
			}
			_ = waitCtx(sctx, 5*time.Millisecond)
		}
	}()
	finish := func() {
		stop()
		wg.Wait()
	}

	if err := c.StopAPIServer(); err != nil {
		finish()
		return nil, err
	}
	down := time.Now()
	rev, err := c.CompactEtcd(ctx)
	if err == nil {
		err = waitCtx(ctx, relistDown)
	}
	// Started again in any case: later phases need it.
	if serr := c.StartAPIServer(context.WithoutCancel(ctx)); serr != nil {
		finish()
		return nil, fmt.Errorf("restarting the API server: %w", serr)
	}
	if err != nil {
		finish()
		return nil, err
	}
	res.CompactedAt = rev
	res.DownSeconds = time.Since(down).Seconds()
	back := time.Now()
	_ = waitCtx(ctx, relistWindow)
	res.WindowSeconds = time.Since(back).Seconds()
	finish()
	if _, hwm, err := procs.RSS(pid); err == nil {
		res.HWMAfter = hwm
	}
	res.PeakRSS = peak.Load()
	res.Queries, res.Wrong, res.ServFail = queries.Load(), wrong.Load(), servfail.Load()
	if v, ok := firstWrong.Load().(string); ok {
		res.FirstWrong = v
	}
	if srv.Proc.Exited() {
		return res, fmt.Errorf("coredns (%s) exited: %s", srv.Label, lastLines(srv.Proc.Output(), 3))
	}
	return res, nil
}

// relistTargets are the relist phase's targets.
func (r *Results) relistTargets(add func(what, target, measured string, ok *bool)) {
	a := r.Relist["a"]
	what := "peak RSS in a forced relist / steady (a)"
	if a == nil {
		add(what, "<= 2.0", "-", nil)
		return
	}
	x := float64(a.PeakRSS) / float64(a.SteadyRSS)
	ok := x <= 2.0
	add(what+" at "+a.Size, "<= 2.0", fmt.Sprintf("%.2f (%.1f / %.1f MiB)", x, mib(a.PeakRSS), mib(a.SteadyRSS)), &ok)
	ok = a.ServFail == 0 && a.Wrong == 0
	add("answers during the API server's outage and relist (a)", "0 wrong, 0 SERVFAIL", fmt.Sprintf("%d wrong, %d SERVFAIL of %d", a.Wrong, a.ServFail, a.Queries), &ok)
}

// relistReport is the relist phase's section of the report.
func (r *Results) relistReport(p func(format string, args ...any)) {
	if len(r.Relist) == 0 {
		return
	}
	p("\n## Forced relist (API server stopped %s, etcd compacted, started again; RSS sampled every 10 ms)\n\n", relistDown)
	p("| server | size | RSS steady | RSS peak | peak/steady | VmHWM before / after | queries | wrong | SERVFAIL |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, id := range []string{"a", "b"} {
		x := r.Relist[id]
		if x == nil {
			continue
		}
		p("| %s | %s | %.1f MiB | %.1f MiB | %.2f | %.1f / %.1f MiB | %d | %d | %d |\n", id, x.Size, mib(x.SteadyRSS), mib(x.PeakRSS),
			float64(x.PeakRSS)/float64(x.SteadyRSS), mib(x.HWMBefore), mib(x.HWMAfter), x.Queries, x.Wrong, x.ServFail)
	}
	for _, id := range []string{"a", "b"} {
		if x := r.Relist[id]; x != nil && x.FirstWrong != "" {
			p("\nFirst wrong answer of %s: %s\n", id, x.FirstWrong)
		}
	}
}

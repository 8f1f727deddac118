package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcs-dns/mcs-dns/test/procs"
)

// servePhase starts a, b and c on the 1x fixture, checks their answers,
// drives them with dnsperf, profiles a and b, and measures programming
// latency.
func (b *Bench) servePhase(ctx context.Context, loader *Loader, s Sizes) error {
	o := b.Opt
	res := b.Results
	qdir := filepath.Join(b.Out, "run")
	files, err := WriteQueryFiles(qdir, s, o.MixLines)
	if err != nil {
		return err
	}
	sample := s.Sample(10, 1)
	servers := map[string]*Server{}
	defer func() {
		for _, srv := range servers {
			b.StopServer(srv)
		}
	}()
	for _, id := range ServerIDs {
		srv, err := b.StartServer(id, "serve")
		if err != nil {
			return err
		}
		d, err := b.WaitAnswering(ctx, srv, sample, o.StartupTimeout)
		if err != nil {
			if srv.Proc.Exited() {
				b.note("server %s (%s) is not available: %v", id, srv.Label, err)
				b.StopServer(srv)
				res.Unavailable[id] = lastLines(srv.Proc.Output(), 2)
				continue
			}
			b.note("server %s (%s): %v; measuring anyway", id, srv.Label, err)
		} else {
			logf("server %s (%s) answering on %s after %s", id, srv.Label, srv.Addr(), d.Round(time.Millisecond))
		}
		servers[id] = srv
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// Correctness first: a sample of every kind, every DNS server but the ceiling.
	checks := map[Kind][]Query{}
	for _, k := range Kinds {
		qs := s.AllQueries(k)
		step := max(1, len(qs)/25)
		for i := 0; i < len(qs); i += step {
			checks[k] = append(checks[k], qs[i])
		}
		checks[k] = append(checks[k], qs[len(qs)-1])
	}
	for _, id := range []string{"a", "b"} {
		srv := servers[id]
		if srv == nil {
			continue
		}
		ask := NewAsker(srv.Addr(), 2*time.Second)
		res.Correctness[id] = map[Kind]*KindCheck{}
		b.goodKinds[id] = map[Kind]bool{}
		for _, k := range Kinds {
			rs := ask.CheckAll(ctx, checks[k], 8)
			kc := &KindCheck{Total: len(rs)}
			for i, r := range rs {
				if r.OK {
					kc.OK++
				} else if kc.FirstError == "" {
					kc.FirstError = checks[k][i].String() + ": " + r.Detail
				}
				if r.TC {
					kc.TC++
				}
				kc.MaxSize = max(kc.MaxSize, r.Size)
				kc.MaxAnswers = max(kc.MaxAnswers, r.NAns)
				kc.MaxExtra = max(kc.MaxExtra, r.NExtra)
				if k == KindNX && r.SOA {
					kc.NegSOA++
				}
			}
			res.Correctness[id][k] = kc
			b.goodKinds[id][k] = kc.OK == kc.Total
			if kc.OK != kc.Total {
				b.note("server %s (%s) answers %s wrong for %d of %d names, e.g. %s", id, srv.Label, k, kc.Total-kc.OK, kc.Total, kc.FirstError)
			}
		}
	}

	if o.phase(PhasePerf) {
		extra := strings.Fields(o.DNSPerfArgs)
		order := append([]Kind{KindMix}, Kinds...)
		ids := []string{}
		for _, id := range ServerIDs {
			if servers[id] != nil {
				ids = append(ids, id)
			}
		}
		for r := 1; r <= o.Rounds; r++ {
			for _, k := range order {
				// Rotate who goes first, so no server always runs right after another.
				rot := slices.Clone(ids)
				for range (r - 1) % max(1, len(rot)) {
					rot = append(rot[1:], rot[0])
				}
				for _, id := range rot {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					srv := servers[id]
					pr, err := RunDNSPerf(ctx, qdir, strconv.Itoa(srv.Port), files[k], o.Duration, extra)
					if err != nil {
						b.note("dnsperf %s on %s round %d: %v", k, id, r, err)
						continue
					}
					pr.Server, pr.Kind, pr.Round = id, k, r
					res.Perf = append(res.Perf, pr)
					logf("round %d %-17s %s: %8.0f qps  mean %.3f ms  p99 %.3f ms  lost %d  %v", r, k, id, pr.QPS, pr.MeanMs, pr.P99Ms, pr.Lost, pr.Rcodes)
				}
			}
		}
		if o.Profile {
			for _, id := range []string{"a", "b"} {
				if srv := servers[id]; srv != nil {
					if err := b.profile(ctx, srv, files[KindMix], extra); err != nil {
						b.note("profiling %s: %v", id, err)
					}
				}
			}
			// Where each server's CPU goes, kind by kind: how much of a
			// per-kind ratio our own code could still move.
			for _, k := range Kinds {
				for _, id := range ServerIDs {
					srv := servers[id]
					if srv == nil {
						continue
					}
					sh, err := b.kindShare(ctx, srv, k, files[k], extra)
					if err != nil {
						b.note("profiling %s under %s: %v", id, k, err)
						continue
					}
					res.CPUShares = append(res.CPUShares, sh)
					logf("CPU of %s under %s: ours %.0f%%, CoreDNS %.0f%%, miekg/dns %.0f%%, runtime %.0f%% (%.2f s sampled)", id, k, 100*sh.Ours, 100*sh.CoreDNS, 100*sh.DNSLib, 100*sh.Runtime, sh.Seconds)
				}
			}
		}
	}

	if o.phase(PhaseProgLat) && o.Updates > 0 {
		var targets []*Server
		for _, id := range []string{"a", "b"} {
			if servers[id] != nil {
				targets = append(targets, servers[id])
			}
		}
		if len(targets) > 0 {
			logf("programming latency: %d EndpointSlice updates, polling %d servers", o.Updates, len(targets))
			pl, err := MeasureProgLat(ctx, loader, s, targets, o.Updates, 10*time.Second)
			res.ProgLat = pl
			if err != nil {
				return fmt.Errorf("programming latency: %w", err)
			}
			for _, id := range []string{"a", "b"} {
				if p := pl[id]; p != nil {
					logf("programming latency %s: p50 %.2f ms p99 %.2f ms max %.2f ms (%d updates, %d timeouts)", id, p.P50Ms, p.P99Ms, p.MaxMs, p.N, p.Timeouts)
				}
			}
		}
	}
	// RSS of the servers after the load, for the record.
	for id, srv := range servers {
		if rss, hwm, err := procs.RSS(srv.Proc.Cmd.Process.Pid); err == nil {
			res.RSSAfterLoad[id] = [2]int64{rss, hwm}
		}
	}
	return nil
}

// profile takes a CPU profile of srv while dnsperf drives it with the mix,
// then a heap profile, and writes both (and `go tool pprof -top`) under
// profiles/.
func (b *Bench) profile(ctx context.Context, srv *Server, file string, extra []string) error {
	dir := filepath.Join(b.Out, "profiles")
	secs := int(b.Opt.Duration.Seconds())
	cpuPath := filepath.Join(dir, srv.ID+".cpu.pprof")
	errc := make(chan error, 1)
	go func() {
		errc <- fetch(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", srv.Pprof, secs), cpuPath)
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := RunDNSPerf(ctx, filepath.Join(b.Out, "run"), strconv.Itoa(srv.Port), file, b.Opt.Duration, extra); err != nil {
		return err
	}
	if err := <-errc; err != nil {
		return err
	}
	heapPath := filepath.Join(dir, srv.ID+".heap.pprof")
	if err := fetch(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap", srv.Pprof), heapPath); err != nil {
		return err
	}
	for _, p := range [][2]string{{cpuPath, "-top"}, {heapPath, "-top"}} {
		args := []string{"tool", "pprof", p[1], "-nodecount=30"}
		if strings.HasSuffix(p[0], "heap.pprof") {
			args = append(args, "-sample_index=inuse_space")
		}
		args = append(args, b.CoreDNS, p[0])
		out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
		if err == nil {
			_ = os.WriteFile(strings.TrimSuffix(p[0], ".pprof")+".top.txt", out, 0o644)
		}
	}
	b.Results.Profiles[srv.ID] = []string{cpuPath, heapPath}
	logf("profiles of %s: %s, %s", srv.ID, cpuPath, heapPath)
	return nil
}

func fetch(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startupPhase starts a, a+ (a with the answer-shaping options on), b
// and c on their own, alternating, o.Starts times each: the time from
// process start to answering every sample name right, and the RSS once
// synced.
func (b *Bench) startupPhase(ctx context.Context, size string, s Sizes) {
	o := b.Opt
	for r := 1; r <= o.Starts; r++ {
		ids := []string{"a", "a+", "b", "c"}
		if r%2 == 0 {
			ids = []string{"b", "a+", "a", "c"}
		}
		for _, id := range ids {
			if ctx.Err() != nil {
				return
			}
			if _, gone := b.Results.Unavailable[id]; gone {
				continue
			}
			sample := b.sampleFor(id, s)
			srv, err := b.StartServer(id, fmt.Sprintf("startup-%s-r%d", size, r))
			if err != nil {
				b.note("start %s: %v", id, err)
				continue
			}
			// At the largest size, once: a CPU profile of the start-up, taken
			// as soon as the pprof listener is up.
			var startProf chan error
			if r == 1 && (id == "a" || id == "b") && o.Profile && size != "1x" {
				startProf = make(chan error, 1)
				go func() {
					path := filepath.Join(b.Out, "profiles", fmt.Sprintf("%s.cpu.startup-%s.pprof", id, size))
					url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", srv.Pprof, int(o.StartupProfile.Seconds()))
					for ctx.Err() == nil && !srv.Proc.Exited() {
						if err := fetch(ctx, url, path); err == nil {
							startProf <- nil
							return
						}
						time.Sleep(5 * time.Millisecond)
					}
					startProf <- fmt.Errorf("no start-up profile")
				}()
			}
			d, err := b.WaitAnswering(ctx, srv, sample, o.StartupTimeout)
			if startProf != nil {
				if perr := <-startProf; perr == nil {
					logf("start-up CPU profile of %s at %s written", id, size)
				}
			}
			if err != nil {
				b.note("%s start-up at %s, round %d: %v", id, size, r, err)
				if srv.Proc.Exited() {
					b.Results.Unavailable[id] = lastLines(srv.Proc.Output(), 2)
				}
				b.StopServer(srv)
				continue
			}
			_ = waitCtx(ctx, o.Settle)
			rss, hwm, err := procs.RSS(srv.Proc.Cmd.Process.Pid)
			if r == 1 && id != "c" && o.Profile {
				// What the RSS is made of: a heap profile and the Go
				// runtime's memory statistics, once per size.
				base := filepath.Join(b.Out, "profiles", fmt.Sprintf("%s.heap.%s", id, size))
				if ferr := fetch(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap", srv.Pprof), base+".pprof"); ferr == nil {
					_ = fetch(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?debug=1", srv.Pprof), base+".txt")
					b.Results.MemStats[id+"@"+size] = memStats(base + ".txt")
				}
			}
			b.StopServer(srv)
			if err != nil {
				b.note("RSS of %s: %v", id, err)
				continue
			}
			st := b.Results.startup(size, id)
			st.StartMs = append(st.StartMs, ms(d))
			st.RSS = append(st.RSS, rss)
			st.HWM = append(st.HWM, hwm)
			logf("start-up %s %s round %d: answering after %s, RSS %.1f MiB (peak %.1f MiB)", size, id, r, d.Round(time.Millisecond), mib(rss), mib(hwm))
		}
	}
}

// sampleFor is the start-up sample, less the kinds the server answered
// wrong at steady state (they would never be "answered"; a+ answers as a
// does, in another order).
func (b *Bench) sampleFor(id string, s Sizes) []Query {
	all := s.Sample(8, 2)
	if id == "a+" {
		id = "a"
	}
	good := b.goodKinds[id]
	if good == nil {
		return all
	}
	var out []Query
	for _, q := range all {
		if good[q.Kind] {
			out = append(out, q)
		}
	}
	return out
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// goBenchPhase runs the plugin's go test benchmarks.
func (b *Bench) goBenchPhase(ctx context.Context) {
	logf("go test -run '^$' -bench . -benchmem %s", b.Opt.GoBench)
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", ".", "-benchmem", b.Opt.GoBench)
	out, err := cmd.CombinedOutput()
	_ = os.WriteFile(filepath.Join(b.Out, "go-bench.txt"), out, 0o644)
	b.Results.GoBench.Raw = string(out)
	if err != nil {
		b.Results.GoBench.Error = err.Error()
		b.note("go test -bench: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "pkg:") || strings.HasPrefix(line, "ok") || strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "?") {
			b.Results.GoBench.Lines = append(b.Results.GoBench.Lines, line)
		}
	}
}

// memStats picks the Go runtime's memory statistics (in MiB) out of a
// /debug/pprof/heap?debug=1 dump.
func memStats(path string) map[string]float64 {
	out := map[string]float64{}
	raw, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(raw), "\n") {
		var name string
		var v float64
		if n, _ := fmt.Sscanf(line, "# %s = %g", &name, &v); n == 2 {
			switch name {
			case "HeapAlloc", "HeapInuse", "HeapIdle", "HeapReleased", "HeapSys", "Sys", "NextGC", "StackInuse", "GCSys", "OtherSys":
				out[name] = v / (1 << 20)
			}
		}
	}
	return out
}

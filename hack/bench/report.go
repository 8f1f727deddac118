package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

func (r *Results) sum(id string, k Kind) *PerfSum {
	if r.Summary[id] == nil {
		return nil
	}
	return r.Summary[id][k]
}

// ratio is the median over rounds of the per-round QPS ratio x/y.
func (r *Results) ratio(x, y string, k Kind) (*RatioSum, bool) {
	rs := r.Ratios[x+"/"+y][k]
	return rs, rs != nil
}

func (rs *RatioSum) String() string {
	if len(rs.Rounds) < 2 {
		return fmt.Sprintf("%.2f", rs.Median)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", rs.Median, rs.Min, rs.Max)
}

func status(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

const notMeasured = "not measured"

func (r *Results) medStartup(size, id string) (startMs float64, rss float64, ok bool) {
	st := r.Startup[size][id]
	if st == nil || len(st.StartMs) == 0 {
		return 0, 0, false
	}
	rs := make([]float64, len(st.RSS))
	for i, v := range st.RSS {
		rs[i] = float64(v)
	}
	return median(st.StartMs), median(rs), true
}

// hasStartup reports whether server id was started for start-up and RSS.
func (r *Results) hasStartup(id string) bool {
	for _, m := range r.Startup {
		if m[id] != nil {
			return true
		}
	}
	return false
}

// sizes are the start-up sizes, smallest first ("1x" always).
func (r *Results) sizes() []string {
	out := []string{"1x"}
	for s := range r.Startup {
		if s != "1x" {
			out = append(out, s)
		}
	}
	factor := func(s string) int {
		v, _ := strconv.Atoi(strings.TrimSuffix(s, "x"))
		return v
	}
	slices.SortFunc(out, func(x, y string) int { return factor(x) - factor(y) })
	return out
}

// targets puts every target next to its measurement.
func (r *Results) targets() []Target {
	var ts []Target
	add := func(what, target, measured string, ok *bool) {
		st := notMeasured
		if ok != nil {
			st = status(*ok)
		}
		ts = append(ts, Target{what, target, measured, st})
	}
	b := func(v bool) *bool { return &v }

	if x, ok := r.ratio("a", "c", KindMix); ok {
		add("mix QPS a/c", ">= 0.90", x.String(), b(x.Median >= 0.90))
	} else {
		add("mix QPS a/c", ">= 0.90", "-", nil)
	}
	for _, k := range Kinds {
		if x, ok := r.ratio("a", "b", k); ok {
			add(string(k)+" QPS a/b", ">= 1.5", x.String(), b(x.Median >= 1.5))
		} else {
			add(string(k)+" QPS a/b", ">= 1.5", "-", nil)
		}
	}
	for _, size := range r.sizes() {
		as, ar, aok := r.medStartup(size, "a")
		bs, br, bok := r.medStartup(size, "b")
		if aok && bok {
			x := ar / br
			add("RSS after sync a/b at "+size, "<= 0.60", fmt.Sprintf("%.2f (%.1f / %.1f MiB)", x, ar/(1<<20), br/(1<<20)), b(x <= 0.60))
			add("start to answering at "+size, "a <= b", fmt.Sprintf("a %.0f ms, b %.0f ms", as, bs), b(as <= bs))
		} else {
			add("RSS after sync a/b at "+size, "<= 0.60", "-", nil)
			add("start to answering at "+size, "a <= b", "-", nil)
		}
	}
	if p := r.ProgLat["a"]; p != nil && len(p.Samples) > 0 {
		add("programming latency p99 (a)", "<= 50 ms", fmt.Sprintf("%.1f ms (%d updates, %d timeouts)", p.P99Ms, p.N, p.Timeouts), b(p.P99Ms <= 50 && p.Timeouts == 0))
	} else {
		add("programming latency p99 (a)", "<= 50 ms", "-", nil)
	}
	r.shapingTargets(add)
	r.relistTargets(add)
	r.memberScaleTargets(add)
	tcWhat := fmt.Sprintf("headless SRV (%d endpoints) without TC at 4096 (a)", r.Options.Sizes.Endpoints*r.Options.Sizes.Clusters)
	if c := r.Correctness["a"][KindHLSRV]; c != nil {
		add(tcWhat, "no TC", fmt.Sprintf("%d of %d truncated, %d answers, %d bytes", c.TC, c.Total, c.MaxAnswers, c.MaxSize), b(c.TC == 0 && c.OK == c.Total))
	} else {
		add(tcWhat, "no TC", "-", nil)
	}
	if im := r.Importer; im != nil && im.NotDone == "" && im.Exports > 0 && im.Server == "a" {
		v := fmt.Sprintf("%.2f s", im.P99Ms/1000)
		if f := im.Floor; f != nil && f.NotDone == "" {
			v += fmt.Sprintf(" (floor here: %.2f s)", f.P99Ms/1000)
		}
		add("importer export-to-answer p99 across clusters", "<= 2 s", v, b(im.P99Ms <= 2000 && im.Unanswered == 0))
		add("importer writes at steady state", "0", fmt.Sprintf("%.2f/s (%d in %.0f s)", im.SteadyWritesPerSec, im.SteadyWrites, im.SteadySeconds), b(im.SteadyWrites == 0))
	} else {
		add("importer export-to-answer p99 across clusters", "<= 2 s", "-", nil)
		add("importer writes at steady state", "0", "-", nil)
	}
	return ts
}

func (r *Results) Markdown() string {
	var w strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&w, format, args...) }
	o := r.Options
	p("# mcs-dns benchmark results\n\n")
	p("Run %s, %.0f s. Command: `%s`\n\n", r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Seconds, r.Command)
	m := r.Machine
	p("Machine: %s, %d cores, %s RAM, Linux %s; %s; dnsperf %s; %s. Shared with other work: absolute numbers are noisy, ratios within the run are what count.\n\n",
		m.CPU, m.Cores, m.MemTotal, m.Kernel, m.Go, strings.TrimPrefix(m.DNSPerf, "Version "), m.CoreDNS)
	p("Code: commit %s", m.Commit)
	if len(m.Dirty) > 0 {
		p(" plus uncommitted changes: %s", strings.Join(m.Dirty, "; "))
	}
	p(".\n\n")
	for _, f := range r.Fixture {
		p("- Fixture %dx: %d ClusterSetIP + %d headless ServiceImports in %d namespaces; %d endpoints (%d per headless import per cluster, %d source clusters) in %d EndpointSlices; loaded (%d creates) in %.1f s.\n",
			f.Scale, f.Sizes.Imports, f.Sizes.Headless, f.Sizes.Namespaces, f.Endpoints, f.Sizes.Endpoints, f.Sizes.Clusters, f.Slices, f.Objects, f.Seconds)
	}
	p("- Servers (one binary, `.:PORT`, no cache): a = `mcs clusterset.local { max_udp_size 4096 }` (the buffer the queries advertise); b = `kubernetes cluster.local clusterset.local { multicluster clusterset.local }` (peer); c = `whoami` (ceiling).")
	if r.Shaping != nil || r.hasStartup("a+") {
		p(" Shaping phase, start-up and RSS: a+ = a with `%s`.", shapedOptions)
	}
	p("\n")
	p("- dnsperf `-e -v %s`, %s per run, %d rounds; in every round each kind runs on a, b and c back to back (who goes first rotates). QPS and latency: medians over rounds; ratios: median of the per-round ratios (the three runs of a round are seconds apart, so the machine's drift cancels). p99 from dnsperf's per-query latencies (-v).\n\n", o.DNSPerfArgs, o.Duration, o.Rounds)
	for id, why := range r.Unavailable {
		p("**Server %s (%s) was not available:** `%s`\n\n", id, serverLabels[id], why)
	}

	p("## Targets\n\n| what | target | measured | status |\n|---|---|---|---|\n")
	for _, t := range r.Targets {
		p("| %s | %s | %s | %s |\n", t.What, t.Target, t.Measured, t.Status)
	}

	p("\n## Throughput and latency (medians over rounds; ratios: median of the per-round ratios, min–max in brackets)\n\n")
	p("| kind | a mcs QPS | b peer QPS | c ceiling QPS | a/b | a/c | b/c | a mean / p99 ms | b mean / p99 ms | c mean / p99 ms |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range append([]Kind{KindMix}, Kinds...) {
		a, bb, c := r.sum("a", k), r.sum("b", k), r.sum("c", k)
		q := func(s *PerfSum) string {
			if s == nil {
				return "-"
			}
			return fmt.Sprintf("%.0f", s.QPS)
		}
		lat := func(s *PerfSum) string {
			if s == nil {
				return "-"
			}
			return fmt.Sprintf("%.3f / %.3f", s.MeanMs, s.P99Ms)
		}
		rt := func(x, y string) string {
			if v, ok := r.ratio(x, y, k); ok {
				return v.String()
			}
			return "-"
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", k, q(a), q(bb), q(c), rt("a", "b"), rt("a", "c"), rt("b", "c"), lat(a), lat(bb), lat(c))
	}

	r.cpuShareMarkdown(p)
	r.shapingMarkdown(p)

	p("\n## Answers checked before measuring (sample of every kind, UDP EDNS0 4096, TCP on TC)\n\n")
	p("| server | kind | right | TC at 4096 | largest UDP answer | answers / additional | note |\n|---|---|---:|---:|---:|---:|---|\n")
	for _, id := range []string{"a", "b"} {
		for _, k := range Kinds {
			c := r.Correctness[id][k]
			if c == nil {
				continue
			}
			note := c.FirstError
			if k == KindNX {
				note = strings.TrimSpace(fmt.Sprintf("SOA in %d of %d; %s", c.NegSOA, c.Total, note))
			}
			p("| %s | %s | %d/%d | %d | %d B | %d / %d | %s |\n", id, k, c.OK, c.Total, c.TC, c.MaxSize, c.MaxAnswers, c.MaxExtra, strings.ReplaceAll(note, "|", "\\|"))
		}
	}

	p("\n## Memory and start-up (medians of %d starts each, alternating a, a+ and b)\n\n", o.Starts)
	p("| size | a RSS after sync | a+ RSS after sync | b RSS after sync | a/b | a+/a | c RSS (floor: the binary, no data) | above the floor: (a-c)/(b-c) | a start to answering | a+ start to answering | b start to answering |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, size := range r.sizes() {
		as, ar, aok := r.medStartup(size, "a")
		ps, pr, pok := r.medStartup(size, "a+")
		bs, br, bok := r.medStartup(size, "b")
		f := func(ok bool, v float64, unit string) string {
			if !ok {
				return "-"
			}
			if unit == "MiB" {
				return fmt.Sprintf("%.1f MiB", v/(1<<20))
			}
			return fmt.Sprintf("%.0f ms", v)
		}
		rt, shaped := "-", "-"
		if aok && bok {
			rt = fmt.Sprintf("%.2f", ar/br)
		}
		if aok && pok {
			shaped = fmt.Sprintf("%.2f", pr/ar)
		}
		_, cr, cok := r.medStartup(size, "c")
		above := "-"
		if aok && bok && cok && br > cr {
			above = fmt.Sprintf("%.2f", (ar-cr)/(br-cr))
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", size, f(aok, ar, "MiB"), f(pok, pr, "MiB"), f(bok, br, "MiB"), rt, shaped, f(cok, cr, "MiB"), above, f(aok, as, "ms"), f(pok, ps, "ms"), f(bok, bs, "ms"))
	}
	p("\nStart to answering: from starting the process to every name of a sample (the last service of every namespace of each kind, plus random ones, all kinds it answers right) answering right; polled every few ms. RSS: VmRSS %s after that. The target is a/b; a+/a is what the shaping options cost (their rings are packed on a name's first shaped query, so the sample's headless names are packed; the rest is the same answers); (a-c)/(b-c) is what each server's data costs above the RSS of the same binary serving nothing (c), for reading only.\n", o.Settle)
	if len(r.MemStats) > 0 {
		keys := make([]string, 0, len(r.MemStats))
		for k := range r.MemStats {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		p("Go heap after sync (first start of each size; MiB): ")
		for _, k := range keys {
			ms := r.MemStats[k]
			p("%s: HeapAlloc %.1f, HeapInuse %.1f, HeapSys %.1f, NextGC %.1f, Sys %.1f; ", k, ms["HeapAlloc"], ms["HeapInuse"], ms["HeapSys"], ms["NextGC"], ms["Sys"])
		}
		p("\n")
	}
	if len(r.RSSAfterLoad) > 0 {
		p("RSS after the throughput runs (VmRSS / VmHWM):")
		for _, id := range ServerIDs {
			if v, ok := r.RSSAfterLoad[id]; ok {
				p(" %s %.1f / %.1f MiB;", id, mib(v[0]), mib(v[1]))
			}
		}
		p("\n")
	}

	r.relistReport(p)

	p("\n## DNS programming latency (EndpointSlice update acknowledged -> new answer over DNS)\n\n")
	p("| server | updates | p50 | p99 | max | timeouts (10 s) |\n|---|---:|---:|---:|---:|---:|\n")
	for _, id := range []string{"a", "b"} {
		if pl := r.ProgLat[id]; pl != nil {
			p("| %s | %d | %.2f ms | %.2f ms | %.2f ms | %d |\n", id, pl.N, pl.P50Ms, pl.P99Ms, pl.MaxMs, pl.Timeouts)
		}
	}

	p("\n## mcs-importer\n\n")
	if im := r.Importer; im == nil {
		p("Not run.\n")
	} else if im.NotDone != "" {
		p("Not done: %s\n", im.NotDone)
	} else {
		p("| what | value |\n|---|---|\n")
		p("| mcs-importer flags | `%s` |\n", im.Args)
		p("| exports created in %s, answered by CoreDNS (%s) of %s | %d |\n", im.Exporter, serverLabels[im.Server], strings.Join(im.Importers, ", "), im.Exports)
		p("| export acknowledged -> answered by both: p50 / p99 / max | %.0f / %.0f / %.0f ms |\n", im.P50Ms, im.P99Ms, im.MaxMs)
		p("| all %d answered by both after the first create | %.2f s |\n", im.Exports, im.AllSeconds)
		if im.QuietSeconds > 0 {
			p("| the importer's last write of the burst (statuses included), after the first create | %.2f s (%d writes) |\n", im.QuietSeconds, im.BurstWrites)
		}
		p("| not answered within the timeout | %d |\n", im.Unanswered)
		p("| writes at steady state (%s over %.0f s) | %d (%.2f/s) |\n", im.WritesCounted, im.SteadySeconds, im.SteadyWrites, im.SteadyWritesPerSec)
		p("| importer RSS at steady state (VmRSS / VmHWM) | %.1f / %.1f MiB |\n", mib(im.RSS), mib(im.HWM))
		if f := im.Floor; f != nil && f.NotDone != "" {
			p("| floor: the same answer writes straight from the bench | not measured: %s |\n", f.NotDone)
		} else if f != nil {
			p("| floor: the same answer writes straight from the bench (importer stopped; %d workers; %d writes): p50 / p99 / max | %.0f / %.0f / %.0f ms |\n", f.Workers, f.Writes, f.P50Ms, f.P99Ms, f.MaxMs)
			p("| floor: all %d answered by both after the first create | %.2f s (not answered: %d) |\n", im.Exports, f.AllSeconds, f.Unanswered)
		}
		if im.Detail != "" {
			p("\n%s\n", im.Detail)
		}
		if f := im.Floor; f != nil && f.NotDone == "" {
			p("\nFloor: after the steady-state window the importer is stopped and the bench exports another %d Services in `%s`; as each export is acknowledged it computes the import and mirrored slices with the importer's own rules (`aggregate.Compute`) and creates them in all three clusters itself (%d exports at a time, slices then import, member by member, as the importer's serve pass does; no reads, no statuses), measured the same way. It is what these API servers allow any importer that writes the same objects.\n", im.Exports, floorNS, f.Workers)
		}
	}

	r.memberScaleMarkdown(p)

	p("\n## go test -bench (plugin)\n\n")
	if len(r.GoBench.Lines) == 0 && r.GoBench.Error == "" {
		p("Not run.\n")
	} else {
		p("```\n%s\n```\n", strings.Join(r.GoBench.Lines, "\n"))
		if r.GoBench.Error != "" {
			p("\n`go test` failed: %s (output in go-bench.txt)\n", r.GoBench.Error)
		}
	}
	if len(r.Profiles) > 0 {
		p("\nProfiles (CPU under the mix, then heap): ")
		ids := make([]string, 0, len(r.Profiles))
		for id := range r.Profiles {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			p("%s: `%s`; ", id, strings.Join(r.Profiles[id], "`, `"))
		}
		p("\n")
	}
	if len(r.Notes) > 0 {
		p("\n## Notes\n\n")
		for _, n := range r.Notes {
			p("- %s\n", n)
		}
	}
	return w.String()
}

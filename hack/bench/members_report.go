package main

import (
	"fmt"
	"strconv"
)

// memberScaleTargets adds the member-scale targets: at 20 members or
// more, cold convergence within 1.2x the floor, a change at the farthest
// member within 150 ms at p99, peak RSS and CPU to converge at most half
// of the importer's before the scale work (178 MB, 16.2 s at 20 members);
// at the largest size of 40 or more, CPU per write no higher than at 10
// members, and idle CPU under 1% of a core; with one member slowed, the
// others' p99 within 1.25x of theirs without it.
func (r *Results) memberScaleTargets(add func(what, target, measured string, ok *bool)) {
	b := func(v bool) *bool { return &v }
	var at10, largest *MemberScaleResult
	for _, s := range r.MemberScale {
		if s.NotDone != "" {
			continue
		}
		if s.Members == 10 {
			at10 = s
		}
		if largest == nil || s.Members > largest.Members {
			largest = s
		}
	}
	for _, s := range r.MemberScale {
		if s.Members < 20 || s.NotDone != "" {
			continue
		}
		what := func(w string) string { return fmt.Sprintf("%s at %d members", w, s.Members) }
		if s.FloorNotDone == "" && s.FloorSeconds > 0 {
			x := s.ColdSeconds / s.FloorSeconds
			add(what("cold convergence / floor"), "<= 1.2", fmt.Sprintf("%.2f (%.1f s / %.1f s)", x, s.ColdSeconds, s.FloorSeconds), b(x <= 1.2))
		}
		add(what("change to the farthest member p99"), "<= 150 ms", fmt.Sprintf("%.0f ms (%d changes, %d unseen)", s.ChurnP99Ms, s.ChurnChanges, s.ChurnUnseen), b(s.ChurnP99Ms <= 150 && s.ChurnUnseen == 0))
		if s.Members == 20 {
			add(what("importer peak RSS"), fmt.Sprintf("<= %.0f MB", baseline20RSSMB/2), fmt.Sprintf("%.0f MB", float64(s.PeakRSS)/1e6), b(float64(s.PeakRSS)/1e6 <= baseline20RSSMB/2))
			add(what("importer CPU to converge"), fmt.Sprintf("<= %.1f s", baseline20CPU/2), fmt.Sprintf("%.1f s", s.CPUSeconds), b(s.CPUSeconds <= baseline20CPU/2))
		}
	}
	for _, s := range r.MemberScale {
		sl := s.Slow
		if s.NotDone != "" || sl == nil || sl.NotDone != "" {
			continue
		}
		add(fmt.Sprintf("the others' p99 with one member slowed by %.0f ms each way, at %d members", sl.DelayMs, s.Members),
			"<= 1.25x without it", fmt.Sprintf("%.0f vs %.0f ms (%d changes, %d unseen)", sl.OthersP99Ms, sl.BaseP99Ms, sl.Changes, sl.Unseen),
			b(sl.OthersP99Ms <= 1.25*sl.BaseP99Ms && sl.Unseen == 0))
	}
	if largest != nil && largest.Members >= 40 {
		idle := largest.IdleCPUSeconds / largest.IdleSeconds
		add(fmt.Sprintf("importer idle CPU at %d members", largest.Members), "< 1% of a core", fmt.Sprintf("%.2f%%", 100*idle), b(idle < 0.01))
		if at10 != nil && at10.ChurnWrites > 0 && largest.ChurnWrites > 0 {
			x, y := 1000*largest.ChurnCPUSeconds/float64(largest.ChurnWrites), 1000*at10.ChurnCPUSeconds/float64(at10.ChurnWrites)
			add(fmt.Sprintf("importer CPU per write during churn, %d vs 10 members", largest.Members), "no higher", fmt.Sprintf("%.2f vs %.2f ms", x, y), b(x <= y*1.1))
		}
	}
}

// memberScaleMarkdown is the member-scale section.
func (r *Results) memberScaleMarkdown(p func(string, ...any)) {
	p("\n## Member scale (one mcs-importer, M members)\n\n")
	if len(r.MemberScale) == 0 {
		p("Not run.\n")
		return
	}
	p("| members | per member: imports / mirrored slices / derived Services | cold convergence | floor (ratio) | importer writes (per member) | API writes | importer CPU to converge | CPU per write (converge / churn / floor writer) | peak RSS | watches | idle CPU | change to farthest member p50 / p99 / max |\n")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.MemberScale {
		if s.NotDone != "" {
			p("| %d | not done: %s |||||||||||\n", s.Members, s.NotDone)
			continue
		}
		floor := "-"
		if s.FloorNotDone != "" {
			floor = "not done: " + s.FloorNotDone
		} else if s.FloorSeconds > 0 {
			floor = fmt.Sprintf("%.1f s (%.2fx)", s.FloorSeconds, s.ColdSeconds/s.FloorSeconds)
		}
		perWrite := func(cpu float64, w int64) string {
			if w == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", 1000*cpu/float64(w))
		}
		p("| %d | %d / %d / %d | %.1f s | %s | %d (%.0f) | %d | %.1f s | %s / %s / %s ms | %.0f MB | %d | %.2f%% of a core | %.0f / %.0f / %.0f ms (%d changes, %s a second, %d unseen%s) |\n",
			s.Members, s.Imports, s.Slices, s.Derived, s.ColdSeconds, floor, s.ImporterWrites, float64(s.ImporterWrites)/float64(s.Members), s.APIWrites,
			s.CPUSeconds, perWrite(s.CPUSeconds, s.ImporterWrites), perWrite(s.ChurnCPUSeconds, s.ChurnWrites), perWrite(s.FloorCPUSeconds, s.FloorWrites), float64(s.PeakRSS)/1e6, s.Watches,
			100*s.IdleCPUSeconds/max(s.IdleSeconds, 1), s.ChurnP50Ms, s.ChurnP99Ms, s.ChurnMaxMs, s.ChurnChanges, strconv.FormatFloat(s.ChurnRate, 'f', -1, 64), s.ChurnUnseen, importerPart(s))
	}
	slowRows := false
	for _, s := range r.MemberScale {
		if s.Slow == nil {
			continue
		}
		if !slowRows {
			p("\nOne member slow (the churn again, with a fresh importer that reaches the last member through a proxy delaying every chunk each way; the changes are made in the other members):\n\n")
			p("| members | delay each way | the others' farthest p50 / p99 | without the slow member (the plain churn, same members) | the slow member p50 / p99 | changes (unseen) |\n|---:|---:|---:|---:|---:|---:|\n")
			slowRows = true
		}
		sl := s.Slow
		if sl.NotDone != "" {
			p("| %d | not done: %s |||||\n", s.Members, sl.NotDone)
			continue
		}
		p("| %d | %.0f ms | %.0f / %.0f ms | %.0f / %.0f ms | %.0f / %.0f ms | %d (%d) |\n", s.Members, sl.DelayMs,
			sl.OthersP50Ms, sl.OthersP99Ms, sl.BaseP50Ms, sl.BaseP99Ms, sl.SlowP50Ms, sl.SlowP99Ms, sl.Changes, sl.Unseen)
	}
	o := r.Options
	churnBound := ""
	if o.MemberChurnWrites > 0 {
		churnBound = fmt.Sprintf(" (fewer where that would ask more than %s mirrored-slice writes a second of the clusterset, a change being one write per member: %s/M at M members)",
			strconv.FormatFloat(o.MemberChurnWrites, 'f', -1, 64), strconv.FormatFloat(o.MemberChurnWrites, 'f', -1, 64))
	}
	p("\nEach member is its own kube-apiserver and etcd, all on this machine's cores, with the importer and the bench. Each member exports %d ClusterIP Services under names every member shares, %d under its own names and %d headless ones, %d ready endpoints each (one source slice, manager `%s`, which the importer is told to trust); all of it exists before the importer starts. Cold convergence: importer start to every member holding every import (ClusterSetIP ones with their VIP), mirrored slice and derived Service, seen by the bench's watches. Importer writes: `mcs_importer_writes_total` then (refused ones included); API writes: the API servers' `apiserver_request_total` writes to ServiceImports, ServiceExports, EndpointSlices and Services over the same time. Watches: open WATCH requests on all API servers, less the bench's own. Churn: %s endpoint-address changes per second for %s%s, each in a random member's export, timed from the update's acknowledgement to the last member's mirrored slice showing it. Idle: the importer's CPU over %s once its queue is empty and it has not written for 3 s. Floor: with the importer stopped, the same imports, mirrored slices and derived Services created again in another namespace of the same members (each import's status written after its create, as the status subresource requires of any writer), in random order, by a writer that reads and decides nothing, with as many creates in flight as the importer may have (16 workers x up to 16 members).\n",
		scaleShared, scaleOwn, scaleHeadless, scaleEndpoints, scaleSourceManager, strconv.FormatFloat(o.MemberChurnRate, 'f', -1, 64), o.MemberChurn, churnBound, o.MemberIdle)
}

// importerPart is the importer's own part of the churn's changes, as the
// histogram's buckets bound it ("" when not measured).
func importerPart(s *MemberScaleResult) string {
	if s.ChurnImporterCount == 0 {
		return ""
	}
	bound := func(ms float64) string {
		if ms < 0 {
			return "past the last bucket"
		}
		return fmt.Sprintf("<= %.0f ms", ms)
	}
	return fmt.Sprintf("; the importer's part, seeing a change to its last write: p50 %s, p99 %s", bound(s.ChurnImporterP50Ms), bound(s.ChurnImporterP99Ms))
}

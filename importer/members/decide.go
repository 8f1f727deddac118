package members

import (
	"time"
)

// decide ends and starts disruptions and withdraws the members whose
// grace period has passed.
func (s *Set) decide() {
	defer s.markDirty()
	now := s.o.now()
	var changes []Change
	s.mu.Lock()
	if s.unsettled > 0 {
		// Until every member has been tried once, what cannot be
		// reached is not known yet: a disruption would look like a few
		// members whose grace periods (restored from a Record) passed.
		s.mu.Unlock()
		return
	}
	// away counts the members the importer cannot reach now, whatever
	// their state: one withdrawn earlier (Down, or never joined and
	// expired) that still cannot be reached is as much evidence of a
	// broken network as one that went away a moment ago. Otherwise a
	// growing outage (two of four withdrawn for real, then the importer's
	// own network fails) would look like half the clusterset, and the
	// rest would be withdrawn too.
	away := 0
	for _, sl := range s.slots {
		if sl.netDown && (sl.member == nil || sl.member.State() != Up) {
			away++
		}
	}
	disrupted := away*2 > len(s.slots)
	switch {
	case disrupted && !s.disrupted:
		s.disrupted, s.disruptedAt = true, now
		s.o.Log.Warn("most member clusters cannot be reached at once; suspecting the importer's own network: nothing is withdrawn until they are seen again",
			"away", away, "members", len(s.slots))
	case !disrupted && s.disrupted:
		s.disrupted = false
		if !s.overLimit {
			s.resume(now)
		}
		s.overLimit = false
		s.o.Log.Info("disruption over; the time it lasted (up to --max-disruption) does not count towards any member's grace period",
			"lasted", now.Sub(s.disruptedAt).Round(time.Second), "away", away, "members", len(s.slots))
	case disrupted && !s.overLimit && s.o.MaxDisruption > 0 && now.Sub(s.disruptedAt) >= s.o.MaxDisruption:
		s.overLimit = true
		s.resume(s.disruptedAt.Add(s.o.MaxDisruption))
		s.o.Log.Warn("the disruption has lasted --max-disruption; grace periods run again and members away longer are withdrawn",
			"since", s.disruptedAt, "maxDisruption", s.o.MaxDisruption, "away", away, "members", len(s.slots))
	}
	if !s.disrupted || s.overLimit {
		rebuild := false
		for _, sl := range s.slots {
			m := sl.member
			if sl.claimedID != "" {
				continue // answering and syncing: not gone
			}
			switch {
			case m == nil && !sl.expired && now.Sub(sl.awaySince) >= s.o.Grace:
				sl.expired, rebuild = true, true
				changes = append(changes, Change{Context: sl.cfg.Context, State: Down, Reason: s.status(sl).Reason})
			case m != nil && m.State() == Unreachable:
				// Once per grace period at most: since is when it last
				// went Unreachable, after its last withdrawal.
				if now.Sub(m.unreachableSince()) < s.o.Grace {
					continue
				}
				dropped := m.Caches()
				m.setState(Down, now)
				m.setCaches(nil)
				changes = append(changes, Change{Context: sl.cfg.Context, Member: m, State: Down, Reason: sl.reason, Dropped: dropped})
			}
		}
		if rebuild {
			s.rebuild()
		}
	}
	s.mu.Unlock()
	for _, ch := range changes {
		s.o.OnChange(ch)
		if ch.Dropped != nil {
			ch.Dropped.stop()
		}
	}
}

// resume ends a disruption (under mu): the time it lasted is taken off
// the grace periods of the members away meanwhile, as if their clocks had
// stopped.
func (s *Set) resume(now time.Time) {
	paused := func(since time.Time) time.Time {
		from := since
		if s.disruptedAt.After(from) {
			from = s.disruptedAt
		}
		if !now.After(from) {
			return since
		}
		return since.Add(now.Sub(from))
	}
	for _, sl := range s.slots {
		switch m := sl.member; {
		case m == nil && !sl.expired:
			sl.awaySince = paused(sl.awaySince)
		case m != nil && m.State() == Unreachable:
			m.setState(Unreachable, paused(m.unreachableSince()))
		}
	}
}

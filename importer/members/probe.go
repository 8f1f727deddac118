package members

import (
	"context"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/mcs-dns/mcs-dns/importer/write"
)

// slowProbeThreshold is how many probes in a row an Up member must fail
// by timing out (no answer within ProbeTimeout, or the API server saying
// it is too busy), without answering anything else of the importer's
// while they waited, before it is Unreachable. An API server that refuses
// connections, rejects the credentials or no longer serves the CRDs is
// Unreachable at the first probe; one that is only slow stays Up, so that
// an overloaded member does not flap between Up and Unreachable (each
// flap stops its writes until it is back). A probe that times out while
// the member answers other requests (the importer's writes, its caches'
// lists, their watches' events) does not count: the member is busy, not
// gone.
const slowProbeThreshold = 3

// timedOut reports whether a probe failed because the member did not
// answer in time or said it was too busy, as opposed to refusing.
func timedOut(err error) bool { return write.TimedOut(err) }

// versionCheckProbes: the served versions are read again every this many
// probes of an Up member (30 s at the default 5 s probe interval).
const versionCheckProbes = 6

// watch probes a joined member until ctx is done (false) or the member
// must be joined again because its served MCS API versions changed (true;
// it is Unreachable meanwhile, its last known state served).
func (s *Set) watch(ctx context.Context, sl *slot, m *Member) bool {
	log := s.o.Log.With("cluster", m.ID)
	t := time.NewTicker(s.o.ProbeInterval)
	defer t.Stop()
	// upProbes counts the probes since the member was last seen Up;
	// seen is the change the last version check found ("" none); slow
	// counts the probes of an Up member in a row that timed out with
	// nothing else answered meanwhile.
	upProbes, seen, slow := 0, "", 0
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		// Answers while this probe waited count as the member
		// answering; not earlier ones (the previous probe's own answer
		// would excuse the first timeout after a member went away).
		// time.Now: the clock answered is marked with.
		started := time.Now()
		err := m.Probe(ctx, s.o.ProbeTimeout)
		if ctx.Err() != nil {
			return false
		}
		answered := m.answeredSince(started)
		state := m.State()
		if err != nil && state == Up && timedOut(err) {
			// Slow, not gone: an overloaded API server stays Up (its
			// writes only take longer) unless it keeps not answering.
			if answered {
				slow = 0
				log.Debug("probe timed out while the member answered other requests; member stays up", "err", err)
				continue
			}
			if slow++; slow < slowProbeThreshold {
				log.Debug("probe timed out; member stays up", "timeouts", slow, "err", err)
				continue
			}
		} else {
			slow = 0
		}
		if err != nil || state != Up {
			upProbes, seen = 0, ""
		}
		switch {
		case err != nil && apierrors.IsNotFound(err):
			// The CRDs are gone, or no longer serve the versions the
			// caches and writes use.
			if change := m.VersionsChanged(s.o.ProbeTimeout); change != "" {
				s.rejoin(log, sl, m, change)
				return true
			}
			s.unreachable(log, sl, m, err)
		case err != nil:
			s.unreachable(log, sl, m, err)
		case state == Unreachable:
			// Its caches missed what happened while it was away, and
			// catch up only when their watches are made again (after a
			// compaction or a restart of its API server, by listing
			// again): a new generation lists it now, and tells only
			// what differs from what was known. Until it has, the
			// member stays Unreachable (nothing is written into it from
			// a stale view, its last known state stays served).
			prev := m.Caches()
			c, err := m.startCaches(ctx, s.o.Notify, prev)
			if err != nil {
				log.Error("starting caches", "err", err)
				continue
			}
			if !c.waitSynced(ctx, s.o.SyncTimeout) {
				m.abandon(c, prev)
				log.Warn("member cluster answers again, but its caches did not sync; will retry", "timeout", s.o.SyncTimeout)
				continue
			}
			if !s.transition(sl, m, Unreachable, Up, c) {
				m.abandon(c, prev)
				continue
			}
			if prev != nil {
				c.emitGone(prev)
				prev.stop()
			}
			log.Info("member cluster usable again within the grace period")
			s.o.OnChange(Change{Context: sl.cfg.Context, Member: m, State: Up, Returned: true})
		case state == Down:
			if change := m.VersionsChanged(s.o.ProbeTimeout); change != "" {
				s.rejoin(log, sl, m, change)
				return true
			}
			log.Info("member cluster usable again; relisting")
			c, err := m.startCaches(ctx, s.o.Notify, nil)
			if err != nil {
				log.Error("starting caches", "err", err)
				continue
			}
			if !c.waitSynced(ctx, s.o.SyncTimeout) {
				c.stop()
				log.Warn("caches did not sync; will retry", "timeout", s.o.SyncTimeout)
				continue
			}
			if !s.transition(sl, m, Down, Up, c) {
				c.stop()
				continue
			}
			log.Info("member cluster back; full resync")
			s.o.OnChange(Change{Context: sl.cfg.Context, Member: m, State: Up})
		case state == Up:
			if upProbes++; upProbes%versionCheckProbes == 0 {
				// Twice in a row: discovery right after a CRD change
				// can be ahead of or behind what is served.
				change := m.VersionsChanged(s.o.ProbeTimeout)
				if change != "" && change == seen {
					s.rejoin(log, sl, m, change)
					return true
				}
				seen = change
			}
		}
	}
}

// transition moves m from one state to another (with a new cache
// generation, when c is set) if it is still in from.
func (s *Set) transition(sl *slot, m *Member, from, to State, c *Caches) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.State() != from || sl.member != m {
		return false
	}
	if c != nil {
		m.setCaches(c)
	}
	m.setState(to, s.o.now())
	if to == Up {
		sl.reason, sl.netDown = "", false
	}
	return true
}

// unreachable records a failed probe: an Up member becomes Unreachable
// (its last known state served for the grace period); otherwise the
// reason is updated.
func (s *Set) unreachable(log *slog.Logger, sl *slot, m *Member, err error) {
	reason := Reason(err)
	s.mu.Lock()
	changed := sl.reason != reason
	sl.reason, sl.netDown = reason, !Reached(err)
	wasUp := m.State() == Up
	if wasUp {
		m.setState(Unreachable, s.o.now())
	}
	s.mu.Unlock()
	switch {
	case wasUp:
		log.Warn("member cluster unusable; serving its last known state for the grace period", "grace", s.o.Grace, "reason", reason)
		s.o.OnChange(Change{Context: sl.cfg.Context, Member: m, State: Unreachable, Reason: reason})
	case changed:
		log.Warn("member cluster still unusable", "state", m.State(), "reason", reason)
	}
}

// rejoin makes m Unreachable while the member is joined again at the
// versions it serves now.
func (s *Set) rejoin(log *slog.Logger, sl *slot, m *Member, change string) {
	reason := "MCS API versions changed (" + change + "); joining again at the new versions"
	s.mu.Lock()
	sl.reason, sl.netDown = reason, false
	wasUp := m.State() == Up
	if wasUp {
		m.setState(Unreachable, s.o.now())
	}
	s.mu.Unlock()
	log.Warn("member cluster's MCS API versions changed; joining it again (its last known state stays served)", "change", change)
	if wasUp {
		s.o.OnChange(Change{Context: sl.cfg.Context, Member: m, State: Unreachable, Reason: reason})
	}
}

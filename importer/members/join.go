package members

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/mcs-dns/mcs-dns/internal/memberconn"
)

// Run joins and watches the members until ctx is done; it stops every
// member's caches before it returns.
func (s *Set) Run(ctx context.Context) {
	s.mu.Lock()
	for _, sl := range s.slots {
		sl.awaySince = s.o.now()
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	if s.o.Store != nil {
		s.loadRecord(ctx)
		wg.Go(func() { s.recordLoop(ctx) })
	}
	for _, sl := range s.slots {
		wg.Go(func() { s.runSlot(ctx, sl) })
	}
	wg.Go(func() { wait.Until(s.decide, s.o.ProbeInterval, ctx.Done()) })
	wg.Wait()
	for _, m := range s.Members() {
		m.Stop()
	}
}

// joinRetryCap is the longest wait between two attempts to join a member
// (a few requests each: cheap to make every 10 s for as long as it is
// away).
const joinRetryCap = 10 * time.Second

// runSlot joins one member (again after its MCS API versions changed),
// retrying with back-off, and watches it while it is joined.
func (s *Set) runSlot(ctx context.Context, sl *slot) {
	log := s.o.Log.With("context", sl.cfg.Context)
	// Capped at joinRetryCap: until a member joins, nothing is written
	// into it, so its own DNS serves what was last written there; the cap
	// bounds how long after it answers again that lasts.
	newBackoff := func() wait.Backoff {
		return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: joinRetryCap}
	}
	bo := newBackoff()
	var old *Member
	for {
		m, err := s.join(ctx, sl, old)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			delay := bo.Step()
			s.failed(log, sl, err, delay)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			continue
		}
		bo = newBackoff()
		if !s.watch(ctx, sl, m) {
			return
		}
		old = m
	}
}

// join connects to the member, checks its cluster ID against the others,
// starts its caches and, once they have synced, publishes it (in place of
// old, when joining again).
func (s *Set) join(ctx context.Context, sl *slot, old *Member) (*Member, error) {
	cctx, cancel := context.WithTimeout(ctx, s.o.ConnectTimeout)
	m, err := Connect(cctx, sl.cfg.REST, sl.cfg.Context)
	cancel()
	if err != nil {
		return nil, err
	}
	m.Importing, m.ExportConditions = sl.cfg.Importing, sl.cfg.ExportConditions
	m.accessEvery = s.o.AccessCheckInterval
	s.keepID(sl, m)
	if err := ValidateID(m.ID); err != nil {
		return nil, err
	}
	if err := s.readRegion(ctx, m); err != nil {
		return nil, err
	}
	// Everything the caches and the writes need is asked for first: a
	// refusal of one resource (403) is then reported as what it is, not
	// as caches that never sync (which looks like a network failure).
	if err := m.Probe(ctx, s.o.ConnectTimeout); err != nil {
		return nil, err
	}
	if err := s.claim(sl, m.ID); err != nil {
		return nil, err
	}
	if err := m.Start(ctx, s.o.Notify, s.o.SyncTimeout); err != nil {
		s.mu.Lock()
		sl.claimedID = ""
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Lock()
	sl.member, sl.claimedID, sl.reason, sl.netDown, sl.expired = m, "", "", false, false
	if m.IDSource != idKept {
		sl.knownID, sl.knownIDSource = m.ID, m.IDSource
	}
	s.settle(sl)
	s.rebuild()
	s.mu.Unlock()
	s.o.Log.Info("member cluster joined", "context", m.Context, "cluster", m.ID, "idFrom", m.IDSource, "region", m.Region,
		"importing", m.Importing, "exportConditions", m.ExportConditions, "exportVersion", m.ExportVersion,
		"importVersion", m.ImportVersion, "clientLimit", m.ClientLimit(), "mcsSchema", m.Schema.String())
	if m.SchemaErr != nil {
		s.o.Log.Warn("cannot read the member's MCS schema; writing every field (a member whose CRDs drop some would be rewritten on every resync)",
			"cluster", m.ID, "err", m.SchemaErr)
	}
	// The replaced member's caches go with it, after the controller has
	// read the keys they held (what only they knew is reconciled again).
	var oldCaches *Caches
	if old != nil {
		oldCaches = old.Caches()
	}
	s.o.OnChange(Change{Context: sl.cfg.Context, Member: m, State: Up, Dropped: oldCaches})
	if old != nil {
		old.Stop()
	}
	return m, nil
}

// keepID holds a member's cluster ID when its ClusterProperty has gone
// since it last joined (an About API CRD reinstalled, say): falling back
// to the context name would rename the member and rewrite every slice
// mirrored from it. A ClusterProperty with another value is a rename the
// operator asked for, and is taken.
func (s *Set) keepID(sl *slot, m *Member) {
	s.mu.Lock()
	known, from := sl.knownID, sl.knownIDSource
	s.mu.Unlock()
	if known == "" || known == m.ID || from != idFromProperty || m.IDSource != idFromContext {
		return
	}
	s.o.Log.Warn("the member's ClusterProperty is gone; keeping the cluster ID it had rather than renaming it after its context",
		"context", sl.cfg.Context, "cluster", known, "property", "cluster.clusterset.k8s.io")
	m.ID, m.IDSource = known, idKept
}

// readRegion reads the member's region as it joins (so a change of its
// region ClusterProperty takes effect at its next join: the importer's
// start or the member rejoining). No such property is no region; one
// whose value is not a region, or that the importer may not read, is
// logged and is no region (the member joins: a region only orders DNS
// answers). An error of the API server
// fails the join, which is retried, rather than rewriting every slice
// of the member without its region.
func (s *Set) readRegion(ctx context.Context, m *Member) error {
	ctx, cancel := context.WithTimeout(ctx, s.o.ConnectTimeout)
	defer cancel()
	region, err := memberconn.ReadRegion(ctx, m.Dynamic, s.o.RegionProperty)
	switch {
	case errors.Is(err, memberconn.ErrNotRegion):
		s.o.Log.Warn("the member's region ClusterProperty is not a region; joining it without one",
			"context", m.Context, "cluster", m.ID, "err", err)
	case apierrors.IsForbidden(err):
		// A role that does not name this property (a --region-property
		// other than the default, or an older role): the member joins
		// without a region rather than not at all.
		s.o.Log.Warn("not allowed to read the member's region ClusterProperty; joining it without one (grant get on it to use regions)",
			"context", m.Context, "cluster", m.ID, "err", err)
	case err != nil:
		return err
	}
	m.Region = region
	return nil
}

// claim reserves cluster ID id for sl, unless another member has it.
func (s *Set) claim(sl *slot, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.slots {
		if o == sl {
			continue
		}
		if (o.member != nil && o.member.ID == id) || o.claimedID == id {
			return duplicateID(o.cfg.Context, sl.cfg.Context, id)
		}
	}
	sl.claimedID = id
	return nil
}

// failed records why a join attempt failed; it logs when the reason is
// new, not on every retry.
func (s *Set) failed(log *slog.Logger, sl *slot, err error, retryIn time.Duration) {
	reason := Reason(err)
	s.mu.Lock()
	changed := sl.reason != reason
	sl.reason, sl.netDown = reason, !Reached(err)
	first := !sl.attempted
	s.settle(sl)
	s.mu.Unlock()
	if changed || first {
		log.Warn("member cluster cannot be joined; retrying with back-off (the others are not affected)",
			"reason", reason, "retryIn", retryIn.Round(time.Millisecond))
	}
}

// settle marks sl's first attempt done (under mu).
func (s *Set) settle(sl *slot) {
	if sl.attempted {
		return
	}
	sl.attempted = true
	if s.unsettled--; s.unsettled == 0 {
		close(s.settled)
	}
}

// rebuild refreshes the joined list and the hold (under mu).
func (s *Set) rebuild() {
	var joined []*Member
	holding := false
	for _, sl := range s.slots {
		if sl.member != nil {
			joined = append(joined, sl.member)
		} else if !sl.expired {
			holding = true
		}
	}
	s.joined.Store(&joined)
	h := Hold{}
	if holding {
		ids := make([]string, len(joined))
		for i, m := range joined {
			ids[i] = m.ID
		}
		h = HoldAllBut(ids...)
	}
	s.hold.Store(&h)
}

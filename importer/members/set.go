package members

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
)

// Config is one member cluster as configured: how to reach it and what
// the importer does there.
type Config struct {
	// Context is the kubeconfig context it is reached through.
	Context string
	// REST is its client configuration (loaded, not yet used).
	REST *rest.Config
	// Importing and ExportConditions become the Member's fields.
	Importing, ExportConditions bool
}

// SetOptions configure a Set.
type SetOptions struct {
	Members []Config
	// ConnectTimeout bounds one attempt to join a member (cluster ID and
	// API discovery); SyncTimeout the wait for its caches to sync.
	ConnectTimeout, SyncTimeout time.Duration
	// ProbeInterval is how often joined members are probed, and how often
	// the Set decides on withdrawals; ProbeTimeout bounds one probe.
	ProbeInterval, ProbeTimeout time.Duration
	// Grace is how long a member that cannot be used keeps what came from
	// it: served when it was known, untouched when it was never seen.
	Grace time.Duration
	// Notify receives every informer event of every member.
	Notify func(Event)
	// OnChange is told of every state change, outside the Set's locks.
	OnChange func(Change)
	Log      *slog.Logger
	// Store keeps what the Set knows of its members for the next process
	// or leader term (nil: every hold starts with the process).
	Store RecordStore
	// OnRecordError is told of every failure to read or save the Record.
	OnRecordError func(error)
	// MaxDisruption bounds how long a disruption stops withdrawals: once
	// it has lasted this long, grace periods run again (0: no bound).
	MaxDisruption time.Duration
	// now is the clock (time.Now; tests of the decisions set it).
	now func() time.Time
}

// Change is a member's state change.
type Change struct {
	Context string
	// Member is the member, nil when it never joined.
	Member *Member
	State  State
	// Reason says why it is not Up ("" when it is).
	Reason string
	// Dropped is the cache generation a joined member loses when it goes
	// Down, or the replaced member's (still readable during OnChange), so
	// that the keys only it knew are reconciled too.
	Dropped *Caches
}

// Cluster names the member in logs and metrics: its cluster ID once it has
// joined, its context before.
func (c Change) Cluster() string {
	if c.Member != nil {
		return c.Member.ID
	}
	return c.Context
}

// Status is what the Set knows about one configured member.
type Status struct {
	Context string
	// Cluster is the cluster ID once the member has joined, else the context.
	Cluster string
	State   State
	// Reason says why the member is not Up ("" when it is).
	Reason string
	// WithdrawAt is when what came from a member that cannot be used is
	// withdrawn unless it is seen again (zero when it is Up or already
	// withdrawn); a disruption moves it on by as long as it lasts (see
	// Set.Disruption).
	WithdrawAt time.Time
	// HeldSinceEarlier: its grace period started in an earlier process
	// or leader term (restored from the Record).
	HeldSinceEarlier bool
}

// Disruption says whether withdrawals are stopped because most members
// cannot be reached at once.
type Disruption struct {
	Active bool
	Since  time.Time
	// Until is when withdrawals go on even if it lasts (zero: no bound);
	// LimitReached once that has passed.
	Until        time.Time
	LimitReached bool
}

// Hold says which cluster IDs' contributions must be left exactly as they
// are in the members: while any configured member has not been seen since
// the process started (and the grace period since then has not passed,
// or the clusterset is disrupted), an import or mirrored slice naming a
// cluster ID that is none of the joined members' may have come from it.
type Hold struct {
	known map[string]bool // nil: nothing is held
}

// HoldAllBut is the Hold while some member has not been seen: the
// contributions of every cluster but the joined ones are held.
func HoldAllBut(joined ...string) Hold {
	h := Hold{known: make(map[string]bool, len(joined))}
	for _, id := range joined {
		h.known[id] = true
	}
	return h
}

// Active reports whether anything is held.
func (h Hold) Active() bool { return h.known != nil }

// Holds reports whether what came from cluster id is held.
func (h Hold) Holds(id string) bool { return h.known != nil && !h.known[id] }

// Set runs the member clusters of one importer: it joins each configured
// member (cluster ID, served versions, caches) in the background, with
// back-off, whatever the others do; probes the joined ones; and decides,
// with the whole clusterset in view, when a member that cannot be used is
// withdrawn:
//
//   - a joined member that stops answering (or stops letting the importer
//     read: 401/403, CRDs gone) is Unreachable, its last known state
//     served, and goes Down (withdrawn) after the grace period;
//   - a member never seen since the start is Unknown: nothing that may have
//     come from it is touched (Hold) until it joins or the grace period has
//     passed since the start, when it goes Down too;
//   - while more than half of the members cannot be reached at once, whatever
//     their state before (withdrawn ones included; no
//     connection, timeouts, 5xx), the importer's own network is suspected:
//     no member is withdrawn, and the time the disruption lasts does not
//     count towards anyone's grace period (as Kubernetes' node lifecycle
//     controller stops evicting in a full disruption);
//   - a member that answers and is syncing its caches is not withdrawn;
//   - a member is withdrawn at most once per grace period (a flapping
//     member is not withdrawn and re-imported every few seconds).
type Set struct {
	o     SetOptions
	slots []*slot

	mu sync.Mutex
	// disrupted since disruptedAt (see decide); overLimit: it has lasted
	// MaxDisruption, and withdrawals go on.
	disrupted   bool
	disruptedAt time.Time
	overLimit   bool
	// recordDirty asks recordLoop to save the Record.
	recordDirty chan struct{}

	// joined and hold are rebuilt (under mu) whenever a member joins, is
	// replaced or gives up being Unknown; read lock-free by the reconcile.
	joined atomic.Pointer[[]*Member]
	hold   atomic.Pointer[Hold]
	// away: AwayClaims, rebuilt (under mu) with every Record.
	away atomic.Pointer[[]AwayClaims]

	unsettled int
	settled   chan struct{}
}

// slot is one configured member; guarded by Set.mu.
type slot struct {
	cfg Config
	// member is the member once it has joined (nil before).
	member *Member
	// claimedID is the cluster ID of a join in progress (duplicate check).
	claimedID string
	// knownID is the cluster ID the member last joined with, and
	// knownIDSource where it came from (see keepID).
	knownID, knownIDSource string
	// reason is why the member cannot be used ("" when it can); netDown
	// that this is a failure to reach its API (it counts towards a
	// disruption).
	reason  string
	netDown bool
	// attempted: the first join attempt has ended.
	attempted bool
	// expired: never joined, and withdrawn when the hold ran out.
	expired bool
	// awaySince is when the grace period of a member never joined
	// started: the start (or, restoredAway, when an earlier process saw
	// it go), moved on by the disruptions since.
	awaySince    time.Time
	restoredAway bool
	// claims: the clusterset-CIDR VIPs its imports held when it was last
	// seen (restored from the Record, or taken from its caches while it is
	// not Up); nil while it is Up.
	claims []RecordedClaim
}

// NewSet returns a Set of the configured members; Run runs it.
func NewSet(o SetOptions) *Set {
	if o.now == nil {
		o.now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	s := &Set{o: o, unsettled: len(o.Members), settled: make(chan struct{}), recordDirty: make(chan struct{}, 1)}
	for _, c := range o.Members {
		s.slots = append(s.slots, &slot{cfg: c})
	}
	s.joined.Store(&[]*Member{})
	s.hold.Store(&Hold{known: map[string]bool{}})
	if len(o.Members) == 0 {
		close(s.settled)
	}
	return s
}

// Members returns the members that have joined, Up, Unreachable or Down.
func (s *Set) Members() []*Member { return *s.joined.Load() }

// Hold returns what must be left as it is now (see Hold).
func (s *Set) Hold() Hold { return *s.hold.Load() }

// Lookup returns the joined member with cluster ID id, or nil.
func (s *Set) Lookup(id string) *Member {
	for _, m := range s.Members() {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// Settled is closed once every member has been tried once (joined, or
// found unusable and reported).
func (s *Set) Settled() <-chan struct{} { return s.settled }

// Statuses returns every configured member's state, in configuration order.
func (s *Set) Statuses() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, len(s.slots))
	for i, sl := range s.slots {
		out[i] = s.status(sl)
	}
	return out
}

func (s *Set) status(sl *slot) Status {
	st := Status{Context: sl.cfg.Context, Cluster: sl.cfg.Context, Reason: sl.reason}
	switch {
	case sl.member != nil:
		st.Cluster, st.State = sl.member.ID, sl.member.State()
		if st.State == Up {
			st.Reason = ""
		}
		if st.State == Unreachable {
			st.WithdrawAt = sl.member.unreachableSince().Add(s.o.Grace)
		}
	case sl.expired:
		st.State = Down
	default:
		st.State = Unknown
		if st.Reason == "" {
			st.Reason = "not reached yet"
		}
		st.WithdrawAt, st.HeldSinceEarlier = sl.awaySince.Add(s.o.Grace), sl.restoredAway
	}
	return st
}

// Disruption returns the current disruption, if any.
func (s *Set) Disruption() Disruption {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.disrupted {
		return Disruption{}
	}
	d := Disruption{Active: true, Since: s.disruptedAt, LimitReached: s.overLimit}
	if s.o.MaxDisruption > 0 {
		d.Until = s.disruptedAt.Add(s.o.MaxDisruption)
	}
	return d
}

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

// runSlot joins one member (again after its MCS API versions changed),
// retrying with back-off, and watches it while it is joined.
func (s *Set) runSlot(ctx context.Context, sl *slot) {
	log := s.o.Log.With("context", sl.cfg.Context)
	newBackoff := func() wait.Backoff {
		return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 30 * time.Second}
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
	s.keepID(sl, m)
	if err := ValidateID(m.ID); err != nil {
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
	s.o.Log.Info("member cluster joined", "context", m.Context, "cluster", m.ID, "idFrom", m.IDSource,
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

// slowProbeThreshold is how many probes in a row an Up member must fail
// by timing out (no answer within ProbeTimeout, or the API server saying
// it is too busy) before it is Unreachable. An API server that refuses
// connections, rejects the credentials or no longer serves the CRDs is
// Unreachable at the first probe; one that is only slow stays Up, so that
// an overloaded member does not flap between Up and Unreachable (each
// flap stops its writes, and its return reconciles every key again).
const slowProbeThreshold = 3

// timedOut reports whether a probe failed because the member did not
// answer in time or said it was too busy, as opposed to refusing.
func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err)
}

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
	// counts the probes of an Up member in a row that timed out.
	upProbes, seen, slow := 0, "", 0
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		err := m.Probe(ctx, s.o.ProbeTimeout)
		if ctx.Err() != nil {
			return false
		}
		state := m.State()
		if err != nil && state == Up && timedOut(err) {
			// Slow, not gone: an overloaded API server stays Up (its
			// writes only take longer) unless it keeps not answering.
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
			if s.transition(sl, m, Unreachable, Up, nil) {
				log.Info("member cluster usable again within the grace period")
				s.o.OnChange(Change{Context: sl.cfg.Context, Member: m, State: Up})
			}
		case state == Down:
			if change := m.VersionsChanged(s.o.ProbeTimeout); change != "" {
				s.rejoin(log, sl, m, change)
				return true
			}
			log.Info("member cluster usable again; relisting")
			c, err := m.startCaches(ctx, s.o.Notify)
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

// Static is a fixed list of members that have joined (started by the
// caller), for tests of the parts that read members.
type Static []*Member

// Members implements the members' view of a Set.
func (s Static) Members() []*Member { return s }

// Hold holds nothing: every member is known.
func (Static) Hold() Hold { return Hold{} }

// Lookup returns the member with cluster ID id, or nil.
func (s Static) Lookup(id string) *Member {
	for _, m := range s {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// Statuses reports each member's state.
func (s Static) Statuses() []Status {
	out := make([]Status, len(s))
	for i, m := range s {
		out[i] = Status{Context: m.Context, Cluster: m.ID, State: m.State()}
	}
	return out
}

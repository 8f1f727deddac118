package members

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

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
	// AccessCheckInterval is how often a probe also checks the importer's
	// access in full while nothing was refused (0: DefaultAccessCheckInterval).
	AccessCheckInterval time.Duration
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
	// RegionProperty is the ClusterProperty each member's region is read
	// from when it joins ("": mcsapi.RegionProperty).
	RegionProperty string
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
	// Returned: Up again within the grace period (from Unreachable), its
	// caches kept through it; nothing was written to it meanwhile.
	Returned bool
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

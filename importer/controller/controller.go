// Package controller is mcs-importer's reconcile loop: member informer
// events become namespace/name keys on a rate-limited priority work queue;
// a worker reads every member's caches for the key, asks aggregate for the
// desired state, and then, for each importing member, diffs desired against
// actual and writes only the difference; last, it sets each export's
// conditions when they changed.
//
// Two passes: what DNS and the data path read (the ServiceImport's
// metadata and spec, the mirrored EndpointSlices) is written first, in a
// serve pass at high priority; statuses (ServiceImport status, ServiceExport
// conditions) follow in a full pass at normal priority. Every event queues
// a serve pass, which queues a full pass when it is done. The member API
// servers are what limits a burst (say 1,000 new exports, or a cluster
// joining): they spend about the same on every write, so writing the
// answers first makes the last name resolvable after 6 of every 10 writes
// instead of all 10; the statuses catch up behind them. The two passes of
// a key are separate queue items (a serve request must not merge with, and
// so postpone, a pending full pass), and never run at the same time: an
// item handed out while its key is busy is parked and queued again when
// the key is released. A full pass waits fullPassDelay, so that the caches
// have seen the serve pass's writes (a full pass reading older objects
// would repeat them and meet conflicts). A full pass owed for
// fullPassMaxWait runs in place of the key's next serve pass (it does the
// serve pass's work too) and is raised above the serve passes, so that
// neither a stream of changes to the key nor other keys' serve passes hold
// its statuses back for long. A failed serve pass is retried as a full pass,
// so that conditions still report what is wrong.
//
// Ownership: everything the importer writes carries
// endpointslice.kubernetes.io/managed-by=mcs-importer.mcs-dns.io. Objects
// without it are never updated or deleted. A ServiceImport of the same
// name that the importer does not own is left alone: the importer logs it,
// writes no EndpointSlices for that import into that cluster (and removes
// its own), and the exports get Ready=False with reason Failed naming the
// cluster, until the foreign object is removed. An object that holds the
// name of a mirrored slice or of a derived Service keeps out only that
// slice or VIP: the import is written with the rest and says what is
// missing, and the key is retried until the name is free.
package controller

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/internal/policy"
)

// Clusterset is what the controller reads about the member clusters: a
// members.Set, or members.Static in tests.
type Clusterset interface {
	// Members are the members that have joined (Up, Unreachable or Down).
	Members() []*members.Member
	// Hold says which clusters' contributions must be left as they are.
	Hold() members.Hold
	// Statuses are every configured member's states.
	Statuses() []members.Status
}

// Options configure a Controller.
type Options struct {
	Members Clusterset
	VIP     vip.Provider
	// Leftovers, when set, is released for a key in an importing member
	// once its import there is written without them (or deleted): it
	// removes what another --vip-mode left (derived Services, whose
	// ClusterIPs kube-proxy would otherwise route for ever).
	Leftovers vip.Provider
	Log       *slog.Logger
	// Registerer receives the metrics.
	Registerer prometheus.Registerer
	// Now stamps new conditions (time.Now when nil).
	Now func() time.Time
	// TrustedManagers are the endpointslice.kubernetes.io/managed-by
	// values of the source EndpointSlices mirrored (nil:
	// DefaultTrustedManagers); others are ignored and counted.
	TrustedManagers []string
	// Policy returns the export policy in force (nil, or a nil Policy:
	// the default rules). Called once per reconcile; after it changes,
	// call EnqueueAll.
	Policy func() *policy.Policy
}

// Controller reconciles imports across the member clusters.
type Controller struct {
	set       Clusterset
	vip       vip.Provider
	leftovers vip.Provider
	log       *slog.Logger
	queue     priorityqueue.PriorityQueue[item]
	// queueStop makes ShutDown safe to call twice (the queue's is not).
	queueStop sync.Once
	metrics   *Metrics
	prop      *propagation
	now       func() time.Time

	// wantsClusterSetIP is the VIP provider's policy, when it gives
	// clusterset-wide VIPs (the aggregate marks the imports that ask).
	wantsClusterSetIP func(*mcsv1beta1.ServiceExport) bool

	warnedMu sync.Mutex
	warned   map[string]bool // "cluster/ns/name" of foreign imports already logged

	// stateLabel: the cluster label each context's member_state series
	// has (its context until it joins, then its cluster ID).
	stateMu    sync.Mutex
	stateLabel map[string]string

	// frozen: keys left as they are in some member because what they
	// hold may have come from a member not seen yet (members.Hold).
	frozen lockedSet

	// types: type changes of existing imports waiting to settle.
	types typeSettle

	// heldNames: "cluster/ns/name" of mirrored slices whose names objects
	// we do not manage held when last tried.
	heldNames lockedSet

	// applied: which members hold the mirrored slices each key's last
	// pass wanted, so that a pass compares only what changed.
	applied *appliedSlices

	// conflicted: keys whose exports conflicted when last reconciled.
	conflicted lockedSet
	// missed: the keys reconciled while a member was out of reach.
	missed missedWrites

	// trust leaves out the source slices of untrusted managers, and
	// addresses the export policy does not allow.
	trust  *sliceTrust
	policy func() *policy.Policy

	// passes: which keys are busy, the items parked behind them, and
	// which full passes are owed since when.
	passes *keyPasses

	// pool runs the member parts of reconciles and their slice writes.
	pool *goPool

	// afterPass, when set (by tests), sees every pass while its key is
	// still claimed; an error it returns fails the pass.
	afterPass func(k string, p pass) error
}

// New returns a controller; call Notify/OnChange from the members and Run.
func New(o Options) *Controller {
	c := &Controller{
		set:       o.Members,
		vip:       o.VIP,
		leftovers: o.Leftovers,
		log:       o.Log,
		now:       o.Now,
		warned:    map[string]bool{},

		passes:  newKeyPasses(),
		pool:    newGoPool(),
		applied: newAppliedSlices(),
		trust:   newSliceTrust(o.TrustedManagers),
		policy:  o.Policy,
	}
	if c.policy == nil {
		c.policy = func() *policy.Policy { return nil }
	}
	if c.set == nil {
		c.set = members.Static(nil)
	}
	if c.vip == nil {
		c.vip = vip.None{}
	}
	if c.now == nil {
		c.now = time.Now
	}
	if p, ok := c.vip.(vip.ClusterSetIPs); ok {
		c.wantsClusterSetIP = p.WantsClusterSetIP
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[item](10*time.Millisecond, 30*time.Second),
		&workqueue.TypedBucketRateLimiter[item]{Limiter: rate.NewLimiter(rate.Limit(50), 300)},
	)
	// No name: the queue's own metrics would go to controller-runtime's
	// registry, which the importer does not serve; queue_depth is ours.
	c.queue = priorityqueue.New("", func(o *priorityqueue.Opts[item]) { o.RateLimiter = limiter })
	reg := o.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	c.metrics = newMetrics(reg, func() float64 { return float64(c.queue.Len()) }, func() float64 {
		return float64(c.passes.owed())
	}, func() float64 { return float64(c.conflicted.Len()) })
	c.prop = newPropagation(reg)
	c.stateLabel = map[string]string{}
	c.refreshMemberStates("")
	// A VIP provider that writes objects of its own (derived Services)
	// reports them, so that mcs_importer_writes_total counts every write.
	for _, p := range []vip.Provider{c.vip, c.leftovers} {
		if r, ok := p.(writeReporter); ok {
			r.ReportWrites(c.wrote)
		}
	}
	return c
}

// lockedSet is a set of strings safe for concurrent use.
type lockedSet struct {
	mu sync.Mutex
	m  map[string]struct{}
}

func (s *lockedSet) Has(k string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[k]
	return ok
}

func (s *lockedSet) Insert(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]struct{}{}
	}
	s.m[k] = struct{}{}
}

func (s *lockedSet) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.m))
}

func (s *lockedSet) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func (s *lockedSet) Delete(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
}

// writeReporter is a VIP provider that sends writes of its own.
type writeReporter interface {
	ReportWrites(func(m *members.Member, kind, verb, ns, svc, name string, err error))
}

func key(ns, name string) string { return ns + "/" + name }

// pass is what one reconcile of a key writes.
type pass int

const (
	// passFull writes everything: imports, slices and statuses.
	passFull pass = iota
	// passServe writes only what answers read: import metadata and spec,
	// mirrored slices (and deletions). A full pass follows it.
	passServe
)

// item is one queued pass of one key.
type item struct {
	key  string
	pass pass
}

// Queue priorities: a full pass has 0, a serve pass priorityServe, and a
// full pass owed for fullPassMaxWait priorityOverdue (ahead of every serve
// pass queued).
const (
	priorityServe   = 10
	priorityOverdue = 20
)

const (
	// fullPassDelay is how long after a serve pass its full pass is
	// queued: informers deliver our own writes within milliseconds.
	fullPassDelay = time.Second
	// fullPassMaxWait bounds how long serve passes can hold back a key's
	// full pass (statuses) under a sustained stream of changes.
	fullPassMaxWait = 30 * time.Second
)

// retryPriority is the priority a pass that failed, or did not finish,
// is queued again at: at least a serve pass's. It may have left members
// without their copies (a full pass writes them too), which must not
// wait behind every serve pass queued meanwhile, as a full pass's
// statuses do: at 40 members such retries waited minutes.
func retryPriority(priority int) int { return max(priority, priorityServe) }

// addServe queues a serve pass of k (the response to any change).
func (c *Controller) addServe(k string) {
	c.queue.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(priorityServe)}, item{k, passServe})
}

// addFull queues a full pass of k after fullPassDelay.
func (c *Controller) addFull(k string) {
	// Queued again while one waits: the earlier time holds, so a stream
	// of serve passes does not postpone it.
	c.passes.oweFull(k, c.now())
	c.queue.AddWithOpts(priorityqueue.AddOpts{After: fullPassDelay}, item{k, passFull})
}

// promoteOverdue raises every full pass owed for fullPassMaxWait above the
// serve passes.
func (c *Controller) promoteOverdue() {
	for _, k := range c.passes.allOverdue(c.now()) {
		c.queue.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(priorityOverdue)}, item{k, passFull})
	}
}

// Metrics returns the controller's metrics.
func (c *Controller) Metrics() *Metrics { return c.metrics }

// Run runs workers until ctx is done, and a full resync every resync
// (none when 0). It returns when every worker has stopped.
func (c *Controller) Run(ctx context.Context, workers int, resync time.Duration) {
	// The Set may have restored states from the member record since New
	// (a member withdrawn by an earlier process is Down from the start,
	// with no change to report it).
	c.refreshMemberStates("")
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.processNext(ctx) {
			}
		}()
	}
	every(ctx, &wg, fullPassMaxWait/4, c.promoteOverdue)
	if resync > 0 {
		every(ctx, &wg, resync, func() {
			c.log.Debug("periodic resync")
			c.resyncAll()
		})
	}
	<-ctx.Done()
	// ShutDown (not ShutDownWithDrain, which leaves the delaying queue's
	// goroutine running): workers finish their current key, whose API
	// calls fail fast now that ctx is done.
	c.ShutDown()
	wg.Wait()
}

// ShutDown stops the work queue and the goroutines New started for it,
// and ends the goroutines kept for member parts (waiting for those still
// at work, which end soon once their context is done). Run does so when
// it returns; whoever made the controller and then does not run it
// (start-up failed, leadership never came) must call it. Safe to call
// more than once.
func (c *Controller) ShutDown() {
	c.queueStop.Do(c.queue.ShutDown)
	c.pool.Stop()
}

// every runs f every d until ctx ends, in a goroutine wg waits for.
func every(ctx context.Context, wg *sync.WaitGroup, d time.Duration, f func()) {
	wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f()
			}
		}
	})
}

func (c *Controller) processNext(ctx context.Context) bool {
	it, priority, shutdown := c.queue.GetWithPriority()
	if shutdown {
		return false
	}
	defer c.queue.Done(it)
	k, p := it.key, it.pass
	if !c.passes.claim(it, priority) {
		return true // parked: queued again when the key is released
	}
	defer c.release(k)
	if p == passServe && c.passes.overdue(k, c.now()) {
		p = passFull
	}
	start := time.Now()
	carried := c.prop.started(k)
	// A member that hangs must not hold a worker forever.
	rctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
	err := c.reconcile(rctx, k, p)
	cancel()
	c.prop.finished(k, carried, err == nil)
	if c.afterPass != nil {
		if herr := c.afterPass(k, p); err == nil {
			err = herr
		}
	}
	c.metrics.ReconcileSeconds.Observe(time.Since(start).Seconds())
	if p == passFull {
		// Owed no longer: it ran (a failure retries below, with backoff).
		c.passes.fullRan(k)
	}
	if err != nil && onlyUnfinished(err) && ctx.Err() == nil {
		// Not a failure: a large part ran out of its time while the
		// member answered. Queued again at once, behind the keys
		// waiting, without back-off.
		c.metrics.Reconciles.WithLabelValues("unfinished").Inc()
		c.log.Debug("reconcile continues in the next pass", "key", k)
		c.queue.Forget(it)
		c.queue.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(retryPriority(priority))}, it)
		return true
	}
	if err != nil {
		c.metrics.Reconciles.WithLabelValues("error").Inc()
		if ctx.Err() == nil {
			c.log.Warn("reconcile failed; will retry", "key", k, "err", err)
			// As a full pass (so that conditions say what is wrong),
			// at least at a serve pass's priority, with backoff.
			c.queue.AddWithOpts(priorityqueue.AddOpts{RateLimited: true, Priority: ptr.To(retryPriority(priority))}, item{k, passFull})
		}
		return true
	}
	c.metrics.Reconciles.WithLabelValues("success").Inc()
	c.queue.Forget(it)
	if p == passServe {
		// Statuses next, behind every pending serve pass.
		c.addFull(k)
	} else {
		c.queue.Forget(item{k, passFull})
	}
	return true
}

// release unmarks k and queues the items parked meanwhile.
func (c *Controller) release(k string) {
	for _, p := range c.passes.release(k) {
		c.queue.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(p.priority)}, p.item)
	}
}

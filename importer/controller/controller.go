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
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/aggregate"
	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/importer/policy"
	"github.com/mcs-dns/mcs-dns/importer/vip"
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

	// conflicted: keys whose exports conflicted when last reconciled.
	conflicted lockedSet

	// trust leaves out the source slices of untrusted managers, and
	// addresses the export policy does not allow.
	trust  *sliceTrust
	policy func() *policy.Policy

	// passes: which keys are busy, the items parked behind them, and
	// which full passes are owed since when.
	passes *keyPasses

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

		passes: newKeyPasses(),
		trust:  newSliceTrust(o.TrustedManagers),
		policy: o.Policy,
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
	ReportWrites(func(m *members.Member, kind, verb, ns, name string, err error))
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

func (c *Controller) hasExport(ns, name string) bool {
	for _, m := range c.set.Members() {
		if mc := m.Caches(); mc != nil && mc.Export(ns, name) != nil {
			return true
		}
	}
	return false
}

// Notify turns an informer event into work.
func (c *Controller) Notify(ev members.Event) {
	if ev.Echo {
		// Our own write coming back: no reconcile (at 20 members, one
		// endpoint change is 20 mirrored-slice writes, each of which would
		// otherwise queue the key again), but the clusterset-wide VIPs
		// still follow every import.
		c.importChanged(ev)
		return
	}
	switch ev.Kind {
	case members.KindNamespace:
		// The import appears when the namespace does.
		for _, m := range c.set.Members() {
			if mc := m.Caches(); mc != nil {
				for _, k := range mc.NamespaceKeys(ev.Namespace) {
					c.addServe(k)
				}
			}
		}
	case members.KindService, members.KindSourceSlice:
		// Only exported Services matter; an export event enqueues the key
		// itself, so nothing is missed when the Service comes first.
		if c.hasExport(ev.Namespace, ev.Name) {
			c.addServe(key(ev.Namespace, ev.Name))
		}
	default:
		c.addServe(key(ev.Namespace, ev.Name))
	}
	c.importChanged(ev)
}

// importChanged: the clusterset-wide VIPs follow the imports; imports the
// pool had no address for try again when one may have been freed.
func (c *Controller) importChanged(ev members.Event) {
	if ev.Kind != members.KindImport {
		return
	}
	if w, ok := c.vip.(vip.ClusterSetIPs); ok {
		for _, k := range w.ImportChanged(ev) {
			c.addServe(k)
		}
	}
}

// OnChange handles a member's state change: every key is reconciled again
// (including, when it went down, the keys only it knew). A withdrawal is
// logged once, with the number of services it affects, and counted.
func (c *Controller) OnChange(ch members.Change) {
	c.refreshMemberStates(ch.Context)
	if ch.State == members.Down {
		c.metrics.Withdrawals.WithLabelValues(ch.Cluster()).Inc()
		if ch.Dropped != nil {
			c.log.Warn("member cluster withdrawn after the grace period: its exports are no longer imported",
				"cluster", ch.Cluster(), "services", len(ch.Dropped.ExportKeys()), "reason", ch.Reason)
		} else {
			c.log.Warn("member cluster not seen within the grace period since the start: imports and endpoints that may have come from it are reconciled again",
				"context", ch.Context, "services", c.frozenServices(), "reason", ch.Reason)
		}
	}
	if ch.Dropped != nil {
		for _, k := range ch.Dropped.Keys() {
			c.addServe(k)
		}
	}
	c.EnqueueAll()
}

// frozenServices counts the keys left as they are in some member.
func (c *Controller) frozenServices() int {
	keys := map[string]bool{}
	for _, k := range c.frozen.Keys() {
		_, nk, _ := strings.Cut(k, "/") // "cluster/ns/name"; IDs hold no '/'
		keys[nk] = true
	}
	return len(keys)
}

// refreshMemberStates sets the member_state series of the member reached
// through context (of every member when context is ""), to the state the
// Set holds now. Changes are reported from several goroutines and may
// arrive out of order, so the state is read, not taken from the change;
// and it is read under stateMu, so that a report that read an older state
// cannot set the gauge after one that read a newer state (a withdrawn
// member shown unreachable).
func (c *Controller) refreshMemberStates(context string) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	for _, st := range c.set.Statuses() {
		if context == "" || st.Context == context {
			c.setMemberState(st.Context, st.Cluster, st.State)
		}
	}
}

// setMemberState sets the member_state series of a member (under
// stateMu): labelled with its kubeconfig context, and with its cluster ID
// once it has joined (its context before: the series under the context
// goes when the ID differs).
func (c *Controller) setMemberState(context, cluster string, s members.State) {
	if prev, ok := c.stateLabel[context]; ok && prev != cluster {
		for _, st := range members.States {
			c.metrics.MemberState.DeleteLabelValues(prev, context, st.String())
		}
	}
	c.stateLabel[context] = cluster
	for _, st := range members.States {
		v := 0.0
		if st == s {
			v = 1
		}
		c.metrics.MemberState.WithLabelValues(cluster, context, st.String()).Set(v)
	}
}

// EnqueueAll queues a serve pass of every key any member knows: a full
// resync.
func (c *Controller) EnqueueAll() {
	for _, m := range c.set.Members() {
		if mc := m.Caches(); mc != nil {
			for _, k := range mc.Keys() {
				c.addServe(k)
			}
		}
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
			c.EnqueueAll()
		})
	}
	<-ctx.Done()
	// ShutDown (not ShutDownWithDrain, which leaves the delaying queue's
	// goroutine running): workers finish their current key, whose API
	// calls fail fast now that ctx is done.
	c.ShutDown()
	wg.Wait()
}

// ShutDown stops the work queue and the goroutines New started for it.
// Run does so when it returns; whoever made the controller and then does
// not run it (start-up failed, leadership never came) must call it. Safe
// to call more than once.
func (c *Controller) ShutDown() { c.queueStop.Do(c.queue.ShutDown) }

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
	// A member that hangs must not hold a worker forever.
	rctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
	err := c.reconcile(rctx, k, p)
	cancel()
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
	if err != nil {
		c.metrics.Reconciles.WithLabelValues("error").Inc()
		if ctx.Err() == nil {
			c.log.Warn("reconcile failed; will retry", "key", k, "err", err)
			// As a full pass (so that conditions say what is wrong), at
			// the same priority (a failed serve pass stays ahead of
			// statuses), with backoff.
			c.queue.AddWithOpts(priorityqueue.AddOpts{RateLimited: true, Priority: ptr.To(priority)}, item{k, passFull})
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

// reconcileTimeout bounds one key's reconcile (all its API calls).
const reconcileTimeout = time.Minute

type view struct {
	m *members.Member
	c *members.Caches
	// up: the API answers, so the member may be written to and counts
	// for readiness.
	up bool
}

// Reconcile brings one namespace/name to its desired state (a full pass).
func (c *Controller) Reconcile(ctx context.Context, k string) error {
	return c.reconcile(ctx, k, passFull)
}

func (c *Controller) reconcile(ctx context.Context, k string, p pass) error {
	ns, name, ok := strings.Cut(k, "/")
	if !ok {
		return nil
	}
	now := metav1.NewTime(c.now()).Rfc3339Copy()

	// Members whose caches are usable: up, or unreachable within the grace
	// period (their last known state stays served).
	var views []view
	for _, m := range c.set.Members() {
		if mc := m.Caches(); mc != nil {
			views = append(views, view{m: m, c: mc, up: m.State() == members.Up})
		}
	}

	in := aggregate.Input{Namespace: ns, Name: name, WantsClusterSetIP: c.wantsClusterSetIP}
	pol := c.policy()
	var exportViews []view
	for _, v := range views {
		e := v.c.Export(ns, name)
		if e == nil || e.DeletionTimestamp != nil {
			continue
		}
		x := aggregate.Export{ClusterID: v.m.ID, Export: e, Service: v.c.Service(ns, name)}
		if r := pol.CheckNamespace(v.m.ID, ns); r != nil {
			x.Refused = refusedCondition(r)
		} else {
			x.Slices = c.trust.filter(v.m, k, pol, v.c.SourceSlices(ns, name), c.reportLeftOut(v.m))
			if r := pol.CheckEndpoints(v.m.ID, endpointCount(x.Slices)); r != nil {
				x.Refused, x.Slices = refusedCondition(r), nil
			}
		}
		in.Exports = append(in.Exports, x)
		exportViews = append(exportViews, v)
	}
	res := aggregate.Compute(in)
	if len(res.Conflicts) > 0 {
		c.conflicted.Insert(k)
	} else {
		c.conflicted.Delete(k)
	}

	// Import side: every up member at once, each under its own deadline,
	// so that a slow or hanging member delays its own copies only, and a
	// reconcile lasts as long as its slowest member, not the sum of all.
	type imported struct {
		present  bool
		inTheWay []string
		err      error
	}
	outs := fanOut(ctx, views, func(ctx context.Context, _ int, v view) imported {
		if !v.up {
			return imported{}
		}
		if !v.m.Importing {
			cur := v.c.Import(ns, name)
			if cur == nil {
				return imported{}
			}
			if members.Owned(cur) {
				return imported{present: true}
			}
			return imported{inTheWay: []string{importObject(ns, name)}}
		}
		out, err := c.applyImport(ctx, v, importTarget{ns: ns, name: name, res: &res, active: v.c.NamespaceActive(ns), now: now, pass: p,
			why: func() []any { return typeDecision(&in, &res, views) }})
		if err != nil {
			err = fmt.Errorf("cluster %s: %w", v.m.ID, err)
		}
		return imported{present: out.present, inTheWay: out.inTheWay, err: err}
	})
	var errs []error
	var pending, blocked []string
	for i, v := range views {
		if !v.up {
			continue
		}
		o := outs[i]
		errs = append(errs, o.err)
		switch {
		case !v.c.NamespaceActive(ns) || res.Import == nil:
		case len(o.inTheWay) > 0:
			blocked = append(blocked, v.m.ID+": "+strings.Join(o.inTheWay, ", "))
		case !o.present:
			pending = append(pending, v.m.ID)
		}
	}

	if p == passServe {
		return errors.Join(errs...)
	}

	// Export side: conditions, only when they changed, on the exports of
	// the members this importer writes them in (by default those it
	// imports into): with one importer per cluster (--import-into) each
	// export has one writer, so importers whose views differ (a member
	// down for one of them, other flags) never take turns rewriting the
	// same conditions.
	statusErrs := fanOut(ctx, exportViews, func(ctx context.Context, i int, v view) error {
		if !v.up || !v.m.ExportConditions {
			return nil
		}
		er := res.Exports[i]
		ready := aggregate.ReadyCondition(er.Valid, pending, blocked)
		if err := c.applyExportStatus(ctx, v, in.Exports[i].Export, now, er.ValidCondition, er.ConflictCondition, ready); err != nil {
			return fmt.Errorf("cluster %s: ServiceExport status: %w", v.m.ID, err)
		}
		return nil
	})
	return errors.Join(append(errs, statusErrs...)...)
}

// memberTimeout bounds one member's part of a reconcile (all its API
// calls for the key): a member that hangs gives up its own part, and the
// key is retried, without holding the key for the others longer.
const memberTimeout = 20 * time.Second

// memberParallelism bounds how many members one reconcile writes to at
// once (each member's client keeps its own rate limit).
const memberParallelism = 16

// fanOut runs f for every view, up to memberParallelism at once, each
// under its own memberTimeout, and returns the results in views' order.
// One view runs inline: no goroutine for the common small case.
func fanOut[T any](ctx context.Context, views []view, f func(context.Context, int, view) T) []T {
	out := make([]T, len(views))
	run := func(i int) {
		mctx, cancel := context.WithTimeout(ctx, memberTimeout)
		defer cancel()
		out[i] = f(mctx, i, views[i])
	}
	if len(views) <= 1 {
		for i := range views {
			run(i)
		}
		return out
	}
	sem := make(chan struct{}, memberParallelism)
	var wg sync.WaitGroup
	for i := range views {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			run(i)
		})
	}
	wg.Wait()
	return out
}

// typeDecision says what decided res's import type: each export's
// cluster, age, Service type and validity, and the members seen. It is
// logged when an import's type changes, which gives up (or makes) every
// VIP of the import.
func typeDecision(in *aggregate.Input, res *aggregate.Result, views []view) []any {
	exports := make([]string, len(in.Exports))
	for i, e := range in.Exports {
		svc := "none"
		if e.Service != nil {
			svc = string(e.Service.Spec.Type)
			if aggregate.IsHeadless(e.Service) {
				svc = "Headless"
			}
		}
		exports[i] = fmt.Sprintf("%s created=%s service=%s valid=%s", e.ClusterID,
			e.Export.CreationTimestamp.UTC().Format(time.RFC3339), svc, res.Exports[i].ValidCondition.Reason)
	}
	seen := make([]string, len(views))
	for i, v := range views {
		seen[i] = v.m.ID + "=" + v.m.State().String()
	}
	return []any{"winner", res.Winner, "exports", strings.Join(exports, "; "), "members", strings.Join(seen, ",")}
}

// reportLeftOut counts and logs what sliceTrust left out of m's source
// slices.
func (c *Controller) reportLeftOut(m *members.Member) func(leftOut) {
	return func(lo leftOut) {
		s := lo.slice
		if lo.reason == ignoredAddressNotAllowed {
			c.metrics.Ignored.WithLabelValues(m.ID, kindEndpoint, lo.reason).Add(float64(lo.addresses))
			if lo.first {
				c.log.Warn("endpoint addresses outside the export policy's addressRanges dropped",
					"cluster", m.ID, "namespace", s.Namespace, "slice", s.Name, "addresses", lo.addresses)
			}
			return
		}
		c.metrics.Ignored.WithLabelValues(m.ID, kindSlice, lo.reason).Inc()
		if lo.first {
			c.log.Warn("EndpointSlice of an exported Service ignored: its manager is not trusted (--endpointslice-managers)",
				"cluster", m.ID, "namespace", s.Namespace, "name", s.Name, "managedBy", s.Labels[discoveryv1.LabelManagedBy], "reason", lo.reason)
		}
	}
}

// refusedCondition is the Valid=False condition of an export the policy
// refuses.
func refusedCondition(r *policy.Refusal) *metav1.Condition {
	return &metav1.Condition{Reason: r.Reason, Message: r.Message}
}

// wrote counts a write request sent to m, and whether the API server
// refused it with 409 Conflict (err is what the request returned).
func (c *Controller) wrote(m *members.Member, kind, verb string, ns, name string, err error) {
	c.metrics.Writes.WithLabelValues(m.ID, kind, verb).Inc()
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		c.metrics.WriteConflicts.WithLabelValues(m.ID, kind).Inc()
	}
	if apierrors.IsForbidden(err) {
		// Perhaps a RoleBinding lost this write: the member's next probe
		// asks (and, if so, takes the member out of Up).
		m.WriteForbidden()
	}
	c.log.Debug("write", "cluster", m.ID, "kind", kind, "verb", verb, "namespace", ns, "name", name, "err", err)
	if kind == vip.KindService && verb == "delete" && err == nil {
		// Its VIP is given up: worth a line, as the import's are.
		c.log.Info("deleted derived Service", "cluster", m.ID, "namespace", ns, "name", name)
	}
}

func (c *Controller) failed(m *members.Member, op string) {
	c.metrics.Errors.WithLabelValues(m.ID, op).Inc()
}

func (c *Controller) warnForeign(m *members.Member, ns, name string) {
	k := m.ID + "/" + ns + "/" + name
	c.warnedMu.Lock()
	defer c.warnedMu.Unlock()
	if !c.warned[k] {
		c.warned[k] = true
		c.log.Warn("a ServiceImport not managed by mcs-importer is in the way; leaving it alone",
			"cluster", m.ID, "namespace", ns, "name", name)
	}
}

func (c *Controller) forgetForeign(m *members.Member, ns, name string) {
	c.warnedMu.Lock()
	defer c.warnedMu.Unlock()
	delete(c.warned, m.ID+"/"+ns+"/"+name)
}

// sliceLabels merges extra (from the VIP provider) under our labels.
func withLabels(base, extra map[string]string) map[string]string {
	if len(extra) == 0 {
		return base
	}
	out := maps.Clone(extra)
	maps.Copy(out, base)
	return out
}

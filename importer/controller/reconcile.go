package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-dns/mcs-dns/importer/aggregate"
	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/importer/slicedigest"
	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/importer/write"
	"github.com/mcs-dns/mcs-dns/internal/policy"
)

// reconcileTimeout bounds one key's reconcile, a backstop: each request
// is bounded on its own (write.RequestTimeout), and each member's part by
// memberTimeout, twice over (the import side, then the export side).
var reconcileTimeout = 2*memberTimeout + time.Minute

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
		x := aggregate.Export{ClusterID: v.m.ID, Region: v.m.Region, Export: e, Service: v.c.Service(ns, name)}
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
	for _, s := range res.Slices {
		// Hashed once here, compared with every member's copy.
		slicedigest.Stamp(s)
	}
	slices := c.applied.advance(k, res.Slices)
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
	outs := fanOut(ctx, c.pool, views, func(ctx context.Context, _ int, v view) imported {
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
		out, err := c.applyImport(ctx, v, importTarget{ns: ns, name: name, res: &res, slices: slices, active: v.c.NamespaceActive(ns), now: now, pass: p,
			why: func() []any { return typeDecision(&in, &res, views) }})
		if err != nil {
			err = fmt.Errorf("cluster %s: %w", v.m.ID, err)
		}
		return imported{present: out.present, inTheWay: out.inTheWay, err: err}
	})
	var errs []error
	var pending, blocked []string
	importedIn := 0
	for i, v := range views {
		if !v.up {
			// Written when it is back. Recorded, then its state read
			// again: a member back since this reconcile began may have
			// had its missed keys taken already; this one is queued.
			c.missed.add(v.m.Context, k)
			if v.m.State() == members.Up {
				c.addServe(k)
			}
			// Out of reach within its grace period: what its cache shows
			// it holds, it still serves (so that a flap does not rewrite
			// every export's condition).
			if cur := v.c.Import(ns, name); cur != nil && members.Owned(cur) && res.Import != nil {
				importedIn++
			}
			continue
		}
		o := outs[i]
		if o.present && len(o.inTheWay) == 0 && res.Import != nil && v.c.NamespaceActive(ns) {
			importedIn++
		}
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
	statusErrs := fanOut(ctx, c.pool, exportViews, func(ctx context.Context, i int, v view) error {
		if !v.up || !v.m.ExportConditions {
			return nil
		}
		er := res.Exports[i]
		ready := aggregate.ReadyCondition(er.Valid, importedIn, pending, blocked)
		if err := c.applyExportStatus(ctx, v, in.Exports[i].Export, now, er.ValidCondition, er.ConflictCondition, ready); err != nil {
			return fmt.Errorf("cluster %s: ServiceExport status: %w", v.m.ID, err)
		}
		return nil
	})
	return errors.Join(append(errs, statusErrs...)...)
}

// memberTimeout bounds one member's part of a reconcile (all its API
// calls for the key). Each request has its own bound
// (write.RequestTimeout), and a member's slice writes stop at the first
// that times out, so a member that hangs gives up its part within about
// that. A part that is large (a service every member exports has a
// mirrored slice per exporter) and slow stops writing slices when its
// time is up, keeping what it wrote: the key goes to the back of the
// queue at once, without back-off (errUnfinished), and the next pass goes
// on from there. No key holds a worker for longer than this, however
// many members export it.
var memberTimeout = 20 * time.Second // a variable for tests

// errUnfinished: a member's part ran out of time while it was writing,
// and answering. Not a failure: the key is queued again at once.
var errUnfinished = errors.New("member's part not finished in time; continued in the next pass")

// partOver reports whether ctx, a member's part, has run out of its
// time (rather than been canceled: the importer stopping).
func partOver(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// letFinish returns a context for the requests of a member's part (ctx)
// whose deadline does not cut them short: a step begun in time is let
// finish, since a request cut short may be applied by the API server all
// the same, and the next pass would send it again; a part stops between
// steps (partOver). Its deadline is ctx's plus write.RequestTimeout, a
// request's own bound; canceling ctx stops it at once. Call the returned
// function when the part is done.
func letFinish(ctx context.Context) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(ctx)
	var (
		wctx context.Context
		stop context.CancelFunc
	)
	if d, ok := ctx.Deadline(); ok {
		wctx, stop = context.WithDeadline(base, d.Add(write.RequestTimeout))
	} else {
		wctx, stop = context.WithCancel(base)
	}
	unregister := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			stop()
		}
	})
	return wctx, func() {
		unregister()
		stop()
	}
}

// onlyUnfinished reports whether err is made of errUnfinished alone
// (however wrapped and joined).
func onlyUnfinished(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case interface{ Unwrap() []error }:
		errs := e.Unwrap()
		for _, err := range errs {
			if !onlyUnfinished(err) {
				return false
			}
		}
		return len(errs) > 0
	case interface{ Unwrap() error }:
		return err == errUnfinished || onlyUnfinished(e.Unwrap())
	}
	return err == errUnfinished
}

// memberParallelism bounds how many members one reconcile writes to at
// once (each member's client keeps its own rate limit).
const memberParallelism = 16

// fanOut runs f for every view, up to memberParallelism at once, each
// under its own memberTimeout, and returns the results in views' order.
// One view runs inline: no goroutine for the common small case.
func fanOut[T any](ctx context.Context, pool *goPool, views []view, f func(context.Context, int, view) T) []T {
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
		wg.Add(1)
		pool.Go(func() {
			defer wg.Done()
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
func (c *Controller) wrote(m *members.Member, kind, verb string, ns, svc, name string, err error) {
	c.metrics.Writes.WithLabelValues(m.ID, kind, verb).Inc()
	if err == nil && kind != kindExportStatus {
		c.prop.wrote(key(ns, svc), m.ID, time.Now())
	}
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

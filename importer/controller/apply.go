package controller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/aggregate"
	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/importer/write"
)

const (
	kindImport       = "ServiceImport"
	kindImportStatus = "ServiceImportStatus"
	kindSlice        = "EndpointSlice"
	kindExportStatus = "ServiceExportStatus"
)

// importTarget is what one key's reconcile asks of every importing member.
type importTarget struct {
	ns, name string
	res      *aggregate.Result
	// slices: how res's slices differ from the previous pass's, and
	// which members hold those (nil: compare every slice).
	slices *sliceChanges
	// active: the namespace exists and is not terminating.
	active bool
	// now stamps new conditions.
	now  metav1.Time
	pass pass
	// why says what decided res.Import's type (logged when an import's
	// type changes).
	why func() []any
}

// importOutcome is what applyImport left in one member.
type importOutcome struct {
	// present: our import exists there afterwards.
	present bool
	// inTheWay names the objects mcs-importer does not manage that hold
	// names it needs there ("Kind namespace/name"): a ServiceImport keeps
	// ours out; a derived Service's or a mirrored slice's name taken
	// leaves our import without that VIP or those endpoints (and
	// Ready=False), the rest is served.
	inTheWay []string
}

// applyImport makes one importing member hold the desired import and
// mirrored slices of t.ns/t.name (or none), and in a full pass the
// import's status: decide (plan.go), then write, every write through
// write.Ensure or write.Delete.
func (c *Controller) applyImport(ctx context.Context, v view, t importTarget) (importOutcome, error) {
	m := v.m
	ns, name, res := t.ns, t.name, t.res
	// Read before the caches are: a change after it makes the next pass
	// compare every slice.
	changes := v.c.MirroredChanges()
	cur := v.c.Import(ns, name)
	h := c.set.Hold()
	act := decide(h, v, t, cur)
	if act != actApply {
		t.slices.forget(m.ID)
	}
	frozenKey := m.ID + "/" + key(ns, name)
	if act == actHold {
		c.frozen.Insert(frozenKey)
	} else {
		c.frozen.Delete(frozenKey)
	}
	if act == actYield {
		if res.Import != nil && t.active {
			c.warnForeign(m, ns, name)
		}
		return importOutcome{inTheWay: []string{importObject(ns, name)}}, c.yieldToForeign(ctx, v, ns, name)
	}
	c.forgetForeign(m, ns, name)

	switch act {
	case actHold:
		// The import (VIP, ports, status) and the held member's slices
		// stay exactly as they are until it joins or its grace period
		// has passed; the members seen meanwhile say what their own
		// endpoints are.
		var live []*discoveryv1.EndpointSlice
		if res.Import != nil && t.active {
			live = res.Slices
		}
		_, err := c.writeSlices(ctx, v, ns, planSeenEndpoints(h, live, v.c.MirroredSlices(ns, name)))
		return importOutcome{present: cur != nil}, err
	case actRemove:
		return importOutcome{}, c.removeImport(ctx, v, ns, name, cur)
	}

	// Names held by others (a derived Service's, a mirrored slice's) are
	// reported, and returned as an error so that the key is retried
	// (with backoff) until they are free: their objects' events are not
	// ours to watch.
	var notOwned []*members.NotOwnedError
	// vipErr is a failed VIP step: the rest is written all the same (the
	// endpoints must keep flowing), and the key is retried.
	var vipErr error
	done := func(present bool, inTheWay []string, err error) (importOutcome, error) {
		for _, no := range notOwned {
			inTheWay = append(inTheWay, no.Object())
			err = errors.Join(err, no)
		}
		return importOutcome{present: present, inTheWay: inTheWay}, errors.Join(err, vipErr)
	}

	// An existing import keeps its type until the new one has settled.
	want := res.Import
	if cur != nil && cur.Spec.Type != want.Spec.Type {
		// The type held decides what is written and whether the VIP
		// goes, so it is read from the API server: a cache a moment
		// behind a type change just written would have the import
		// changed back without its settle, and its VIP released while
		// the live import names it. Only while types differ, which is
		// rare.
		live, err := m.GetImport(ctx, ns, name)
		switch {
		case apierrors.IsNotFound(err):
			cur = nil
		case err != nil:
			c.failed(m, "get ServiceImport")
			return importOutcome{present: true}, fmt.Errorf("reading ServiceImport before changing its type: %w", err)
		case members.Owned(live):
			cur = live
		}
	}
	if cur != nil {
		switch ok, wait := c.types.settled(frozenKey, cur.Spec.Type, want.Spec.Type, c.now()); {
		case !ok:
			want = want.DeepCopy()
			want.Spec.Type = cur.Spec.Type
			c.addServeAfter(key(ns, name), wait)
		case cur.Spec.Type != want.Spec.Type && t.why != nil:
			c.log.Info("ServiceImport type settled; changing it", append([]any{"cluster", m.ID, "namespace", ns, "name", name,
				"from", cur.Spec.Type, "to", want.Spec.Type}, t.why()...)...)
		}
	} else {
		c.types.forget(frozenKey)
	}

	asg, err := c.assignVIP(ctx, m, want)
	var no *members.NotOwnedError
	switch {
	case errors.As(err, &no):
		// The import is written without a VIP, and says why.
		notOwned = append(notOwned, no)
		asg = vip.Assignment{}
	case write.TimedOut(err):
		// The member did not answer in time: its slices would fare no
		// better. The key is retried.
		return done(cur != nil, nil, err)
	case err != nil:
		vipErr = err
	}
	desired := importWithVIP(want, asg, m.Schema)

	// Slices first, so that an import never shows up without the
	// endpoints it can have; a slice whose name someone else holds does
	// not keep the import (and every other cluster's endpoints) out.
	held, err := c.writeSlices(ctx, v, ns, c.planMemberSlices(v, t, changes, asg))
	notOwned = append(notOwned, held...)
	if err == nil && len(held) == 0 {
		t.slices.applied(m.ID, v.c, changes, asg)
	} else {
		t.slices.forget(m.ID)
	}
	if err != nil {
		return done(cur != nil, nil, err)
	}
	ready := readyCondition(asg, notOwned)

	// From here each step starts only within the part's time, and a
	// step started is let finish: the part's deadline falling during the
	// import's create (its slices having just made it) is an unfinished
	// part, not a failed one.
	if partOver(ctx) {
		return done(cur != nil, nil, errUnfinished)
	}
	wctx, stop := letFinish(ctx)
	defer stop()
	cur, out, err := c.writeImport(wctx, m, desired, cur)
	switch {
	case out == write.Yielded:
		c.warnForeign(m, ns, name)
		notOwned = nil // their import is all that is in the way
		return done(false, []string{importObject(ns, name)}, c.yieldToForeign(wctx, v, ns, name))
	case err != nil:
		return done(cur != nil, nil, err)
	case partOver(ctx):
		return done(true, nil, errUnfinished)
	}

	// The import names no VIP another --vip-mode made any more, and a
	// Headless one none at all: only now may they go.
	if desired.Spec.Type != mcsv1beta1.ClusterSetIP {
		if err := c.vip.Release(wctx, m.ID, ns, name); err != nil {
			c.failed(m, "release VIP")
			return done(true, nil, fmt.Errorf("releasing VIP: %w", err))
		}
	}
	if err := c.releaseLeftovers(wctx, m, ns, name); err != nil {
		return done(true, nil, err)
	}
	if t.pass == passServe {
		return done(true, nil, nil)
	}
	if partOver(ctx) {
		return done(true, nil, errUnfinished)
	}
	return done(true, nil, c.writeImportStatus(wctx, m, desired, cur, t.now, ready))
}

// planMemberSlices plans the key's mirrored slices in v's member: only
// the slices changed since the previous pass when the member holds that
// pass's slices and nothing but our writes changed its copies since
// (changes, read before the caches), else every one.
func (c *Controller) planMemberSlices(v view, t importTarget, changes uint64, asg vip.Assignment) slicePlan {
	ns, name := t.ns, t.name
	if t.slices.since(v.m.ID, v.c, changes, asg) {
		p, ok := planChangedSlices(t.slices, name, func(s string) *discoveryv1.EndpointSlice { return v.c.MirroredSlice(ns, s) }, asg)
		if ok {
			c.metrics.SlicePlans.WithLabelValues("changes").Inc()
			return p
		}
	}
	c.metrics.SlicePlans.WithLabelValues("full").Inc()
	return planSlices(t.res.Slices, v.c.MirroredSlices(ns, name), asg)
}

// assignVIP is the VIP step of a ClusterSetIP import (a Headless one has
// none; applyImport releases any once the import says Headless). On a
// failure other than a name held by someone else, the assignment returned
// is what the member still holds, with a Ready condition saying why the
// VIP cannot be made: the import is written with that, so that it never
// names an address it does not hold.
func (c *Controller) assignVIP(ctx context.Context, m *members.Member, imp *mcsv1beta1.ServiceImport) (vip.Assignment, error) {
	if imp.Spec.Type != mcsv1beta1.ClusterSetIP {
		return vip.Assignment{}, nil
	}
	asg, err := c.vip.Assign(ctx, m.ID, imp)
	var no *members.NotOwnedError
	if err == nil || errors.As(err, &no) {
		return asg, err
	}
	// A quota or a webhook refused the VIP's object.
	c.failed(m, "assign VIP")
	asg.Ready = &metav1.Condition{
		Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionFalse,
		Reason:  string(mcsv1beta1.ServiceImportReasonPending),
		Message: "the VIP cannot be made or updated here: " + err.Error(),
	}
	return asg, fmt.Errorf("assigning VIP: %w", err)
}

// removeImport deletes our import of ns/name (cur, from the cache), then
// its VIP and its slices. The VIP goes only once the import has: an
// import must never name an address its cluster may give to another
// Service.
func (c *Controller) removeImport(ctx context.Context, v view, ns, name string, cur *mcsv1beta1.ServiceImport) error {
	m := v.m
	if cur == nil && c.holdsVIP(m, ns, name) {
		// A VIP is held but the cache shows no import: the cache may be
		// behind (an import created, or seen again after a relist, that
		// it has not caught up with), so the API server is asked.
		live, err := m.GetImport(ctx, ns, name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			c.failed(m, "get ServiceImport")
			return fmt.Errorf("reading ServiceImport before releasing its VIP: %w", err)
		case members.Owned(live):
			cur = live
		}
	}
	var errs []error
	gone := true
	if cur != nil {
		err := write.Delete(ctx, func(ctx context.Context, opts metav1.DeleteOptions) error {
			return m.DeleteImport(ctx, ns, name, *opts.Preconditions.UID)
		}, cur.UID, c.recorder(m, kindImport, ns, name, name))
		if err != nil {
			c.failed(m, "delete ServiceImport")
			errs = append(errs, err)
			gone = false
		} else {
			c.log.Info("deleted ServiceImport", "cluster", m.ID, "namespace", ns, "name", name)
		}
	}
	if gone {
		if err := c.vip.Release(ctx, m.ID, ns, name); err != nil {
			c.failed(m, "release VIP")
			errs = append(errs, fmt.Errorf("releasing VIP: %w", err))
		}
		errs = append(errs, c.releaseLeftovers(ctx, m, ns, name))
	}
	_, err := c.writeSlices(ctx, v, ns, planSlices(nil, v.c.MirroredSlices(ns, name), vip.Assignment{}))
	return errors.Join(append(errs, err)...)
}

// holdsVIP reports whether the VIP provider holds something for ns/name
// in m that Release would remove (a derived Service in the cache).
func (c *Controller) holdsVIP(m *members.Member, ns, name string) bool {
	h, ok := c.vip.(vipHolder)
	return ok && h.Holds(m.ID, ns, name)
}

// vipHolder is a VIP provider that can tell, from the caches, whether it
// holds something for an import.
type vipHolder interface {
	Holds(clusterID, namespace, name string) bool
}

// writeImport creates the import or brings its metadata and spec to
// desired (status is written apart).
func (c *Controller) writeImport(ctx context.Context, m *members.Member, desired, cur *mcsv1beta1.ServiceImport) (*mcsv1beta1.ServiceImport, write.Outcome, error) {
	ns, name := desired.Namespace, desired.Name
	got, out, err := write.Ensure(ctx, write.Ops[*mcsv1beta1.ServiceImport]{
		Get: func(ctx context.Context) (*mcsv1beta1.ServiceImport, error) { return m.GetImport(ctx, ns, name) },
		Create: func(ctx context.Context) (*mcsv1beta1.ServiceImport, error) {
			obj := desired.DeepCopy()
			obj.Status = mcsv1beta1.ServiceImportStatus{}
			defer m.Writing(members.KindImport, ns, name, name)()
			return m.CreateImport(ctx, obj)
		},
		Owned:    func(si *mcsv1beta1.ServiceImport) bool { return members.Owned(si) },
		UpToDate: func(si *mcsv1beta1.ServiceImport) bool { return aggregate.ImportMetaSpecUpToDate(desired, si) },
		Update: func(ctx context.Context, si *mcsv1beta1.ServiceImport) (*mcsv1beta1.ServiceImport, error) {
			upd := si.DeepCopy()
			upd.Labels, upd.Annotations = aggregate.MergeImportMeta(desired, si)
			upd.Spec = desired.Spec
			defer m.Writing(members.KindImport, ns, name, name)()
			return m.UpdateImport(ctx, upd)
		},
		Wrote: c.recorder(m, kindImport, ns, name, name),
	}, cur)
	switch {
	case err != nil && got == nil:
		c.failed(m, "create ServiceImport")
	case err != nil:
		c.failed(m, "update ServiceImport")
	case out == write.Created:
		c.log.Info("created ServiceImport", "cluster", m.ID, "namespace", ns, "name", name, "type", desired.Spec.Type)
	case out == write.Updated && cur != nil:
		c.logImportChange(m, cur, got)
	}
	return got, out, err
}

// logImportChange logs what clients of an import notice: its type, or its
// VIP, changed.
func (c *Controller) logImportChange(m *members.Member, was, now *mcsv1beta1.ServiceImport) {
	switch {
	case was.Spec.Type != now.Spec.Type:
		c.log.Info("ServiceImport type changed", "cluster", m.ID, "namespace", now.Namespace, "name", now.Name,
			"from", was.Spec.Type, "to", now.Spec.Type)
	case len(was.Spec.IPs) > 0 && !slices.Equal(was.Spec.IPs, now.Spec.IPs):
		c.log.Warn("ServiceImport VIP changed", "cluster", m.ID, "namespace", now.Namespace, "name", now.Name,
			"from", was.Spec.IPs, "to", now.Spec.IPs)
	}
}

// writeImportStatus brings the import's status to desired's, with ready
// merged into its conditions.
func (c *Controller) writeImportStatus(ctx context.Context, m *members.Member, desired, cur *mcsv1beta1.ServiceImport, now metav1.Time, ready metav1.Condition) error {
	ns, name := desired.Namespace, desired.Name
	want := func(si *mcsv1beta1.ServiceImport) mcsv1beta1.ServiceImportStatus {
		st := desired.Status
		st.Conditions = aggregate.MergeConditions(si.Status.Conditions, si.Generation, now, ready)
		m.Schema.PruneImportStatus(&st)
		return st
	}
	_, _, err := write.Ensure(ctx, write.Ops[*mcsv1beta1.ServiceImport]{
		Get: func(ctx context.Context) (*mcsv1beta1.ServiceImport, error) { return m.GetImport(ctx, ns, name) },
		UpToDate: func(si *mcsv1beta1.ServiceImport) bool {
			st := want(si)
			return aggregate.ImportStatusUpToDate(&st, &si.Status)
		},
		Update: func(ctx context.Context, si *mcsv1beta1.ServiceImport) (*mcsv1beta1.ServiceImport, error) {
			upd := si.DeepCopy()
			upd.Status = want(si)
			defer m.Writing(members.KindImport, ns, name, name)()
			return m.UpdateImportStatus(ctx, upd)
		},
		Wrote: c.recorder(m, kindImportStatus, ns, name, name),
	}, cur)
	if err != nil {
		c.failed(m, "update ServiceImport status")
	}
	return err
}

// importObject names a ServiceImport as NotOwnedError.Object does.
func importObject(ns, name string) string {
	return (&members.NotOwnedError{Kind: kindImport, Namespace: ns, Name: name}).Object()
}

// yieldToForeign removes what mcs-importer made for ns/name in a member
// where a ServiceImport it does not own has the name: the mirrored slices
// and the VIP (a derived Service would serve no import of ours).
func (c *Controller) yieldToForeign(ctx context.Context, v view, ns, name string) error {
	var errs []error
	if err := c.vip.Release(ctx, v.m.ID, ns, name); err != nil {
		c.failed(v.m, "release VIP")
		errs = append(errs, fmt.Errorf("releasing VIP: %w", err))
	}
	errs = append(errs, c.releaseLeftovers(ctx, v.m, ns, name))
	_, err := c.writeSlices(ctx, v, ns, planSlices(nil, v.c.MirroredSlices(ns, name), vip.Assignment{}))
	return errors.Join(append(errs, err)...)
}

// releaseLeftovers deletes what another --vip-mode made for ns/name in m
// (c.leftovers; a cache lookup when there is nothing).
func (c *Controller) releaseLeftovers(ctx context.Context, m *members.Member, ns, name string) error {
	if c.leftovers == nil {
		return nil
	}
	if err := c.leftovers.Release(ctx, m.ID, ns, name); err != nil {
		c.failed(m, "release leftover VIP")
		return fmt.Errorf("deleting what another --vip-mode made: %w", err)
	}
	return nil
}

// applyExportStatus sets the export's conditions when they changed.
func (c *Controller) applyExportStatus(ctx context.Context, v view, e *mcsv1beta1.ServiceExport, now metav1.Time, conds ...metav1.Condition) error {
	m := v.m
	merged := func(se *mcsv1beta1.ServiceExport) []metav1.Condition {
		out := aggregate.MergeConditions(se.Status.Conditions, se.Generation, now, conds...)
		m.Schema.PruneExportConditions(out)
		return out
	}
	_, _, err := write.Ensure(ctx, write.Ops[*mcsv1beta1.ServiceExport]{
		Get: func(ctx context.Context) (*mcsv1beta1.ServiceExport, error) {
			return m.GetExport(ctx, e.Namespace, e.Name)
		},
		UpToDate: func(se *mcsv1beta1.ServiceExport) bool {
			return aggregate.ConditionsEqual(merged(se), se.Status.Conditions)
		},
		Update: func(ctx context.Context, se *mcsv1beta1.ServiceExport) (*mcsv1beta1.ServiceExport, error) {
			upd := se.DeepCopy()
			upd.Status.Conditions = merged(se)
			defer m.Writing(members.KindExport, e.Namespace, e.Name, e.Name)()
			return upd, m.UpdateExportStatus(ctx, upd)
		},
		Wrote: c.recorder(m, kindExportStatus, e.Namespace, e.Name, e.Name),
	}, e)
	if apierrors.IsNotFound(err) {
		return nil // unexported meanwhile; its deletion event requeues the key
	}
	if err != nil {
		c.failed(m, "update ServiceExport status")
	}
	return err
}

// recorder reports writes of kind ns/name in m, made for service ns/svc,
// as c.wrote does.
func (c *Controller) recorder(m *members.Member, kind, ns, svc, name string) func(verb string, err error) {
	return func(verb string, err error) { c.wrote(m, kind, verb, ns, svc, name, err) }
}

// families are the IP families of ips, in order, each once.
func families(ips []string) []corev1.IPFamily {
	var out []corev1.IPFamily
	for _, s := range ips {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		f := corev1.IPv4Protocol
		if ip.Is6() && !ip.Is4In6() {
			f = corev1.IPv6Protocol
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// recorded records an object written into m (members.Member.RecordWrite)
// and passes it on.
func recorded[T runtime.Object](m *members.Member, obj T, err error) (T, error) {
	if err == nil {
		m.RecordWrite(obj)
	}
	return obj, err
}

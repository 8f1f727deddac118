package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/aggregate"
	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
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
	// active: the namespace exists and is not terminating.
	active bool
	// now stamps new conditions.
	now  metav1.Time
	pass pass
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
// import's status.
func (c *Controller) applyImport(ctx context.Context, v view, t importTarget) (importOutcome, error) {
	m := v.m
	ns, name, res, active, now, p := t.ns, t.name, t.res, t.active, t.now, t.pass
	cur := v.c.Import(ns, name)
	if cur != nil && !members.Owned(cur) {
		if res.Import != nil && active {
			c.warnForeign(m, ns, name)
		}
		return importOutcome{inTheWay: []string{importObject(ns, name)}}, c.yieldToForeign(ctx, v, ns, name)
	}
	c.forgetForeign(m, ns, name)
	frozenKey := m.ID + "/" + key(ns, name)
	if h := c.set.Hold(); h.Active() && holds(h, v, ns, name, cur) {
		// Some of it may have come from a member not seen since the
		// start: the import (VIP, ports, status) and that member's
		// slices are left exactly as they are until it joins or its
		// grace period has passed. The members seen meanwhile say what
		// their own endpoints are.
		c.frozen.Insert(frozenKey)
		var live []*discoveryv1.EndpointSlice
		if res.Import != nil && active {
			live = res.Slices
		}
		return importOutcome{present: cur != nil}, c.refreshSeenEndpoints(ctx, v, ns, name, h, live)
	}
	c.frozen.Delete(frozenKey)
	// Names held by others (a derived Service's, a mirrored slice's) are
	// reported on every return from here on, and as an error, so that
	// the key is retried (with backoff) until they are free: their
	// objects' events are not ours to watch.
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

	if res.Import == nil || !active {
		// No import here: delete ours, then its slices.
		var errs []error
		gone := true
		if cur != nil {
			err := m.DeleteImport(ctx, ns, name, cur.UID)
			c.wrote(m, kindImport, "delete", ns, name, err)
			switch {
			case err == nil:
				c.log.Info("deleted ServiceImport", "cluster", m.ID, "namespace", ns, "name", name)
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				// Gone already, or replaced (UID precondition): fine.
			default:
				c.failed(m, "delete ServiceImport")
				errs = append(errs, err)
				gone = false
			}
		}
		if gone {
			if err := c.vip.Release(ctx, m.ID, ns, name); err != nil {
				c.failed(m, "release VIP")
				errs = append(errs, fmt.Errorf("releasing VIP: %w", err))
			}
			errs = append(errs, c.releaseLeftovers(ctx, m, ns, name))
		}
		_, err := c.applySlices(ctx, v, ns, name, nil, vip.Assignment{})
		return done(false, nil, errors.Join(append(errs, err)...))
	}

	desired := res.Import.DeepCopy()
	var asg vip.Assignment
	var err error
	if desired.Spec.Type == mcsv1beta1.ClusterSetIP {
		if asg, err = c.vip.Assign(ctx, m.ID, desired); err != nil {
			var no *members.NotOwnedError
			if errors.As(err, &no) {
				// The import is written without a VIP, and says why.
				notOwned = append(notOwned, no)
				asg = vip.Assignment{}
			} else {
				// A quota or a webhook refused the VIP's object: the
				// import is written with what it holds (asg), says
				// why, and the key is retried.
				c.failed(m, "assign VIP")
				vipErr = fmt.Errorf("assigning VIP: %w", err)
				asg.Ready = &metav1.Condition{
					Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionFalse,
					Reason:  string(mcsv1beta1.ServiceImportReasonPending),
					Message: "the VIP cannot be made or updated here: " + err.Error(),
				}
			}
		}
		desired.Spec.IPs = asg.IPs
		// ipFamilies lists the families of the ips, in their order (a
		// single-stack member gives a dual-stack export one VIP).
		if fams := families(asg.IPs); len(fams) > 0 {
			desired.Spec.IPFamilies = fams
		}
		if len(asg.Annotations) > 0 {
			if desired.Annotations == nil {
				desired.Annotations = map[string]string{}
			}
			maps.Copy(desired.Annotations, asg.Annotations)
		}
	} else if err := c.vip.Release(ctx, m.ID, ns, name); err != nil {
		// A Headless import names no VIP; what could not be released
		// is retried, and the import and its endpoints are written.
		c.failed(m, "release VIP")
		vipErr = fmt.Errorf("releasing VIP: %w", err)
	}
	aggregate.RecordExportedKeys(desired)
	// What this member's CRDs would drop is not asked for (or every pass
	// would find the import out of date).
	m.Schema.PruneImport(desired)

	// Slices first, so that an import never shows up without the
	// endpoints it can have; a slice whose name someone else holds does
	// not keep the import (and every other cluster's endpoints) out.
	held, err := c.applySlices(ctx, v, ns, name, res.Slices, asg)
	notOwned = append(notOwned, held...)
	if err != nil {
		return done(cur != nil, nil, err)
	}
	ready := aggregate.ImportReadyCondition()
	if asg.Ready != nil {
		ready = *asg.Ready
	}
	if len(notOwned) > 0 {
		msgs := make([]string, len(notOwned))
		for i, no := range notOwned {
			msgs[i] = no.Error()
		}
		ready = metav1.Condition{
			Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionFalse,
			Reason:  string(mcsv1beta1.ServiceImportReasonPending),
			Message: strings.Join(msgs, "; "),
		}
	}

	if cur == nil {
		obj := desired.DeepCopy()
		obj.Status = mcsv1beta1.ServiceImportStatus{}
		created, err := m.CreateImport(ctx, obj)
		c.wrote(m, kindImport, "create", ns, name, err)
		switch {
		case err == nil:
			c.log.Info("created ServiceImport", "cluster", m.ID, "namespace", ns, "name", name, "type", desired.Spec.Type)
			cur = created
		case apierrors.IsAlreadyExists(err):
			// Our cache is behind: look at what is there.
			if cur, err = m.GetImport(ctx, ns, name); err != nil {
				return done(false, nil, err)
			}
			if !members.Owned(cur) {
				c.warnForeign(m, ns, name)
				notOwned = nil // their import is all that is in the way
				return done(false, []string{importObject(ns, name)}, c.yieldToForeign(ctx, v, ns, name))
			}
		default:
			c.failed(m, "create ServiceImport")
			return done(false, nil, err)
		}
	}

	// Metadata and spec.
	if !aggregate.ImportMetaSpecUpToDate(desired, cur) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if aggregate.ImportMetaSpecUpToDate(desired, cur) {
				return nil // the object read after a conflict has it already
			}
			upd := cur.DeepCopy()
			upd.Labels, upd.Annotations = aggregate.MergeImportMeta(desired, cur)
			upd.Spec = desired.Spec
			out, err := m.UpdateImport(ctx, upd)
			c.wrote(m, kindImport, "update", ns, name, err)
			if apierrors.IsConflict(err) {
				if latest, gerr := m.GetImport(ctx, ns, name); gerr == nil {
					if !members.Owned(latest) {
						return errForeign
					}
					cur = latest
				}
				return err
			}
			if err == nil {
				cur = out
			}
			return err
		})
		if errors.Is(err, errForeign) {
			c.warnForeign(m, ns, name)
			notOwned = nil // their import is all that is in the way
			return done(false, []string{importObject(ns, name)}, nil)
		}
		if err != nil {
			c.failed(m, "update ServiceImport")
			return done(true, nil, err)
		}
	}

	// The import names no VIP another --vip-mode made any more.
	if err := c.releaseLeftovers(ctx, m, ns, name); err != nil {
		return done(true, nil, err)
	}

	if p == passServe {
		return done(true, nil, nil)
	}

	// Status.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		want := desired.Status
		want.Conditions = aggregate.MergeConditions(cur.Status.Conditions, cur.Generation, now, ready)
		m.Schema.PruneImportStatus(&want)
		if aggregate.ImportStatusUpToDate(&want, &cur.Status) {
			return nil
		}
		upd := cur.DeepCopy()
		upd.Status = want
		out, err := m.UpdateImportStatus(ctx, upd)
		c.wrote(m, kindImportStatus, "update", ns, name, err)
		if apierrors.IsConflict(err) {
			if latest, gerr := m.GetImport(ctx, ns, name); gerr == nil {
				cur = latest
			}
			return err
		}
		if err == nil {
			cur = out
		}
		return err
	})
	if err != nil {
		c.failed(m, "update ServiceImport status")
		return done(true, nil, err)
	}
	return done(true, nil, nil)
}

// holds reports whether the import ns/name in v's member (cur) or its
// mirrored slices name a cluster whose contributions h holds.
func holds(h members.Hold, v view, ns, name string, cur *mcsv1beta1.ServiceImport) bool {
	if cur != nil {
		for _, cl := range cur.Status.Clusters {
			if h.Holds(cl.Cluster) {
				return true
			}
		}
	}
	for _, s := range v.c.MirroredSlices(ns, name) {
		if h.Holds(s.Labels[mcsapi.LabelSourceCluster]) {
			return true
		}
	}
	return false
}

// refreshSeenEndpoints brings the mirrored slices of ns/name that come
// from clusters h does not hold to the endpoints of desired (the slices
// the import would have), while the import itself is held: a seen
// member's endpoint that stops being ready, or goes, stops being served
// then, not when the hold ends. Only endpoints change (labels and ports
// follow the held import); a slice a seen member no longer has is
// deleted; a new one waits for the hold to end, as the import's ports do.
func (c *Controller) refreshSeenEndpoints(ctx context.Context, v view, ns, name string, h members.Hold, desired []*discoveryv1.EndpointSlice) error {
	m := v.m
	client := m.Kube.DiscoveryV1().EndpointSlices(ns)
	want := map[string]*discoveryv1.EndpointSlice{}
	for _, d := range desired {
		want[d.Name] = d
	}
	var errs []error
	for _, a := range v.c.MirroredSlices(ns, name) {
		if h.Holds(a.Labels[mcsapi.LabelSourceCluster]) || !members.Owned(a) {
			continue
		}
		d := want[a.Name]
		if d == nil || d.AddressType != a.AddressType {
			err := client.Delete(ctx, a.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &a.UID}})
			c.wrote(m, kindSlice, "delete", ns, a.Name, err)
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				c.failed(m, "delete EndpointSlice")
				errs = append(errs, err)
			}
			continue
		}
		if aggregate.EndpointsUpToDate(d, a) {
			continue
		}
		cur := a
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if aggregate.EndpointsUpToDate(d, cur) {
				return nil
			}
			upd := cur.DeepCopy()
			upd.Endpoints = d.Endpoints
			_, err := client.Update(ctx, upd, metav1.UpdateOptions{})
			c.wrote(m, kindSlice, "update", ns, a.Name, err)
			if apierrors.IsConflict(err) {
				if live, gerr := client.Get(ctx, a.Name, metav1.GetOptions{}); gerr == nil {
					if !members.Owned(live) {
						return errForeign
					}
					cur = live
				}
			}
			return err
		})
		switch {
		case errors.Is(err, errForeign):
		case err != nil:
			c.failed(m, "update EndpointSlice")
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

var errForeign = errors.New("object is not managed by mcs-importer")

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
	_, err := c.applySlices(ctx, v, ns, name, nil, vip.Assignment{})
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

// applySlices makes the member's mirrored slices of ns/name exactly
// desired (plus the VIP assignment's labels and port names): create what
// is missing, update what differs, delete what is ours and no longer
// wanted. It returns the desired slices whose names objects we do not
// manage hold (left alone, and looked up before the next create, which
// would fail and count as a write), apart from the errors.
func (c *Controller) applySlices(ctx context.Context, v view, ns, name string, desired []*discoveryv1.EndpointSlice, asg vip.Assignment) (held []*members.NotOwnedError, _ error) {
	m := v.m
	client := m.Kube.DiscoveryV1().EndpointSlices(ns)
	actual := map[string]*discoveryv1.EndpointSlice{}
	for _, s := range v.c.MirroredSlices(ns, name) {
		actual[s.Name] = s
	}
	var errs []error
	want := map[string]bool{}
	for _, d := range desired {
		want[d.Name] = true
		d = d.DeepCopy()
		d.Labels = withLabels(d.Labels, asg.SliceLabels)
		aggregate.RenamePorts(d, asg.SlicePortNames)
		a := actual[d.Name]
		if a != nil && aggregate.SliceUpToDate(d, a) {
			continue
		}
		if a != nil && a.AddressType != d.AddressType {
			// addressType is immutable: replace the slice.
			err := client.Delete(ctx, a.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &a.UID}})
			c.wrote(m, kindSlice, "delete", ns, a.Name, err)
			// Conflict: the UID changed, it was replaced already; the
			// create below then finds what is there.
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				c.failed(m, "delete EndpointSlice")
				errs = append(errs, err)
				continue
			}
			a = nil
		}
		heldKey := m.ID + "/" + ns + "/" + d.Name
		if a == nil && c.heldNames.Has(heldKey) {
			// Someone else's last time: look before writing.
			live, err := client.Get(ctx, d.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				c.heldNames.Delete(heldKey) // free now: created below
			case err != nil:
				errs = append(errs, err)
				continue
			case !members.Owned(live):
				held = append(held, &members.NotOwnedError{Kind: kindSlice, Namespace: ns, Name: d.Name})
				continue
			default:
				c.heldNames.Delete(heldKey)
				a = live
				if aggregate.SliceUpToDate(d, a) {
					continue
				}
			}
		}
		if a == nil {
			_, err := client.Create(ctx, d, metav1.CreateOptions{})
			c.wrote(m, kindSlice, "create", ns, d.Name, err)
			if err == nil {
				continue
			}
			if !apierrors.IsAlreadyExists(err) {
				c.failed(m, "create EndpointSlice")
				errs = append(errs, err)
				continue
			}
			// Our cache is behind, or someone else's slice has the name.
			live, gerr := client.Get(ctx, d.Name, metav1.GetOptions{})
			if gerr != nil {
				errs = append(errs, gerr)
				continue
			}
			if !members.Owned(live) {
				c.heldNames.Insert(heldKey)
				held = append(held, &members.NotOwnedError{Kind: kindSlice, Namespace: ns, Name: d.Name})
				continue
			}
			a = live
			if aggregate.SliceUpToDate(d, a) {
				continue
			}
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if aggregate.SliceUpToDate(d, a) {
				return nil // the slice read after a conflict has it already
			}
			upd := a.DeepCopy()
			upd.Labels, upd.Endpoints, upd.Ports = aggregate.MergeSliceLabels(d, a), d.Endpoints, d.Ports
			_, err := client.Update(ctx, upd, metav1.UpdateOptions{})
			c.wrote(m, kindSlice, "update", ns, d.Name, err)
			if apierrors.IsConflict(err) {
				if live, gerr := client.Get(ctx, d.Name, metav1.GetOptions{}); gerr == nil {
					if !members.Owned(live) {
						return errForeign
					}
					a = live
				}
			}
			return err
		})
		switch {
		case errors.Is(err, errForeign):
			c.heldNames.Insert(heldKey)
			held = append(held, &members.NotOwnedError{Kind: kindSlice, Namespace: ns, Name: d.Name})
		case err != nil:
			c.failed(m, "update EndpointSlice")
			errs = append(errs, err)
		}
	}
	for n, a := range actual {
		if want[n] {
			continue
		}
		err := client.Delete(ctx, n, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &a.UID}})
		c.wrote(m, kindSlice, "delete", ns, n, err)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			c.failed(m, "delete EndpointSlice")
			errs = append(errs, err)
		}
	}
	return held, errors.Join(errs...)
}

// applyExportStatus sets the export's conditions when they changed.
func (c *Controller) applyExportStatus(ctx context.Context, v view, e *mcsv1beta1.ServiceExport, now metav1.Time, conds ...metav1.Condition) error {
	m := v.m
	cur := e
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		merged := aggregate.MergeConditions(cur.Status.Conditions, cur.Generation, now, conds...)
		m.Schema.PruneExportConditions(merged)
		if aggregate.ConditionsEqual(merged, cur.Status.Conditions) {
			return nil
		}
		upd := cur.DeepCopy()
		upd.Status.Conditions = merged
		err := m.UpdateExportStatus(ctx, upd)
		c.wrote(m, kindExportStatus, "update", e.Namespace, e.Name, err)
		if apierrors.IsConflict(err) {
			if latest, gerr := m.GetExport(ctx, e.Namespace, e.Name); gerr == nil {
				cur = latest
			}
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil // unexported meanwhile; its deletion event requeues the key
	}
	if err != nil {
		c.failed(m, "update ServiceExport status")
	}
	return err
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

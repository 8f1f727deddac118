package controller

import (
	"maps"
	"slices"
	"sort"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/aggregate"
	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/importer/slicedigest"
	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// The write path is decide, then write: the functions here are pure (they
// read the caches' objects and never write), and apply.go writes what they
// decided. The one step between is the VIP provider's: its assignment
// (the derived Service's ClusterIPs, say) is only known once it has
// written, and it decides the import's spec.ips and its slices' labels.

// action is what one key's reconcile does in one importing member.
type action int

const (
	// actYield: a ServiceImport mcs-importer does not manage has the
	// name; what mcs-importer made for the key there is removed.
	actYield action = iota
	// actHold: what is there may have come from a member not seen since
	// the start; only the seen members' endpoints are brought up to date.
	actHold
	// actRemove: no import here (none is exported, or the namespace is
	// gone): ours, its VIP and its slices are deleted.
	actRemove
	// actApply: the import, its VIP and its slices are made as desired.
	actApply
)

// decide is what t asks of the member v, whose cache holds cur (nil: no
// import) and whose held contributions are h's.
func decide(h members.Hold, v view, t importTarget, cur *mcsv1beta1.ServiceImport) action {
	switch {
	case cur != nil && !members.Owned(cur):
		return actYield
	case h.Active() && holds(h, v, t.ns, t.name, cur):
		return actHold
	case t.res.Import == nil || !t.active:
		return actRemove
	}
	return actApply
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

// importWithVIP is the import desired in a member: the aggregate's, with
// the VIP assignment's addresses (and their families, in order: a
// single-stack member gives a dual-stack export one VIP) and annotations,
// the exported keys recorded, and no field the member's CRDs would drop
// (or every pass would find it out of date).
func importWithVIP(agg *mcsv1beta1.ServiceImport, asg vip.Assignment, schema members.Schema) *mcsv1beta1.ServiceImport {
	desired := agg.DeepCopy()
	if desired.Spec.Type == mcsv1beta1.ClusterSetIP {
		desired.Spec.IPs = asg.IPs
		if fams := families(asg.IPs); len(fams) > 0 {
			desired.Spec.IPFamilies = fams
		}
		if len(asg.Annotations) > 0 {
			if desired.Annotations == nil {
				desired.Annotations = map[string]string{}
			}
			maps.Copy(desired.Annotations, asg.Annotations)
		}
	}
	aggregate.RecordExportedKeys(desired)
	schema.PruneImport(desired)
	return desired
}

// readyCondition is the import's Ready condition: the VIP step's, if it
// said why it is not ready, and else Pending while names the import
// needs are held by objects mcs-importer does not manage.
func readyCondition(asg vip.Assignment, notOwned []*members.NotOwnedError) metav1.Condition {
	if len(notOwned) > 0 {
		msgs := make([]string, len(notOwned))
		for i, no := range notOwned {
			msgs[i] = no.Error()
		}
		return metav1.Condition{
			Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionFalse,
			Reason:  string(mcsv1beta1.ServiceImportReasonPending),
			Message: strings.Join(msgs, "; "),
		}
	}
	if asg.Ready != nil {
		return *asg.Ready
	}
	return aggregate.ImportReadyCondition()
}

// sliceWrite is one mirrored slice to create or update.
type sliceWrite struct {
	// want is the slice as it must be.
	want *discoveryv1.EndpointSlice
	// cur is the cache's slice of that name (nil: create).
	cur *discoveryv1.EndpointSlice
	// replace is ours of that name with another addressType (which is
	// immutable): it is deleted first, then want created.
	replace *discoveryv1.EndpointSlice
	// endpointsOnly: only the endpoints are written (labels and ports
	// follow a held import).
	endpointsOnly bool
}

// slicePlan is what a key's mirrored slices in one member need.
type slicePlan struct {
	writes []sliceWrite
	// remove: ours, no longer wanted. They are deleted after the writes,
	// so that endpoints moving between slices are never all gone.
	remove []*discoveryv1.EndpointSlice
}

// empty reports whether the plan writes nothing.
func (p slicePlan) empty() bool { return len(p.writes) == 0 && len(p.remove) == 0 }

// planSlices makes the actual mirrored slices (ours, from the cache)
// exactly desired, with the VIP assignment's labels and port names.
func planSlices(desired, actual []*discoveryv1.EndpointSlice, asg vip.Assignment) slicePlan {
	byName := make(map[string]*discoveryv1.EndpointSlice, len(actual))
	for _, a := range actual {
		byName[a.Name] = a
	}
	var p slicePlan
	for _, d := range desired {
		a := byName[d.Name]
		// What is left in byName afterwards is not wanted.
		delete(byName, d.Name)
		p.plan(d, a, asg)
	}
	for _, a := range byName {
		p.remove = append(p.remove, a)
	}
	sortRemovals(p.remove)
	return p
}

// plan adds what makes a (the cache's slice of d's name, nil if none)
// hold desired slice d, with the VIP assignment's labels and port names.
func (p *slicePlan) plan(d, a *discoveryv1.EndpointSlice, asg vip.Assignment) {
	switch {
	case a == nil:
		p.writes = append(p.writes, sliceWrite{want: asMember(d, asg)})
	case a.AddressType != d.AddressType:
		p.writes = append(p.writes, sliceWrite{want: asMember(d, asg), replace: a})
	case !aggregate.SliceUpToDateAs(d, a, asg.SliceLabels, asg.SlicePortNames):
		p.writes = append(p.writes, sliceWrite{want: asMember(d, asg), cur: a})
	}
}

// asMember is desired as one member's copy must be, with the VIP
// assignment's labels and port names. desired is shared by every member,
// so the member's version is a shallow copy; it is made only for a slice
// to be written.
func asMember(desired *discoveryv1.EndpointSlice, asg vip.Assignment) *discoveryv1.EndpointSlice {
	if len(asg.SliceLabels) == 0 && len(asg.SlicePortNames) == 0 {
		return desired
	}
	c := *desired
	c.Labels = withLabels(desired.Labels, asg.SliceLabels)
	c.Ports = slices.Clone(desired.Ports)
	aggregate.RenamePorts(&c, asg.SlicePortNames)
	return &c
}

// planSeenEndpoints is what a held import's slices need: the slices from
// clusters h does not hold get the endpoints of desired (the slices the
// import would have), so that a seen member's endpoint that stops being
// ready, or goes, stops being served now, not when the hold ends. A slice
// a seen member no longer has is removed; a new one waits for the hold
// to end, as the import's ports do. Slices we do not manage are left out.
func planSeenEndpoints(h members.Hold, desired, actual []*discoveryv1.EndpointSlice) slicePlan {
	want := make(map[string]*discoveryv1.EndpointSlice, len(desired))
	for _, d := range desired {
		want[d.Name] = d
	}
	var p slicePlan
	for _, a := range actual {
		if h.Holds(a.Labels[mcsapi.LabelSourceCluster]) || !members.Owned(a) {
			continue
		}
		d := want[a.Name]
		switch {
		case d == nil || d.AddressType != a.AddressType:
			p.remove = append(p.remove, a)
		case !aggregate.EndpointsUpToDate(d, a):
			// Labels and ports as they are (a shallow copy of a, which
			// may be the cache's slim copy), d's endpoints and their
			// digest.
			w := *a
			w.Endpoints = d.Endpoints
			slicedigest.Stamp(&w)
			p.writes = append(p.writes, sliceWrite{want: &w, cur: a, endpointsOnly: true})
		}
	}
	sortRemovals(p.remove)
	return p
}

func sortRemovals(s []*discoveryv1.EndpointSlice) {
	sort.Slice(s, func(i, j int) bool { return s[i].Name < s[j].Name })
}

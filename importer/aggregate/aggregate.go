// Package aggregate is the pure heart of mcs-importer: from every
// ServiceExport of one (namespace, name) across the clusterset, with its
// Service, its EndpointSlices and its cluster ID, it computes the desired
// ServiceImport, the mirrored EndpointSlices and each export's conditions.
//
// Nothing here does I/O or reads the clock: the caller passes the time to
// stamp new conditions with. Every MCS API rule (mcs-api v0.5.2) lives here
// and is table-tested:
//
//   - An export is Valid when its Service exists and is not ExternalName
//     (else Valid=False with NoService / InvalidServiceType) and the
//     caller's export policy allows it (else the condition it gives);
//     only valid exports contribute to the import. No valid export: no
//     import.
//   - The oldest valid export (ServiceExport creationTimestamp, ties broken
//     by cluster ID) wins every conflict.
//   - type: the oldest valid export's (Headless when its Service is
//     headless), as KEP-1645 says of headlessness: a newer export of the
//     other type changes nothing, its endpoints are served all the same,
//     and every valid export gets TypeConflict.
//   - ports: the union; a port whose name or (port, protocol) matches one
//     already taken but is defined differently keeps the older definition.
//     When the valid exports' port sets are not all identical, every valid
//     export gets PortConflict (as the conformance suite expects).
//   - sessionAffinity, sessionAffinityConfig, ipFamilies,
//     internalTrafficPolicy, trafficDistribution, exportedLabels,
//     exportedAnnotations: from the oldest; when the valid exports do not
//     all agree, every valid export gets the matching ...Conflict reason
//     (the API recommends raising the condition on all constituents).
//   - Conflict reasons are comma-joined in a fixed order; NoConflicts when
//     there are none.
//   - exportedLabels and exportedAnnotations the API server would reject,
//     and the keys mcs-importer owns (mcs-dns.io/..., the managed-by label,
//     the derived-service annotation), are not copied; the export's Valid
//     message lists them.
package aggregate

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// Export is one ServiceExport as seen in one member cluster.
type Export struct {
	// ClusterID is the ID of the cluster the export lives in.
	ClusterID string
	// Region is that cluster's region ("" none): its mirrored slices
	// carry it in mcsapi.LabelSourceRegion.
	Region string
	// Export is the ServiceExport (always set).
	Export *mcsv1beta1.ServiceExport
	// Service is the Service of the same name, nil if it does not exist.
	Service *corev1.Service
	// Slices are the Service's EndpointSlices in that cluster.
	Slices []*discoveryv1.EndpointSlice
	// Refused, when set, is the Valid=False condition of an export the
	// caller's policy does not allow: it does not contribute.
	Refused *metav1.Condition
}

// Input is everything known about one exported (namespace, name).
type Input struct {
	Namespace, Name string
	Exports         []Export
	// WantsClusterSetIP is nil unless imports may get a clusterset-wide
	// VIP (--vip-mode=clusterset-cidr); then it says whether an export
	// asks for one (the VIP provider's policy).
	WantsClusterSetIP func(*mcsv1beta1.ServiceExport) bool
}

// ReasonClusterSetIPConflict is raised when exports disagree on using a
// clusterset-wide VIP (their mcs-dns.io/use-clusterset-ip annotations).
const ReasonClusterSetIPConflict mcsv1beta1.ServiceExportConditionReason = "ClusterSetIPConflict"

// ExportResult is the computed state of one export.
type ExportResult struct {
	ClusterID string
	// Valid reports whether the export contributes to the import.
	Valid bool
	// ValidCondition and ConflictCondition are the desired Valid and
	// Conflict conditions (without lastTransitionTime/observedGeneration;
	// MergeConditions fills them in).
	ValidCondition    metav1.Condition
	ConflictCondition metav1.Condition
}

// Result is the desired state for one (namespace, name).
type Result struct {
	// Import is the desired ServiceImport (metadata labels/annotations,
	// spec, status.clusters and status.endpointSliceObjects; conditions are
	// added by ImportConditions), nil when there must be no import.
	Import *mcsv1beta1.ServiceImport
	// Slices are the mirrored EndpointSlices every importing cluster must
	// hold, sorted by name.
	Slices []*discoveryv1.EndpointSlice
	// Exports has one entry per input export, in input order.
	Exports []ExportResult
	// Conflicts are the conflict reasons raised, in canonical order.
	Conflicts []string
	// Winner is the cluster ID of the oldest valid export ("" if none).
	Winner string
}

// conflictOrder is the canonical order of comma-joined conflict reasons.
var conflictOrder = []mcsv1beta1.ServiceExportConditionReason{
	mcsv1beta1.ServiceExportReasonPortConflict,
	mcsv1beta1.ServiceExportReasonTypeConflict,
	mcsv1beta1.ServiceExportReasonSessionAffinityConflict,
	mcsv1beta1.ServiceExportReasonSessionAffinityConfigConflict,
	mcsv1beta1.ServiceExportReasonLabelsConflict,
	mcsv1beta1.ServiceExportReasonAnnotationsConflict,
	mcsv1beta1.ServiceExportReasonInternalTrafficPolicyConflict,
	mcsv1beta1.ServiceExportReasonTrafficDistributionConflict,
	mcsv1beta1.ServiceExportReasonIPFamilyConflict,
	ReasonClusterSetIPConflict,
}

// Older reports whether export a wins over b: earlier creationTimestamp,
// ties broken by cluster ID.
func Older(a, b *Export) bool {
	ta, tb := a.Export.CreationTimestamp, b.Export.CreationTimestamp
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.ClusterID < b.ClusterID
}

// validity returns the Valid condition of an export.
func validity(e *Export) (bool, metav1.Condition) {
	switch {
	case e.Refused != nil:
		c := *e.Refused
		c.Type, c.Status = string(mcsv1beta1.ServiceExportConditionValid), metav1.ConditionFalse
		return false, c
	case e.Service == nil:
		return false, metav1.Condition{
			Type: string(mcsv1beta1.ServiceExportConditionValid), Status: metav1.ConditionFalse,
			Reason:  string(mcsv1beta1.ServiceExportReasonNoService),
			Message: fmt.Sprintf("Service %s/%s not found", e.Export.Namespace, e.Export.Name),
		}
	case e.Service.Spec.Type == corev1.ServiceTypeExternalName:
		return false, metav1.Condition{
			Type: string(mcsv1beta1.ServiceExportConditionValid), Status: metav1.ConditionFalse,
			Reason:  string(mcsv1beta1.ServiceExportReasonInvalidServiceType),
			Message: fmt.Sprintf("Service %s/%s is of type ExternalName, which cannot be exported", e.Export.Namespace, e.Export.Name),
		}
	}
	return true, metav1.Condition{
		Type: string(mcsv1beta1.ServiceExportConditionValid), Status: metav1.ConditionTrue,
		Reason:  string(mcsv1beta1.ServiceExportReasonValid),
		Message: "Service is exportable",
	}
}

// IsHeadless reports whether a Service is headless.
func IsHeadless(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP == corev1.ClusterIPNone
}

func mapsEqual(a, b map[string]string) bool {
	return len(a) == len(b) && maps.Equal(a, b)
}

// Compute computes the desired state of one (namespace, name).
func Compute(in Input) Result {
	res := Result{Exports: make([]ExportResult, len(in.Exports))}
	var valid []*Export
	type meta struct{ labels, annotations map[string]string }
	exported := make(map[*Export]meta, len(in.Exports))
	for i := range in.Exports {
		e := &in.Exports[i]
		ok, cond := validity(e)
		if ok {
			valid = append(valid, e)
			labels, annotations, dropped := exportedMeta(e)
			exported[e] = meta{labels, annotations}
			cond.Message += droppedMessage(dropped)
		}
		res.Exports[i] = ExportResult{ClusterID: e.ClusterID, Valid: ok, ValidCondition: cond}
	}
	slices.SortStableFunc(valid, func(a, b *Export) int {
		if Older(a, b) {
			return -1
		}
		if Older(b, a) {
			return 1
		}
		return 0
	})

	conflicts := map[mcsv1beta1.ServiceExportConditionReason]bool{}
	if len(valid) > 0 {
		oldest := valid[0]
		res.Winner = oldest.ClusterID
		osvc := oldest.Service
		sets := make([][]mcsv1beta1.ServicePort, len(valid))
		for i, e := range valid {
			sets[i] = portSet(e.Service)
			if i == 0 {
				continue
			}
			svc := e.Service
			if !portSetsEqual(sets[0], sets[i]) {
				conflicts[mcsv1beta1.ServiceExportReasonPortConflict] = true
			}
			if IsHeadless(svc) != IsHeadless(osvc) {
				conflicts[mcsv1beta1.ServiceExportReasonTypeConflict] = true
			}
			if affinity(svc) != affinity(osvc) {
				conflicts[mcsv1beta1.ServiceExportReasonSessionAffinityConflict] = true
			}
			if !equality.Semantic.DeepEqual(svc.Spec.SessionAffinityConfig, osvc.Spec.SessionAffinityConfig) {
				conflicts[mcsv1beta1.ServiceExportReasonSessionAffinityConfigConflict] = true
			}
			// What would be copied (exportedMeta) is compared: entries
			// no export can have on the import do not conflict.
			if !mapsEqual(exported[e].labels, exported[oldest].labels) {
				conflicts[mcsv1beta1.ServiceExportReasonLabelsConflict] = true
			}
			if !mapsEqual(exported[e].annotations, exported[oldest].annotations) {
				conflicts[mcsv1beta1.ServiceExportReasonAnnotationsConflict] = true
			}
			if !ptr.Equal(svc.Spec.InternalTrafficPolicy, osvc.Spec.InternalTrafficPolicy) {
				conflicts[mcsv1beta1.ServiceExportReasonInternalTrafficPolicyConflict] = true
			}
			if !ptr.Equal(svc.Spec.TrafficDistribution, osvc.Spec.TrafficDistribution) {
				conflicts[mcsv1beta1.ServiceExportReasonTrafficDistributionConflict] = true
			}
			if !slices.Equal(svc.Spec.IPFamilies, osvc.Spec.IPFamilies) {
				conflicts[mcsv1beta1.ServiceExportReasonIPFamilyConflict] = true
			}
			if wants := in.WantsClusterSetIP; wants != nil && wants(e.Export) != wants(oldest.Export) {
				conflicts[ReasonClusterSetIPConflict] = true
			}
		}

		imp := &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   in.Namespace,
				Name:        in.Name,
				Labels:      ImportLabels(exported[oldest].labels),
				Annotations: exported[oldest].annotations,
			},
			Spec: mcsv1beta1.ServiceImportSpec{
				Ports:           unionPorts(sets),
				Type:            mcsv1beta1.ClusterSetIP,
				SessionAffinity: affinity(osvc),
				IPFamilies:      slices.Clone(osvc.Spec.IPFamilies),
			},
			Status: mcsv1beta1.ServiceImportStatus{
				EndpointSliceObjects: mcsv1beta1.EndpointSliceObjectsPresent,
			},
		}
		// The oldest export decides; the import says what was decided, and
		// the VIP provider reads it.
		if wants := in.WantsClusterSetIP; wants != nil && wants(oldest.Export) {
			if imp.Annotations == nil {
				imp.Annotations = map[string]string{}
			}
			imp.Annotations[mcsapi.AnnotationUseClusterSetIP] = "true"
		}
		if len(imp.Annotations) == 0 {
			imp.Annotations = nil
		}
		if imp.Spec.Ports == nil {
			imp.Spec.Ports = []mcsv1beta1.ServicePort{}
		}
		if IsHeadless(osvc) {
			imp.Spec.Type = mcsv1beta1.Headless
		}
		if c := osvc.Spec.SessionAffinityConfig; c != nil {
			imp.Spec.SessionAffinityConfig = c.DeepCopy()
		}
		if p := osvc.Spec.InternalTrafficPolicy; p != nil {
			v := *p
			imp.Spec.InternalTrafficPolicy = &v
		}
		if p := osvc.Spec.TrafficDistribution; p != nil {
			v := *p
			imp.Spec.TrafficDistribution = &v
		}
		ids := make([]string, 0, len(valid))
		for _, e := range valid {
			ids = append(ids, e.ClusterID)
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
		for _, id := range ids {
			imp.Status.Clusters = append(imp.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: id})
		}
		res.Import = imp

		// Mirrored slices: one per source slice of every valid export.
		byCluster := slices.Clone(valid)
		slices.SortFunc(byCluster, func(a, b *Export) int { return cmp.Compare(a.ClusterID, b.ClusterID) })
		importPorts := make(map[string]bool, len(imp.Spec.Ports))
		for _, p := range imp.Spec.Ports {
			importPorts[p.Name] = true
		}
		for _, e := range byCluster {
			renames := portRenames(e.Service, imp.Spec.Ports)
			servicePorts := make(map[string]bool, len(e.Service.Spec.Ports))
			for _, sp := range e.Service.Spec.Ports {
				servicePorts[sp.Name] = true
			}
			for _, s := range e.Slices {
				// FQDN slices have no place in MCS DNS; deleted ones are gone.
				if s.DeletionTimestamp != nil || (s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6) {
					continue
				}
				m := MirrorSlice(s, e.ClusterID, in.Name, servicePorts, renames, importPorts)
				if e.Region != "" {
					// A label like the others: a region change makes
					// every slice of the cluster out of date (SliceUpToDate).
					m.Labels[mcsapi.LabelSourceRegion] = e.Region
				}
				res.Slices = append(res.Slices, m)
			}
		}
		slices.SortFunc(res.Slices, func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	}

	for _, r := range conflictOrder {
		if conflicts[r] {
			res.Conflicts = append(res.Conflicts, string(r))
		}
	}
	for i := range res.Exports {
		er := &res.Exports[i]
		er.ConflictCondition = conflictCondition(er.Valid, res.Conflicts, res.Winner)
	}
	return res
}

func affinity(svc *corev1.Service) corev1.ServiceAffinity {
	if svc.Spec.SessionAffinity == "" {
		return corev1.ServiceAffinityNone
	}
	return svc.Spec.SessionAffinity
}

func conflictCondition(valid bool, conflicts []string, winner string) metav1.Condition {
	c := metav1.Condition{Type: string(mcsv1beta1.ServiceExportConditionConflict)}
	switch {
	case !valid:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonNoConflicts), "export is not valid, so it takes no part in the import"
	case len(conflicts) == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, string(mcsv1beta1.ServiceExportReasonNoConflicts), "no conflicts"
	default:
		c.Status = metav1.ConditionTrue
		c.Reason = strings.Join(conflicts, ",")
		c.Message = fmt.Sprintf("exports disagree (%s); the oldest export, in cluster %q, wins", c.Reason, winner)
	}
	return c
}

// ReadyCondition is an export's Ready condition. imported counts the
// member clusters that hold the ServiceImport (those out of reach within
// their grace period included: they still serve it); pending lists the
// clusters where it should exist but does not yet; blocked lists, one
// entry per cluster ("cluster: Kind ns/name, ..."), the objects not
// managed by mcs-importer that hold names it needs (a ServiceImport of the
// same name, a derived Service's or a mirrored slice's name): mcs-importer
// leaves them alone, and the export is not fully served.
func ReadyCondition(valid bool, imported int, pending, blocked []string) metav1.Condition {
	c := metav1.Condition{Type: string(mcsv1beta1.ServiceExportConditionReady), Status: metav1.ConditionFalse}
	switch {
	case !valid:
		c.Reason, c.Message = string(mcsv1beta1.ServiceExportReasonFailed), "not exported: the export is not valid (see the Valid condition)"
	case len(blocked) > 0:
		c.Reason = string(mcsv1beta1.ServiceExportReasonFailed)
		c.Message = fmt.Sprintf("imported in %d member cluster(s); objects mcs-importer does not manage hold names it needs, and are left alone: %s",
			imported, strings.Join(blocked, "; "))
	case len(pending) > 0:
		c.Reason = string(mcsv1beta1.ServiceExportReasonPending)
		c.Message = fmt.Sprintf("imported in %d of %d member cluster(s); waiting for the ServiceImport in %s",
			imported, imported+len(pending), strings.Join(pending, ", "))
	default:
		c.Status, c.Reason = metav1.ConditionTrue, string(mcsv1beta1.ServiceExportReasonExported)
		c.Message = fmt.Sprintf("imported in all %d member cluster(s) that have the namespace", imported)
	}
	return c
}

// ImportReadyCondition is the ServiceImport's own Ready condition.
func ImportReadyCondition() metav1.Condition {
	return metav1.Condition{
		Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionTrue,
		Reason: string(mcsv1beta1.ServiceImportReasonReady), Message: "the import and its EndpointSlices are in sync",
	}
}

// MergeConditions returns existing with each desired condition set as
// meta.SetStatusCondition does: lastTransitionTime only moves when the
// status changes, and a condition equal to the existing one is left as it
// is. observedGeneration is set on every desired condition. Conditions of
// other types are kept. existing is not modified.
func MergeConditions(existing []metav1.Condition, generation int64, now metav1.Time, desired ...metav1.Condition) []metav1.Condition {
	out := make([]metav1.Condition, len(existing))
	for i := range existing {
		out[i] = *existing[i].DeepCopy()
	}
	for _, d := range desired {
		d.ObservedGeneration = generation
		d.LastTransitionTime = now
		meta.SetStatusCondition(&out, d)
	}
	return out
}

// ConditionsEqual compares two condition lists as the API stores them
// (order matters not; times compared at second precision).
func ConditionsEqual(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for _, c := range a {
		o := meta.FindStatusCondition(b, c.Type)
		if o == nil || o.Status != c.Status || o.Reason != c.Reason || o.Message != c.Message ||
			o.ObservedGeneration != c.ObservedGeneration || !o.LastTransitionTime.Time.Truncate(time.Second).Equal(c.LastTransitionTime.Time.Truncate(time.Second)) {
			return false
		}
	}
	return true
}

// ImportLabels returns the labels of a ServiceImport: the exported labels
// plus the managed-by label, which always wins.
func ImportLabels(exported map[string]string) map[string]string {
	out := maps.Clone(exported)
	if out == nil {
		out = map[string]string{}
	}
	out[mcsapi.LabelManagedBy] = mcsapi.ManagedByImporter
	return out
}

// ImportMetaSpecUpToDate reports whether actual's labels, annotations and
// spec already are desired's (labels and annotations compared exactly).
func ImportMetaSpecUpToDate(desired, actual *mcsv1beta1.ServiceImport) bool {
	return ImportMetaUpToDate(desired, actual) && SpecEqual(desired.Spec, actual.Spec)
}

// SpecEqual compares two ServiceImport specs, nil and empty lists alike.
func SpecEqual(a, b mcsv1beta1.ServiceImportSpec) bool {
	if a.Type != b.Type || a.SessionAffinity != b.SessionAffinity ||
		!slices.Equal(a.IPs, b.IPs) || !slices.Equal(a.IPFamilies, b.IPFamilies) ||
		!ptr.Equal(a.InternalTrafficPolicy, b.InternalTrafficPolicy) ||
		!ptr.Equal(a.TrafficDistribution, b.TrafficDistribution) ||
		!equality.Semantic.DeepEqual(a.SessionAffinityConfig, b.SessionAffinityConfig) ||
		len(a.Ports) != len(b.Ports) {
		return false
	}
	for i := range a.Ports {
		if !portEqual(a.Ports[i], b.Ports[i]) {
			return false
		}
	}
	return true
}

// ImportStatusUpToDate reports whether actual's status already is desired's.
func ImportStatusUpToDate(desired, actual *mcsv1beta1.ServiceImportStatus) bool {
	return desired.EndpointSliceObjects == actual.EndpointSliceObjects &&
		slices.Equal(desired.Clusters, actual.Clusters) &&
		ConditionsEqual(desired.Conditions, actual.Conditions)
}

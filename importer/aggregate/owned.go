package aggregate

import (
	"maps"
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// Other controllers and admission policies add labels and annotations to
// the objects mcs-importer writes. It compares and changes only the keys
// it owns, so that such additions never make it rewrite an object:
//
//   - on a ServiceImport: the managed-by label, its own annotations
//     (derived-service, mcs-dns.io/...), and the keys it copied from the
//     export's exportedLabels and exportedAnnotations, which the import
//     records in AnnotationExportedLabels and AnnotationExportedAnnotations
//     (so that a key the export stops exporting is removed);
//   - on a mirrored EndpointSlice: the labels of SliceLabels (with the
//     source's manager) and the
//     kubernetes.io/service-name label a derived Service adds.
//
// An import written without the records (by an older mcs-importer) is
// compared whole once, and gets them.
const (
	AnnotationExportedLabels      = "mcs-dns.io/exported-labels"
	AnnotationExportedAnnotations = "mcs-dns.io/exported-annotations"
)

var (
	ownImportLabels      = []string{mcsapi.LabelManagedBy}
	ownImportAnnotations = []string{mcsapi.AnnotationDerivedService, mcsapi.AnnotationUseClusterSetIP,
		mcsapi.AnnotationClusterSetIP, AnnotationExportedLabels, AnnotationExportedAnnotations}
	ownSliceLabels = []string{mcsapi.LabelServiceName, mcsapi.LabelSourceCluster, mcsapi.LabelManagedBy, mcsapi.LabelSourceManagedBy, mcsapi.LabelSourceRegion, mcsapi.LabelKubeServiceName}
)

// RecordExportedKeys adds to a desired import (labels and annotations as
// Compute made them: the exported ones plus mcs-importer's own) the
// records of the keys copied from the export.
func RecordExportedKeys(imp *mcsv1beta1.ServiceImport) {
	if imp.Annotations == nil {
		imp.Annotations = map[string]string{}
	}
	labels := foreignKeys(imp.Labels, ownImportLabels)
	annotations := foreignKeys(imp.Annotations, ownImportAnnotations)
	imp.Annotations[AnnotationExportedLabels] = strings.Join(labels, ",")
	imp.Annotations[AnnotationExportedAnnotations] = strings.Join(annotations, ",")
}

// foreignKeys are m's keys not in own, sorted.
func foreignKeys(m map[string]string, own []string) []string {
	var out []string
	for k := range m {
		if !slices.Contains(own, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// importOwns says which of actual's label and annotation keys mcs-importer
// owns; all is set for an import without records (compared whole).
func importOwns(actual *mcsv1beta1.ServiceImport) (labels, annotations func(string) bool) {
	rl, okL := actual.Annotations[AnnotationExportedLabels]
	ra, okA := actual.Annotations[AnnotationExportedAnnotations]
	if !okL || !okA {
		all := func(string) bool { return true }
		return all, all
	}
	owns := func(fixed []string, record string) func(string) bool {
		recorded := strings.Split(record, ",")
		return func(k string) bool { return slices.Contains(fixed, k) || slices.Contains(recorded, k) }
	}
	return owns(ownImportLabels, rl), owns(ownImportAnnotations, ra)
}

// metaUpToDate reports whether actual holds every desired key and value,
// and no owned key desired lacks.
func metaUpToDate(desired, actual map[string]string, owned func(string) bool) bool {
	for k, v := range desired {
		if av, ok := actual[k]; !ok || av != v {
			return false
		}
	}
	for k := range actual {
		if _, want := desired[k]; !want && owned(k) {
			return false
		}
	}
	return true
}

// mergeMeta is actual's keys that are not owned, with desired's on top.
func mergeMeta(desired, actual map[string]string, owned func(string) bool) map[string]string {
	out := map[string]string{}
	for k, v := range actual {
		if !owned(k) {
			out[k] = v
		}
	}
	maps.Copy(out, desired)
	if len(out) == 0 {
		return nil
	}
	return out
}

// ImportMetaUpToDate reports whether actual has desired's labels and
// annotations, as far as mcs-importer owns them.
func ImportMetaUpToDate(desired, actual *mcsv1beta1.ServiceImport) bool {
	labels, annotations := importOwns(actual)
	return metaUpToDate(desired.Labels, actual.Labels, labels) && metaUpToDate(desired.Annotations, actual.Annotations, annotations)
}

// MergeImportMeta returns the labels and annotations to write on actual
// for desired: desired's, plus what others added.
func MergeImportMeta(desired, actual *mcsv1beta1.ServiceImport) (labels, annotations map[string]string) {
	ol, oa := importOwns(actual)
	return mergeMeta(desired.Labels, actual.Labels, ol), mergeMeta(desired.Annotations, actual.Annotations, oa)
}

func ownsSliceLabel(k string) bool { return slices.Contains(ownSliceLabels, k) }

// MergeSliceLabels returns the labels to write on a mirrored slice:
// desired's, plus what others added.
func MergeSliceLabels(desired, actual *discoveryv1.EndpointSlice) map[string]string {
	return mergeMeta(desired.Labels, actual.Labels, ownsSliceLabel)
}

package aggregate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

func imp(labels, annotations map[string]string) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}}
}

// Keys others add are neither compared nor removed; keys mcs-importer
// owns (its own, and those its records list) are.
func TestOwnedMeta(t *testing.T) {
	desired := imp(map[string]string{"tier": "web", mcsapi.LabelManagedBy: mcsapi.ManagedByImporter},
		map[string]string{"team": "a", mcsapi.AnnotationDerivedService: "d"})
	RecordExportedKeys(desired)
	assert.Equal(t, "tier", desired.Annotations[AnnotationExportedLabels])
	assert.Equal(t, "team", desired.Annotations[AnnotationExportedAnnotations])

	actual := desired.DeepCopy()
	actual.Labels["policy.example/touched"] = "yes"
	actual.Annotations["policy.example/note"] = "x"
	assert.True(t, ImportMetaUpToDate(desired, actual), "others' keys are not ours to compare")

	// The export stops exporting "tier" and the derived Service goes:
	// both are removed, others' keys stay.
	next := imp(map[string]string{mcsapi.LabelManagedBy: mcsapi.ManagedByImporter}, map[string]string{"team": "a"})
	RecordExportedKeys(next)
	assert.False(t, ImportMetaUpToDate(next, actual))
	labels, annotations := MergeImportMeta(next, actual)
	assert.Equal(t, map[string]string{mcsapi.LabelManagedBy: mcsapi.ManagedByImporter, "policy.example/touched": "yes"}, labels)
	assert.Equal(t, map[string]string{"team": "a", "policy.example/note": "x",
		AnnotationExportedLabels: "", AnnotationExportedAnnotations: "team"}, annotations)
	merged := imp(labels, annotations)
	assert.True(t, ImportMetaUpToDate(next, merged))

	// An import without records is compared whole, once.
	legacy := imp(map[string]string{"tier": "web", mcsapi.LabelManagedBy: mcsapi.ManagedByImporter, "policy.example/touched": "yes"},
		map[string]string{"team": "a", mcsapi.AnnotationDerivedService: "d"})
	assert.False(t, ImportMetaUpToDate(desired, legacy))
	labels, annotations = MergeImportMeta(desired, legacy)
	assert.Equal(t, desired.Labels, labels)
	assert.Equal(t, desired.Annotations, annotations)

	// Mirrored slices: the MCS labels are ours, the rest is not.
	d := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Labels: SliceLabels("web", "east", "")}}
	a := d.DeepCopy()
	a.Labels["policy.example/touched"] = "yes"
	assert.True(t, SliceUpToDate(d, a))
	a.Labels[mcsapi.LabelKubeServiceName] = "derived-x"
	assert.False(t, SliceUpToDate(d, a), "a derived Service's label that is no longer wanted")
	assert.Equal(t, map[string]string{mcsapi.LabelServiceName: "web", mcsapi.LabelSourceCluster: "east",
		mcsapi.LabelManagedBy: mcsapi.ManagedByImporter, "policy.example/touched": "yes"}, MergeSliceLabels(d, a))
}

// Package listwatchjson decodes the JSON list and watch responses of
// ServiceImports into ServiceImport objects (typed metadata, raw spec and
// status), in one scan and one decode per object, for the plugin's
// ServiceImport informers. It only decodes: reading spec and status is
// the informer transform's job (compact.ImportFromJSON).
package listwatchjson

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ServiceImport is a ServiceImport as it is read from the API: metadata
// decoded into its typed form, spec and status kept as raw JSON. Decoding
// into it costs a fraction of decoding into Unstructured (whose
// metadata.managedFields alone become a tree of maps), on the one
// goroutine that reads the ServiceImport watch: the critical path of
// start-up. Spec and status are left to the informer transform, which
// reads them as leniently as any served version or CRD fork needs.
type ServiceImport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              rawJSON `json:"spec,omitempty"`
	Status            rawJSON `json:"status,omitempty"`
}

// ServiceImportList is a list of ServiceImports.
type ServiceImportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServiceImport `json:"items"`
}

// rawJSON is a JSON value kept undecoded.
type rawJSON []byte

// UnmarshalJSON keeps a copy of the value.
func (r *rawJSON) UnmarshalJSON(b []byte) error {
	*r = slices.Clone(b)
	return nil
}

// MarshalJSON writes the value back (null when empty).
func (r rawJSON) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

// DeepCopyObject implements runtime.Object.
func (w *ServiceImport) DeepCopyObject() runtime.Object {
	c := *w
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.Spec, c.Status = slices.Clone(w.Spec), slices.Clone(w.Status)
	return &c
}

// DeepCopyObject implements runtime.Object.
func (l *ServiceImportList) DeepCopyObject() runtime.Object {
	c := *l
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	c.Items = make([]ServiceImport, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*ServiceImport)
	}
	return &c
}

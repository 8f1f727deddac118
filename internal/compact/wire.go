package compact

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// WireImport is a ServiceImport as it is read from the API: metadata
// decoded into its typed form, spec and status kept as raw JSON. Decoding
// into it costs a fraction of decoding into Unstructured (whose
// metadata.managedFields alone become a tree of maps), on the one
// goroutine that reads the ServiceImport watch: the critical path of
// start-up. Spec and status are read by ImportFromWire, as leniently as
// ImportFromUnstructured reads them (any served version, CRD forks).
type WireImport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              rawJSON `json:"spec,omitempty"`
	Status            rawJSON `json:"status,omitempty"`
}

// WireImportList is a list of WireImports.
type WireImportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WireImport `json:"items"`
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
func (w *WireImport) DeepCopyObject() runtime.Object {
	c := *w
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.Spec, c.Status = slices.Clone(w.Spec), slices.Clone(w.Status)
	return &c
}

// DeepCopyObject implements runtime.Object.
func (l *WireImportList) DeepCopyObject() runtime.Object {
	c := *l
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	c.Items = make([]WireImport, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*WireImport)
	}
	return &c
}

// ImportFromWire reads a WireImport as ImportFromUnstructured reads the
// same object decoded into Unstructured. It never fails: a malformed
// object comes back with Err set.
func ImportFromWire(w *WireImport, now time.Time) *Import {
	imp := &Import{Meta: metaOf(w), Arrived: now}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetNamespace(w.Namespace)
	u.SetName(w.Name)
	for _, p := range []struct {
		part string
		raw  rawJSON
	}{{"spec", w.Spec}, {"status", w.Status}} {
		part, raw := p.part, p.raw
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var v map[string]any
		if err := utiljson.Unmarshal(raw, &v); err != nil {
			imp.Service.Namespace, imp.Service.Name = w.Namespace, w.Name
			imp.Err = fmt.Errorf("%s is not an object: %w", part, err)
			return imp
		}
		u.Object[part] = v
	}
	imp.Service, imp.Err = readImport(u, imp.skip)
	return imp
}

package listwatchjson_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/compact"
	"github.com/mcs-dns/mcs-dns/internal/listwatchjson"
)

// The 10x start-up fixture of hack/bench: 20,000 ClusterSetIP imports and
// 2,000 headless ones over 10 namespaces, as the API server returns them
// (uid, resourceVersion, creationTimestamp, managedFields).
const (
	benchClusterSetIP = 20000
	benchHeadless     = 2000
	benchNamespaces   = 10
)

var benchGV = schema.GroupVersion{Group: "multicluster.x-k8s.io", Version: "v1beta1"}

func benchImports() []mcsv1beta1.ServiceImport {
	created := metav1.NewTime(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	meta := func(name string, i int, fields string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: name, Namespace: fmt.Sprintf("bench-%02d", i%benchNamespaces),
			UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)), ResourceVersion: fmt.Sprint(1000 + i),
			Generation: 1, CreationTimestamp: created,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: benchGV.String(), Time: &created, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}},
		}
	}
	out := make([]mcsv1beta1.ServiceImport, 0, benchClusterSetIP+benchHeadless)
	for i := range benchClusterSetIP {
		out = append(out, mcsv1beta1.ServiceImport{
			ObjectMeta: meta(fmt.Sprintf("svc-%05d", i), i, `{"f:spec":{".":{},"f:ipFamilies":{},"f:ips":{},"f:ports":{},"f:type":{}}}`),
			Spec: mcsv1beta1.ServiceImportSpec{
				Type: mcsv1beta1.ClusterSetIP, IPs: []string{fmt.Sprintf("100.64.%d.%d", (i+1)>>8, (i+1)&0xff)},
				IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
				Ports: []mcsv1beta1.ServicePort{
					{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80},
					{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090},
				},
			},
		})
	}
	for j := range benchHeadless {
		out = append(out, mcsv1beta1.ServiceImport{
			ObjectMeta: meta(fmt.Sprintf("hl-%04d", j), benchClusterSetIP+j, `{"f:spec":{".":{},"f:ports":{},"f:type":{}}}`),
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless,
				Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}}},
		})
	}
	return out
}

// benchList is the JSON list response of the fixture.
func benchList(b *testing.B) []byte {
	items := benchImports()
	for i := range items {
		items[i].TypeMeta = metav1.TypeMeta{APIVersion: benchGV.String(), Kind: "ServiceImport"}
	}
	body, err := json.Marshal(&mcsv1beta1.ServiceImportList{
		TypeMeta: metav1.TypeMeta{APIVersion: benchGV.String(), Kind: "ServiceImportList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "99999"}, Items: items,
	})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// benchStream is the fixture as a watch-list's initial events (the
// informers' default start-up path): one ADDED event per import, then
// the BOOKMARK that ends them.
func benchStream(b *testing.B) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, imp := range benchImports() {
		imp.TypeMeta = metav1.TypeMeta{APIVersion: benchGV.String(), Kind: "ServiceImport"}
		if err := enc.Encode(map[string]any{"type": "ADDED", "object": &imp}); err != nil {
			b.Fatal(err)
		}
	}
	if err := enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{"apiVersion": benchGV.String(), "kind": "ServiceImport",
		"metadata": map[string]any{"resourceVersion": "99999", "annotations": map[string]any{"k8s.io/initial-events-end": "true"}}}}); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// clientGoCodecs is the codec factory a client-go REST client of
// ServiceImports into listwatchjson.ServiceImport uses.
func clientGoCodecs(typed runtime.Object, typedList runtime.Object) (serializer.CodecFactory, runtime.SerializerInfo) {
	sch := runtime.NewScheme()
	sch.AddKnownTypeWithName(benchGV.WithKind("ServiceImport"), typed)
	sch.AddKnownTypeWithName(benchGV.WithKind("ServiceImportList"), typedList)
	metav1.AddToGroupVersion(sch, benchGV)
	cf := serializer.NewCodecFactory(sch)
	info, _ := runtime.SerializerInfoForMediaType(cf.SupportedMediaTypes(), runtime.ContentTypeJSON)
	return cf, info
}

func keep(b *testing.B, imps []*compact.Import, want int) {
	if len(imps) != want {
		b.Fatalf("%d imports, want %d", len(imps), want)
	}
	for _, imp := range imps {
		if imp.Err != nil {
			b.Fatal(imp.Err)
		}
	}
}

// BenchmarkDecodeImportList decodes the list response of the 10x fixture
// and transforms every item into an Import: the wire decoder, against
// client-go's JSON serializer into the same typed listwatchjson.ServiceImport (what a
// REST client's Do().Into() runs) and into Unstructured (the dynamic
// client's), each followed by its transform. B/op is what start-up
// allocates for the list.
func BenchmarkDecodeImportList(b *testing.B) {
	body := benchList(b)
	n := benchClusterSetIP + benchHeadless
	now := time.Now()
	b.Run("wire", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			l, err := listwatchjson.DecodeList(bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			imps := make([]*compact.Import, 0, len(l.Items))
			for i := range l.Items {
				imps = append(imps, compact.ImportFromJSON(&l.Items[i], now))
			}
			keep(b, imps, n)
		}
	})
	b.Run("client-go-typed", func(b *testing.B) {
		cf, info := clientGoCodecs(&listwatchjson.ServiceImport{}, &listwatchjson.ServiceImportList{})
		dec := cf.WithoutConversion().DecoderToVersion(info.Serializer, benchGV)
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			// As rest.Request.Do: the whole body read, then decoded.
			raw, err := io.ReadAll(bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			obj, err := runtime.Decode(dec, raw)
			if err != nil {
				b.Fatal(err)
			}
			l := obj.(*listwatchjson.ServiceImportList)
			imps := make([]*compact.Import, 0, len(l.Items))
			for i := range l.Items {
				imps = append(imps, compact.ImportFromJSON(&l.Items[i], now))
			}
			keep(b, imps, n)
		}
	})
	b.Run("client-go-unstructured", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			raw, err := io.ReadAll(bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			obj, _, err := unstructured.UnstructuredJSONScheme.Decode(raw, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			l := obj.(*unstructured.UnstructuredList)
			imps := make([]*compact.Import, 0, len(l.Items))
			for i := range l.Items {
				imps = append(imps, compact.ImportFromUnstructured(&l.Items[i], now))
			}
			keep(b, imps, n)
		}
	})
}

// BenchmarkDecodeImportWatch decodes the 10x fixture as a watch-list's
// initial events (ADDED per import, then a BOOKMARK) and transforms every
// import: the wire decoder against client-go's watch decoding (framing,
// envelope, embedded object) into the same listwatchjson.ServiceImport.
func BenchmarkDecodeImportWatch(b *testing.B) {
	stream := benchStream(b)
	n := benchClusterSetIP + benchHeadless
	now := time.Now()
	drainAll := func(b *testing.B, decode func() (runtime.Object, error)) {
		imps := make([]*compact.Import, 0, n)
		for {
			obj, err := decode()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if w, ok := obj.(*listwatchjson.ServiceImport); ok && w.Name != "" {
				imps = append(imps, compact.ImportFromJSON(w, now))
			}
		}
		keep(b, imps, n)
	}
	b.Run("wire", func(b *testing.B) {
		b.SetBytes(int64(len(stream)))
		for b.Loop() {
			d := listwatchjson.NewWatchDecoder(io.NopCloser(bytes.NewReader(stream)))
			drainAll(b, func() (runtime.Object, error) { _, obj, err := d.Decode(); return obj, err })
		}
	})
	b.Run("client-go-typed", func(b *testing.B) {
		b.SetBytes(int64(len(stream)))
		for b.Loop() {
			d := clientGoDecoder(b, io.NopCloser(bytes.NewReader(stream)))
			drainAll(b, func() (runtime.Object, error) { _, obj, err := d.Decode(); return obj, err })
		}
	})
}

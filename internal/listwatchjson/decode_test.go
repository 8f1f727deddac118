package listwatchjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	restwatch "k8s.io/client-go/rest/watch"

	"github.com/mcs-dns/mcs-dns/internal/compact"
	"github.com/mcs-dns/mcs-dns/internal/listwatchjson"
)

// wireStream is a ServiceImport watch as the API server writes it: every
// event type, objects with the metadata the decoder skips (managedFields,
// labels, timestamps), a malformed spec, and an ERROR.
func wireStream(t testing.TB) []byte {
	imp := func(name, rv string, spec any) map[string]any {
		return map[string]any{
			"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
			"metadata": map[string]any{
				"name": name, "namespace": "ns", "uid": "u-" + name, "resourceVersion": rv, "generation": 1,
				"creationTimestamp": "2026-11-29T10:00:00Z",
				"labels":            map[string]any{"a": "b"},
				"annotations":       map[string]any{"x": "y"},
				"managedFields": []any{map[string]any{"manager": "m", "operation": "Update", "apiVersion": "multicluster.x-k8s.io/v1beta1",
					"time": "2026-11-29T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:spec": map[string]any{".": map[string]any{}}}}},
			},
			"spec":   spec,
			"status": map[string]any{"clusters": []any{map[string]any{"cluster": "east"}}},
		}
	}
	cip := map[string]any{"type": "ClusterSetIP", "ips": []any{"10.9.0.1"}, "ports": []any{map[string]any{"name": "http", "protocol": "TCP", "port": 80}}}
	headless := map[string]any{"type": "Headless", "ports": []any{map[string]any{"port": 53, "protocol": "UDP"}}}
	events := []map[string]any{
		{"type": "ADDED", "object": imp("a", "10", cip)},
		{"type": "ADDED", "object": imp("b", "11", headless)},
		{"type": "ADDED", "object": imp("bad", "12", "not an object")},
		{"type": "MODIFIED", "object": imp("a", "13", headless)},
		{"type": "BOOKMARK", "object": map[string]any{"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
			"metadata": map[string]any{"resourceVersion": "14", "creationTimestamp": nil, "annotations": map[string]any{"k8s.io/initial-events-end": "true"}}}},
		{"type": "DELETED", "object": imp("b", "15", headless)},
		{"type": "ERROR", "object": map[string]any{"apiVersion": "v1", "kind": "Status", "metadata": map[string]any{}, "status": "Failure",
			"message": "too old resource version: 1 (14)", "reason": "Expired", "code": 410,
			"details": map[string]any{"causes": []any{map[string]any{"message": "m"}}}}},
	}
	var buf bytes.Buffer
	for _, ev := range events {
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// clientGoDecoder is the path the watch took before: client-go's framing,
// envelope and embedded decoders over a scheme holding listwatchjson.ServiceImport.
func clientGoDecoder(t testing.TB, body io.ReadCloser) watch.Decoder {
	gv := schema.GroupVersion{Group: "multicluster.x-k8s.io", Version: "v1beta1"}
	sch := runtime.NewScheme()
	sch.AddKnownTypeWithName(gv.WithKind("ServiceImport"), &listwatchjson.ServiceImport{})
	sch.AddKnownTypeWithName(gv.WithKind("ServiceImportList"), &listwatchjson.ServiceImportList{})
	metav1.AddToGroupVersion(sch, gv)
	metav1.AddToGroupVersion(sch, schema.GroupVersion{Version: "v1"})
	cf := serializer.NewCodecFactory(sch).WithoutConversion()
	info, ok := runtime.SerializerInfoForMediaType(cf.SupportedMediaTypes(), runtime.ContentTypeJSON)
	require.True(t, ok)
	events := streaming.NewDecoder(info.StreamSerializer.Framer.NewFrameReader(body), info.StreamSerializer.Serializer)
	return restwatch.NewDecoder(events, cf.DecoderToVersion(info.Serializer, nil))
}

type decoded struct {
	typ    watch.EventType
	imp    *compact.Import
	rv     string
	annots map[string]string
	status *metav1.Status
}

func drain(t *testing.T, d watch.Decoder) []decoded {
	defer d.Close()
	now := time.Unix(1, 0)
	var out []decoded
	for {
		typ, obj, err := d.Decode()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		e := decoded{typ: typ}
		switch o := obj.(type) {
		case *listwatchjson.ServiceImport:
			e.imp, e.rv, e.annots = compact.ImportFromJSON(o, now), o.ResourceVersion, o.Annotations
		case *metav1.Status:
			e.status = o
		default:
			t.Fatalf("%T in the stream", obj)
		}
		out = append(out, e)
	}
}

// The wire decoder gives exactly what client-go's decoders give, for every
// event type, and a malformed spec is still a rejected import (not a
// broken stream).
func TestWatchDecoderMatchesClientGo(t *testing.T) {
	stream := wireStream(t)
	want := drain(t, clientGoDecoder(t, io.NopCloser(bytes.NewReader(stream))))
	got := drain(t, listwatchjson.NewWatchDecoder(io.NopCloser(bytes.NewReader(stream))))
	require.Len(t, want, 7)
	assert.Equal(t, want, got)
	assert.Error(t, got[2].imp.Err, "the malformed spec is rejected")
	assert.Equal(t, "true", got[4].annots["k8s.io/initial-events-end"])
	assert.Equal(t, int32(410), got[6].status.Code)
	assert.Equal(t, metav1.StatusFailure, got[6].status.Status)
}

func TestWatchDecoderErrors(t *testing.T) {
	for name, tc := range map[string]struct{ stream, want string }{
		"not JSON":        {`<html>`, "decoding a ServiceImport watch event"},
		"unknown type":    {`{"type":"RENAMED","object":{"kind":"ServiceImport"}}`, `invalid watch event type: "RENAMED"`},
		"another kind":    {`{"type":"ADDED","object":{"kind":"Service","metadata":{"name":"a"}}}`, `object of kind "Service"`},
		"metadata string": {`{"type":"ADDED","object":{"kind":"ServiceImport","metadata":"a"}}`, "decoding a ServiceImport watch event"},
	} {
		t.Run(name, func(t *testing.T) {
			d := listwatchjson.NewWatchDecoder(io.NopCloser(strings.NewReader(tc.stream)))
			_, _, err := d.Decode()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// A clean end of stream is io.EOF, which the stream watcher treats as
	// a normal close.
	_, _, err := listwatchjson.NewWatchDecoder(io.NopCloser(strings.NewReader(" \n"))).Decode()
	assert.Equal(t, io.EOF, err)
}

// A connection dropped in the middle of an event ends the watch quietly,
// as with client-go's decoder, so the reflector resumes from the last
// resource version instead of listing everything again.
func TestWatchDecoderTruncated(t *testing.T) {
	stream := wireStream(t)
	lines := bytes.SplitAfter(stream, []byte("\n"))
	cut := len(lines[0]) + len(lines[1]) + len(lines[2]) + 40 // inside the fourth event
	for name, d := range map[string]watch.Decoder{
		"client-go": clientGoDecoder(t, io.NopCloser(bytes.NewReader(stream[:cut]))),
		"wire":      listwatchjson.NewWatchDecoder(io.NopCloser(bytes.NewReader(stream[:cut]))),
	} {
		w := watch.NewStreamWatcher(d, apierrors.NewClientErrorReporter(500, "GET", "ClientWatchDecoding"))
		var types []watch.EventType
		for ev := range w.ResultChan() {
			types = append(types, ev.Type)
		}
		assert.Equal(t, []watch.EventType{watch.Added, watch.Added, watch.Added}, types, name)
	}
	d := listwatchjson.NewWatchDecoder(io.NopCloser(bytes.NewReader(stream[:cut])))
	for range 3 {
		_, _, err := d.Decode()
		require.NoError(t, err)
	}
	_, _, err := d.Decode()
	assert.Equal(t, io.ErrUnexpectedEOF, err, "unwrapped, for the stream watcher")
}

func TestDecodeList(t *testing.T) {
	list := `{"apiVersion":"multicluster.x-k8s.io/v1beta1","kind":"ServiceImportList","metadata":{"resourceVersion":"20","continue":"c"},"items":[
		{"apiVersion":"multicluster.x-k8s.io/v1beta1","kind":"ServiceImport","metadata":{"name":"a","namespace":"ns","resourceVersion":"7","managedFields":[{"manager":"m"}]},"spec":{"type":"Headless"}},
		{"metadata":{"name":"b","namespace":"ns","resourceVersion":"8"},"spec":{"type":"ClusterSetIP","ips":["10.0.0.1"]}}]}`
	l, err := listwatchjson.DecodeList(strings.NewReader(list))
	require.NoError(t, err)
	assert.Equal(t, "20", l.ResourceVersion)
	assert.Equal(t, "c", l.Continue)
	require.Len(t, l.Items, 2)
	assert.Equal(t, "ServiceImport", l.Items[1].Kind)
	assert.Equal(t, "multicluster.x-k8s.io/v1beta1", l.Items[1].APIVersion)
	b := compact.ImportFromJSON(&l.Items[1], time.Time{})
	require.NoError(t, b.Err)
	assert.Equal(t, "ns", b.Namespace)
	assert.Equal(t, "8", b.ResourceVersion)

	for _, bad := range []string{`{"kind":"Status","status":"Failure"}`, `[1,2]`, `{"kind":"ServiceImportList","items":[{"kind":"Service"}]}`} {
		_, err := listwatchjson.DecodeList(strings.NewReader(bad))
		assert.Error(t, err, bad)
	}
}

// Whatever the stream holds, decoding returns events or an error, never
// panics, and every ServiceImport it returns converts (a malformed one
// comes back rejected, not as a crash).
func FuzzWatchDecoder(f *testing.F) {
	f.Add(wireStream(f))
	f.Add([]byte(`{"type":"ADDED","object":{"kind":"ServiceImport","metadata":{"name":"a","namespace":"n"},"spec":{"type":"ClusterSetIP","ips":["10.0.0.1"],"ports":[{"port":80}]}}}`))
	f.Add([]byte(`{"type":"ERROR","object":{"kind":"Status","status":7,"code":"x"}}`))
	f.Add([]byte(`{"type":"BOOKMARK","object":{"kind":"ServiceImport","metadata":{"annotations":{"k":1}}}}`))
	f.Fuzz(func(t *testing.T, stream []byte) {
		d := listwatchjson.NewWatchDecoder(io.NopCloser(bytes.NewReader(stream)))
		defer d.Close()
		for range 100 {
			_, obj, err := d.Decode()
			if err != nil {
				return
			}
			if w, ok := obj.(*listwatchjson.ServiceImport); ok {
				_ = compact.ImportFromJSON(w, time.Time{})
			}
		}
	})
}

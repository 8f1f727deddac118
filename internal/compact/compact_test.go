package compact

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/listwatchjson"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

func imp(spec, status map[string]any) *unstructured.Unstructured {
	obj := map[string]any{
		"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
		"metadata": map[string]any{"name": "web", "namespace": "demo", "resourceVersion": "7", "managedFields": []any{map[string]any{"manager": "x"}}},
	}
	if spec != nil {
		obj["spec"] = spec
	}
	if status != nil {
		obj["status"] = status
	}
	return &unstructured.Unstructured{Object: obj}
}

func port(name, proto string, n int64) map[string]any {
	return map[string]any{"name": name, "protocol": proto, "port": n}
}

func TestImportFromUnstructured(t *testing.T) {
	tests := []struct {
		name   string
		in     *unstructured.Unstructured
		want   answers.Service
		errSub string
	}{
		{"spec", imp(map[string]any{"type": "ClusterSetIP", "ips": []any{"10.96.0.1", "fd00::1"},
			"ports": []any{port("http", "TCP", 80), port("", "UDP", 53)}}, nil),
			answers.Service{Namespace: "demo", Name: "web", Type: answers.ClusterSetIP,
				IPs:   []netip.Addr{netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("fd00::1")},
				Ports: []answers.Port{{Name: "http", Protocol: "tcp", Port: 80}, {Protocol: "udp", Port: 53}}}, ""},
		{"status fork", imp(nil, map[string]any{"type": "ClusterSetIP", "ips": []any{"10.96.0.2"}, "ports": []any{port("http", "", 80)}}),
			answers.Service{Namespace: "demo", Name: "web", Type: answers.ClusterSetIP,
				IPs: []netip.Addr{netip.MustParseAddr("10.96.0.2")}, Ports: []answers.Port{{Name: "http", Protocol: "tcp", Port: 80}}}, ""},
		{"spec wins over status", imp(map[string]any{"type": "Headless"}, map[string]any{"type": "ClusterSetIP", "endpointSliceObjects": "Absent"}),
			answers.Service{Namespace: "demo", Name: "web", Type: answers.Headless, EndpointsAbsent: true}, ""},
		{"trafficDistribution", imp(map[string]any{"type": "Headless", "trafficDistribution": "PreferClose"}, nil),
			answers.Service{Namespace: "demo", Name: "web", Type: answers.Headless, TrafficDistribution: "PreferClose"}, ""},
		{"trafficDistribution unknown", imp(map[string]any{"type": "Headless", "trafficDistribution": "Anywhere"}, nil),
			answers.Service{Namespace: "demo", Name: "web", Type: answers.Headless}, ""},
		{"headless ignores ips", imp(map[string]any{"type": "Headless", "ips": []any{"10.96.0.1"}}, nil),
			answers.Service{Namespace: "demo", Name: "web", Type: answers.Headless}, ""},
		{"no type", imp(map[string]any{"ips": []any{"10.96.0.1"}}, nil), answers.Service{}, "type"},
		{"bad type", imp(map[string]any{"type": "LoadBalancer"}, nil), answers.Service{}, "type"},
		// One malformed ips or ports entry is left out; the rest answers
		// (a bad port must not take the VIP's A record with it).
		{"bad ip", imp(map[string]any{"type": "ClusterSetIP", "ips": []any{"10.96.0.300", "10.96.0.1"}, "ports": []any{port("http", "TCP", 80)}}, nil),
			answers.Service{Namespace: "demo", Name: "web", Type: answers.ClusterSetIP, IPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")},
				Ports: []answers.Port{{Name: "http", Protocol: "tcp", Port: 80}}}, "skip:not an IP"},
		{"mapped ip", imp(map[string]any{"type": "ClusterSetIP", "ips": []any{"::ffff:10.0.0.1", "10.96.0.1"}}, nil),
			answers.Service{Namespace: "demo", Name: "web", Type: answers.ClusterSetIP, IPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}}, "skip:plain"},
		{"bad port name", imp(map[string]any{"type": "ClusterSetIP", "ips": []any{"10.96.0.1"}, "ports": []any{port("Bad_Name", "TCP", 80), port("http", "TCP", 80)}}, nil),
			answers.Service{Namespace: "demo", Name: "web", Type: answers.ClusterSetIP, IPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")},
				Ports: []answers.Port{{Name: "http", Protocol: "tcp", Port: 80}}}, "skip:port name"},
		{"bad port", imp(map[string]any{"type": "ClusterSetIP", "ips": []any{"10.96.0.1"}, "ports": []any{port("http", "TCP", 0)}}, nil),
			answers.Service{Namespace: "demo", Name: "web", Type: answers.ClusterSetIP, IPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}}, "skip:port"},
		{"bad protocol", imp(map[string]any{"type": "ClusterSetIP", "ips": []any{"10.96.0.1"}, "ports": []any{port("http", "HTTP", 80)}}, nil),
			answers.Service{Namespace: "demo", Name: "web", Type: answers.ClusterSetIP, IPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}}, "skip:protocol"},
		// Port names are DNS labels, as Service port names are: up to 63
		// characters, digits alone, inner "--".
		{"service-style port names", imp(map[string]any{"type": "Headless", "ports": []any{
			port("tcp-prometheus-servicemonitor", "TCP", 9402), port("8443", "TCP", 8443), port("grpc--web", "TCP", 81),
			port(strings.Repeat("p", 63), "UDP", 82)}}, nil),
			answers.Service{Namespace: "demo", Name: "web", Type: answers.Headless, Ports: []answers.Port{
				{Name: "tcp-prometheus-servicemonitor", Protocol: "tcp", Port: 9402}, {Name: "8443", Protocol: "tcp", Port: 8443},
				{Name: "grpc--web", Protocol: "tcp", Port: 81}, {Name: strings.Repeat("p", 63), Protocol: "udp", Port: 82}}}, ""},
		{"port name too long", imp(map[string]any{"type": "Headless", "ports": []any{port(strings.Repeat("p", 64), "TCP", 80)}}, nil),
			answers.Service{Namespace: "demo", Name: "web", Type: answers.Headless}, "skip:port name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ImportFromUnstructured(tt.in, time.Now())
			// The same object as the API sends it, read into a listwatchjson.ServiceImport:
			// the same result.
			b, err := json.Marshal(tt.in.Object)
			require.NoError(t, err)
			var w listwatchjson.ServiceImport
			require.NoError(t, json.Unmarshal(b, &w))
			fromJSON := ImportFromJSON(&w, got.Arrived())
			assert.Equal(t, got.Service, fromJSON.Service)
			assert.Equal(t, got.Meta, fromJSON.Meta)
			assert.Equal(t, got.Err, fromJSON.Err)
			assert.Equal(t, &w, w.DeepCopyObject())
			assert.Equal(t, got.Skips.Skipped(), fromJSON.Skips.Skipped())
			assert.Equal(t, got.Skips.FirstErr(), fromJSON.Skips.FirstErr())
			if skipSub, ok := strings.CutPrefix(tt.errSub, "skip:"); ok {
				require.NoError(t, got.Err)
				assert.Equal(t, 1, got.Skips.Skipped())
				require.Error(t, got.Skips.FirstErr())
				assert.Contains(t, got.Skips.FirstErr().Error(), skipSub)
			} else if tt.errSub != "" {
				require.Error(t, got.Err)
				assert.Contains(t, got.Err.Error(), tt.errSub)
				return
			} else {
				assert.Zero(t, got.Skips.Skipped())
			}
			require.NoError(t, got.Err)
			assert.Equal(t, tt.want, got.Service)
			assert.Equal(t, Meta{Namespace: "demo", Name: "web", ResourceVersion: "7"}, got.Meta, "transform keeps the key and resourceVersion only")
			key, err := cache.MetaNamespaceKeyFunc(got)
			require.NoError(t, err)
			assert.Equal(t, "demo/web", key)
			cp := got.DeepCopyObject().(*Import)
			assert.Equal(t, got.Service, cp.Service)
		})
	}
}

func TestImportBadName(t *testing.T) {
	u := imp(map[string]any{"type": "ClusterSetIP"}, nil)
	u.SetName("a.b")
	assert.Error(t, ImportFromUnstructured(u, time.Now()).Err)
}

func slice(labels map[string]string, at discoveryv1.AddressType, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "db-east", Namespace: "demo", Labels: labels, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		AddressType: at, Endpoints: eps,
	}
}

func labels(id string) map[string]string {
	l := map[string]string{mcsapi.LabelServiceName: "db"}
	if id != "" {
		l[mcsapi.LabelSourceCluster] = id
	}
	return l
}

func TestSliceFromEndpointSlice(t *testing.T) {
	s := SliceFromEndpointSlice(slice(labels("west.eu"), discoveryv1.AddressTypeIPv4,
		discoveryv1.Endpoint{Addresses: []string{"10.1.0.5"}, Hostname: ptr.To("db-0"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
		discoveryv1.Endpoint{Addresses: []string{"10.1.0.6"}}, // nil ready
		discoveryv1.Endpoint{Addresses: []string{"10.1.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
		discoveryv1.Endpoint{Addresses: []string{"10.1.0.999"}},                                // bad IP: skipped
		discoveryv1.Endpoint{Addresses: []string{"fd00::1"}},                                   // wrong family
		discoveryv1.Endpoint{Addresses: []string{"10.1.0.8"}, Hostname: ptr.To("Not_A_Label")}, // bad hostname
		discoveryv1.Endpoint{Addresses: []string{"bad"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
	), time.Now())
	require.NoError(t, s.Err)
	assert.Equal(t, "demo/db", s.ServiceKey())
	assert.Equal(t, "west.eu", s.Slice.ClusterID)
	assert.Equal(t, 4, s.Skips.Skipped(), "malformed endpoints are counted, ready or not")
	assert.Error(t, s.Skips.FirstErr())
	assert.Equal(t, []answers.Endpoint{
		{Addresses: []netip.Addr{netip.MustParseAddr("10.1.0.5")}, Hostname: "db-0"},
		{Addresses: []netip.Addr{netip.MustParseAddr("10.1.0.6")}},
	}, s.Slice.Endpoints, "only ready endpoints are kept")
	assert.Equal(t, Meta{Namespace: "demo", Name: "db-east"}, s.Meta, "only the key and resourceVersion are kept; labels become fields")
	cp := s.DeepCopyObject().(*Slice)
	assert.Equal(t, s.Slice, cp.Slice)
}

// The source-region label becomes the slice's region; one that is not a
// label value is no region, and the slice is served all the same.
func TestSliceRegion(t *testing.T) {
	for label, want := range map[string]string{"eu-west-1": "eu-west-1", "": "", "eu west": "", "-eu": ""} {
		l := labels("east")
		if label != "" {
			l[mcsapi.LabelSourceRegion] = label
		}
		s := SliceFromEndpointSlice(slice(l, discoveryv1.AddressTypeIPv4), time.Now())
		require.NoError(t, s.Err, label)
		assert.Equal(t, want, s.Slice.Region, label)
	}
}

func TestSliceRejected(t *testing.T) {
	for name, es := range map[string]*discoveryv1.EndpointSlice{
		"no source cluster": slice(labels(""), discoveryv1.AddressTypeIPv4),
		"bad cluster id":    slice(labels("East_1"), discoveryv1.AddressTypeIPv4),
		"fqdn":              slice(labels("east"), discoveryv1.AddressTypeFQDN),
		"bad service name":  slice(map[string]string{mcsapi.LabelServiceName: "a.b", mcsapi.LabelSourceCluster: "east"}, discoveryv1.AddressTypeIPv4),
	} {
		t.Run(name, func(t *testing.T) {
			assert.Error(t, SliceFromEndpointSlice(es, time.Now()).Err)
		})
	}
}

// TestDeepCopyEqual: copies are DeepEqual to the original, rejected slices
// included (client-go's cache mutation detector compares them).
func TestDeepCopyEqual(t *testing.T) {
	rejected := SliceFromEndpointSlice(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "demo"}}, time.Now())
	require.Error(t, rejected.Err)
	assert.Equal(t, rejected, rejected.DeepCopyObject())
	got := ImportFromUnstructured(imp(map[string]any{"type": "Headless"}, nil), time.Now())
	assert.Equal(t, got, got.DeepCopyObject())
}

// TestImportFromJSONMalformed: spec or status that is not an object is a
// rejection of that import, not a decoding error of the whole list.
func TestImportFromJSONMalformed(t *testing.T) {
	var w listwatchjson.ServiceImport
	require.NoError(t, json.Unmarshal([]byte(`{"metadata":{"name":"web","namespace":"demo"},"spec":"oops","status":{"type":"ClusterSetIP"}}`), &w))
	got := ImportFromJSON(&w, time.Now())
	require.Error(t, got.Err)
	assert.Contains(t, got.Err.Error(), "spec is not an object")
	var list listwatchjson.ServiceImportList
	require.NoError(t, json.Unmarshal([]byte(`{"metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"},"spec":[1]}]}`), &list))
	assert.Len(t, list.Items, 2)
	assert.Equal(t, &list, list.DeepCopyObject())
}

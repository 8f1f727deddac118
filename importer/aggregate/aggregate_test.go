package aggregate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/slicedigest"
	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type exp struct {
	cluster string
	age     int // seconds after t0 the export was created
	svc     func(*corev1.Service)
	noSvc   bool
	labels  map[string]string
	annos   map[string]string
}

func tcp(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, Protocol: corev1.ProtocolTCP}
}

func mk(e exp) Export {
	x := Export{
		ClusterID: e.cluster,
		Export: &mcsv1beta1.ServiceExport{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: 1,
				CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(e.age) * time.Second))},
			Spec: mcsv1beta1.ServiceExportSpec{ExportedLabels: e.labels, ExportedAnnotations: e.annos},
		},
	}
	if !e.noSvc {
		x.Service = &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
			Spec: corev1.ServiceSpec{
				Type:            corev1.ServiceTypeClusterIP,
				ClusterIP:       "10.0.0.1",
				Ports:           []corev1.ServicePort{tcp("http", 80)},
				SessionAffinity: corev1.ServiceAffinityNone,
				IPFamilies:      []corev1.IPFamily{corev1.IPv4Protocol},
			},
		}
		if e.svc != nil {
			e.svc(x.Service)
		}
	}
	return x
}

func compute(es ...exp) Result {
	in := Input{Namespace: "ns", Name: "web"}
	for _, e := range es {
		in.Exports = append(in.Exports, mk(e))
	}
	return Compute(in)
}

func headless(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }

func TestConflicts(t *testing.T) {
	itpLocal := corev1.ServiceInternalTrafficPolicyLocal
	td := "PreferClose"
	cases := []struct {
		name      string
		exports   []exp
		conflicts string // "" = NoConflicts
		check     func(t *testing.T, r Result)
	}{
		{name: "single export", exports: []exp{{cluster: "a"}}},
		{name: "identical exports", exports: []exp{{cluster: "a"}, {cluster: "b", age: 1}}},
		{name: "same ports in another order", exports: []exp{
			{cluster: "a", svc: func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{tcp("http", 80), tcp("https", 443)} }},
			{cluster: "b", age: 1, svc: func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{tcp("https", 443), tcp("http", 80)} }},
		}},
		{name: "a port only one export has: union, PortConflict on both", conflicts: "PortConflict",
			exports: []exp{
				{cluster: "a"},
				{cluster: "b", age: 1, svc: func(s *corev1.Service) { s.Spec.Ports = append(s.Spec.Ports, tcp("https", 443)) }},
			},
			check: func(t *testing.T, r Result) {
				assert.Equal(t, []mcsv1beta1.ServicePort{
					{Name: "http", Protocol: "TCP", Port: 80}, {Name: "https", Protocol: "TCP", Port: 443},
				}, r.Import.Spec.Ports)
			}},
		{name: "port defined differently: oldest wins", conflicts: "PortConflict",
			exports: []exp{
				{cluster: "b", age: 5, svc: func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{tcp("http", 8080)} }},
				{cluster: "a", age: 1},
			},
			check: func(t *testing.T, r Result) {
				assert.Equal(t, "a", r.Winner)
				assert.Equal(t, []mcsv1beta1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}, r.Import.Spec.Ports)
			}},
		{name: "same number, different name: oldest wins", conflicts: "PortConflict",
			exports: []exp{
				{cluster: "a"},
				{cluster: "b", age: 1, svc: func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{tcp("web", 80)} }},
			},
			check: func(t *testing.T, r Result) {
				assert.Equal(t, []mcsv1beta1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}, r.Import.Spec.Ports)
			}},
		{name: "same number, other protocol is another port", conflicts: "PortConflict",
			exports: []exp{
				{cluster: "a", svc: func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{tcp("", 53)} }},
				{cluster: "b", age: 1, svc: func(s *corev1.Service) {
					s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}
				}},
			},
			check: func(t *testing.T, r Result) {
				assert.Equal(t, []mcsv1beta1.ServicePort{{Protocol: "TCP", Port: 53}, {Name: "dns", Protocol: "UDP", Port: 53}}, r.Import.Spec.Ports)
			}},
		{name: "appProtocol differs", conflicts: "PortConflict",
			exports: []exp{
				{cluster: "a"},
				{cluster: "b", age: 1, svc: func(s *corev1.Service) { s.Spec.Ports[0].AppProtocol = ptr.To("http2") }},
			},
			check: func(t *testing.T, r Result) { assert.Nil(t, r.Import.Spec.Ports[0].AppProtocol) }},
		{name: "tie on creation time: lower cluster ID wins", conflicts: "PortConflict",
			exports: []exp{
				{cluster: "b", svc: func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{tcp("http", 8080)} }},
				{cluster: "a"},
			},
			check: func(t *testing.T, r Result) {
				assert.Equal(t, "a", r.Winner)
				assert.Equal(t, int32(80), r.Import.Spec.Ports[0].Port)
			}},
		{name: "all headless", exports: []exp{{cluster: "a", svc: headless}, {cluster: "b", age: 1, svc: headless}},
			check: func(t *testing.T, r Result) { assert.Equal(t, mcsv1beta1.Headless, r.Import.Spec.Type) }},
		{name: "headless oldest, ClusterIP newer: the oldest decides, Headless", conflicts: "TypeConflict",
			exports: []exp{{cluster: "a", svc: headless}, {cluster: "b", age: 1}},
			check:   func(t *testing.T, r Result) { assert.Equal(t, mcsv1beta1.Headless, r.Import.Spec.Type) }},
		{name: "ClusterIP oldest, headless newer: the oldest decides, ClusterSetIP", conflicts: "TypeConflict",
			exports: []exp{{cluster: "a", age: 1, svc: headless}, {cluster: "b"}},
			check:   func(t *testing.T, r Result) { assert.Equal(t, mcsv1beta1.ClusterSetIP, r.Import.Spec.Type) }},
		{name: "session affinity of the oldest, ClientIP", conflicts: "SessionAffinityConflict",
			exports: []exp{{cluster: "a", age: 1}, {cluster: "b", svc: func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }}},
			check: func(t *testing.T, r Result) {
				assert.Equal(t, corev1.ServiceAffinityClientIP, r.Import.Spec.SessionAffinity)
			}},
		{name: "session affinity", conflicts: "SessionAffinityConflict",
			exports: []exp{{cluster: "a"}, {cluster: "b", age: 1, svc: func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }}},
			check: func(t *testing.T, r Result) {
				assert.Equal(t, corev1.ServiceAffinityNone, r.Import.Spec.SessionAffinity)
			}},
		{name: "session affinity config", conflicts: "SessionAffinityConfigConflict",
			exports: []exp{
				{cluster: "a", svc: func(s *corev1.Service) {
					s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10)}}
				}},
				{cluster: "b", age: 1, svc: func(s *corev1.Service) {
					s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](20)}}
				}},
			},
			check: func(t *testing.T, r Result) {
				assert.Equal(t, int32(10), *r.Import.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds)
			}},
		{name: "exported labels", conflicts: "LabelsConflict",
			exports: []exp{{cluster: "a", age: 2, labels: map[string]string{"x": "1"}}, {cluster: "b", age: 1, labels: map[string]string{"x": "2"}}},
			check: func(t *testing.T, r Result) {
				assert.Equal(t, map[string]string{"x": "2", mcsapi.LabelManagedBy: mcsapi.ManagedByImporter}, r.Import.Labels)
			}},
		{name: "exported annotations", conflicts: "AnnotationsConflict",
			exports: []exp{{cluster: "a", annos: map[string]string{"y": "1"}}, {cluster: "b", age: 1}},
			check: func(t *testing.T, r Result) {
				assert.Equal(t, map[string]string{"y": "1"}, r.Import.Annotations)
			}},
		{name: "nil and empty exported labels agree", exports: []exp{{cluster: "a", labels: map[string]string{}}, {cluster: "b", age: 1}}},
		{name: "internal traffic policy", conflicts: "InternalTrafficPolicyConflict",
			exports: []exp{{cluster: "a", svc: func(s *corev1.Service) { s.Spec.InternalTrafficPolicy = &itpLocal }}, {cluster: "b", age: 1}},
			check: func(t *testing.T, r Result) {
				assert.Equal(t, itpLocal, *r.Import.Spec.InternalTrafficPolicy)
			}},
		{name: "traffic distribution", conflicts: "TrafficDistributionConflict",
			exports: []exp{{cluster: "a"}, {cluster: "b", age: 1, svc: func(s *corev1.Service) { s.Spec.TrafficDistribution = &td }}},
			check:   func(t *testing.T, r Result) { assert.Nil(t, r.Import.Spec.TrafficDistribution) }},
		{name: "ip families", conflicts: "IPFamilyConflict",
			exports: []exp{{cluster: "a"}, {cluster: "b", age: 1, svc: func(s *corev1.Service) {
				s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
			}}},
			check: func(t *testing.T, r Result) {
				assert.Equal(t, []corev1.IPFamily{corev1.IPv4Protocol}, r.Import.Spec.IPFamilies)
			}},
		{name: "several conflicts are comma-joined in a fixed order", conflicts: "PortConflict,TypeConflict,LabelsConflict",
			exports: []exp{
				{cluster: "a", labels: map[string]string{"x": "1"}},
				{cluster: "b", age: 1, svc: func(s *corev1.Service) { headless(s); s.Spec.Ports = nil }},
			}},
		{name: "three exports, the odd one out raises the conflict on all", conflicts: "PortConflict",
			exports: []exp{{cluster: "a"}, {cluster: "b", age: 1}, {cluster: "c", age: 2, svc: func(s *corev1.Service) { s.Spec.Ports[0].Port = 81 }}}},
		{name: "an invalid export takes no part in conflicts", exports: []exp{
			{cluster: "a"},
			{cluster: "b", age: -1, svc: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName; s.Spec.Ports = nil }},
		}, check: func(t *testing.T, r Result) {
			assert.Equal(t, "a", r.Winner)
			assert.False(t, r.Exports[1].Valid)
			assert.Equal(t, []mcsv1beta1.ClusterStatus{{Cluster: "a"}}, r.Import.Status.Clusters)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := compute(tc.exports...)
			require.NotNil(t, r.Import)
			assert.Equal(t, tc.conflicts, strings.Join(r.Conflicts, ","))
			for i, e := range r.Exports {
				c := e.ConflictCondition
				assert.Equal(t, "Conflict", c.Type)
				switch {
				case !e.Valid || tc.conflicts == "":
					assert.Equal(t, metav1.ConditionFalse, c.Status, "export %d", i)
					assert.Equal(t, "NoConflicts", c.Reason, "export %d", i)
				default:
					// Every export involved, the oldest included.
					assert.Equal(t, metav1.ConditionTrue, c.Status, "export %d", i)
					assert.Equal(t, tc.conflicts, c.Reason, "export %d", i)
				}
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

func TestValidity(t *testing.T) {
	cases := []struct {
		name   string
		e      exp
		valid  bool
		reason string
	}{
		{"ClusterIP", exp{cluster: "a"}, true, "Valid"},
		{"headless", exp{cluster: "a", svc: headless}, true, "Valid"},
		{"NodePort", exp{cluster: "a", svc: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }}, true, "Valid"},
		{"LoadBalancer", exp{cluster: "a", svc: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }}, true, "Valid"},
		{"no Service", exp{cluster: "a", noSvc: true}, false, "NoService"},
		{"ExternalName", exp{cluster: "a", svc: func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName }}, false, "InvalidServiceType"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := compute(tc.e)
			e := r.Exports[0]
			assert.Equal(t, tc.valid, e.Valid)
			assert.Equal(t, "Valid", e.ValidCondition.Type)
			assert.Equal(t, tc.reason, e.ValidCondition.Reason)
			assert.Equal(t, map[bool]metav1.ConditionStatus{true: "True", false: "False"}[tc.valid], e.ValidCondition.Status)
			if tc.valid {
				require.NotNil(t, r.Import)
			} else {
				assert.Nil(t, r.Import, "no valid export, no import")
				assert.Empty(t, r.Slices, "an invalid export's endpoints are withdrawn")
				ready := ReadyCondition(false, 0, nil, nil)
				assert.Equal(t, metav1.ConditionFalse, ready.Status)
			}
		})
	}
}

func TestNoExports(t *testing.T) {
	r := Compute(Input{Namespace: "ns", Name: "web"})
	assert.Nil(t, r.Import)
	assert.Empty(t, r.Slices)
	assert.Empty(t, r.Exports)
}

func TestImportFields(t *testing.T) {
	itp := corev1.ServiceInternalTrafficPolicyCluster
	td := "PreferClose"
	in := Input{Namespace: "ns", Name: "web"}
	a := mk(exp{cluster: "b", labels: map[string]string{"team": "x", mcsapi.LabelManagedBy: "someone"}, annos: map[string]string{"note": "n"}, svc: func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, AppProtocol: ptr.To("http")}, {Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](30)}}
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
		s.Spec.InternalTrafficPolicy = &itp
		s.Spec.TrafficDistribution = &td
	}})
	b := mk(exp{cluster: "a", age: 1, labels: map[string]string{"team": "x", mcsapi.LabelManagedBy: "someone"}, annos: map[string]string{"note": "n"}})
	b.Service = a.Service.DeepCopy()
	in.Exports = []Export{a, b}
	r := Compute(in)
	require.NotNil(t, r.Import)
	assert.Empty(t, r.Conflicts)
	imp := r.Import
	assert.Equal(t, "ns", imp.Namespace)
	assert.Equal(t, "web", imp.Name)
	assert.Equal(t, map[string]string{"team": "x", mcsapi.LabelManagedBy: mcsapi.ManagedByImporter}, imp.Labels, "our managed-by label always wins")
	assert.Equal(t, map[string]string{"note": "n"}, imp.Annotations)
	assert.Equal(t, mcsv1beta1.ServiceImportSpec{
		Ports:                 []mcsv1beta1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80, AppProtocol: ptr.To("http")}, {Name: "dns", Protocol: "UDP", Port: 53}},
		Type:                  mcsv1beta1.ClusterSetIP,
		SessionAffinity:       corev1.ServiceAffinityClientIP,
		SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](30)}},
		IPFamilies:            []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol},
		InternalTrafficPolicy: &itp,
		TrafficDistribution:   &td,
	}, imp.Spec)
	assert.Empty(t, imp.Spec.IPs, "ClusterSetIP imports get no ips from the aggregate")
	assert.Equal(t, []mcsv1beta1.ClusterStatus{{Cluster: "a"}, {Cluster: "b"}}, imp.Status.Clusters)
	assert.Equal(t, mcsv1beta1.EndpointSliceObjectsPresent, imp.Status.EndpointSliceObjects)
	// The aggregate does not alias its input.
	a.Service.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = ptr.To[int32](1)
	in.Exports[0].Export.Spec.ExportedAnnotations["note"] = "changed"
	assert.Equal(t, int32(30), *imp.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds)
	assert.Equal(t, "n", imp.Annotations["note"])
}

func TestReadyCondition(t *testing.T) {
	c := ReadyCondition(true, 3, nil, nil)
	assert.Equal(t, metav1.Condition{Type: "Ready", Status: "True", Reason: "Exported",
		Message: "imported in all 3 member cluster(s) that have the namespace"}, c)
	c = ReadyCondition(true, 1, []string{"west", "north"}, nil)
	assert.Equal(t, "Pending", c.Reason)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, "imported in 1 of 3 member cluster(s); waiting for the ServiceImport in west, north", c.Message)
	c = ReadyCondition(true, 1, []string{"west"}, []string{"north: ServiceImport ns/web", "east: EndpointSlice ns/web-x, Service ns/derived-y"})
	assert.Equal(t, "Failed", c.Reason)
	assert.Contains(t, c.Message, "north: ServiceImport ns/web; east: EndpointSlice ns/web-x, Service ns/derived-y")
	c = ReadyCondition(false, 0, nil, nil)
	assert.Equal(t, "Failed", c.Reason)
}

func TestMergeConditions(t *testing.T) {
	then := metav1.NewTime(t0)
	now := metav1.NewTime(t0.Add(time.Hour))
	existing := []metav1.Condition{
		{Type: "Valid", Status: "True", Reason: "Valid", Message: "Service is exportable", ObservedGeneration: 1, LastTransitionTime: then},
		{Type: "Other", Status: "True", Reason: "Theirs", LastTransitionTime: then},
	}
	valid := metav1.Condition{Type: "Valid", Status: "True", Reason: "Valid", Message: "Service is exportable"}

	// Unchanged: nothing moves, so nothing is written.
	out := MergeConditions(existing, 1, now, valid)
	assert.True(t, ConditionsEqual(existing, out))

	// A new generation: observedGeneration moves, lastTransitionTime does not.
	out = MergeConditions(existing, 2, now, valid)
	assert.False(t, ConditionsEqual(existing, out))
	got := meta.FindStatusCondition(out, "Valid")
	assert.Equal(t, int64(2), got.ObservedGeneration)
	assert.Equal(t, then, got.LastTransitionTime)

	// A status change moves lastTransitionTime.
	out = MergeConditions(existing, 1, now, metav1.Condition{Type: "Valid", Status: "False", Reason: "NoService"})
	got = meta.FindStatusCondition(out, "Valid")
	assert.Equal(t, now, got.LastTransitionTime)
	assert.Equal(t, "NoService", got.Reason)

	// A reason change alone keeps lastTransitionTime.
	out = MergeConditions(existing, 1, now, metav1.Condition{Type: "Valid", Status: "True", Reason: "Other"})
	assert.Equal(t, then, meta.FindStatusCondition(out, "Valid").LastTransitionTime)

	// New conditions are added; other types are kept; existing is untouched.
	out = MergeConditions(existing, 1, now, metav1.Condition{Type: "Ready", Status: "False", Reason: "Pending"})
	assert.Len(t, out, 3)
	assert.Equal(t, now, meta.FindStatusCondition(out, "Ready").LastTransitionTime)
	assert.NotNil(t, meta.FindStatusCondition(out, "Other"))
	assert.Len(t, existing, 2)

	// Times compare at the API's second precision.
	a := []metav1.Condition{{Type: "X", LastTransitionTime: metav1.NewTime(t0.Add(300 * time.Millisecond))}}
	b := []metav1.Condition{{Type: "X", LastTransitionTime: metav1.NewTime(t0)}}
	assert.True(t, ConditionsEqual(a, b))
}

func TestSpecEqual(t *testing.T) {
	r := compute(exp{cluster: "a"})
	cp := r.Import.DeepCopy()
	assert.True(t, ImportMetaSpecUpToDate(r.Import, cp))
	cp.Spec.Ports = append(cp.Spec.Ports, mcsv1beta1.ServicePort{Port: 1})
	assert.False(t, ImportMetaSpecUpToDate(r.Import, cp))
	cp = r.Import.DeepCopy()
	cp.Labels["extra"] = "x"
	assert.False(t, ImportMetaSpecUpToDate(r.Import, cp))
	cp = r.Import.DeepCopy()
	cp.Spec.IPs = []string{"1.2.3.4"}
	assert.False(t, ImportMetaSpecUpToDate(r.Import, cp))
	cp = r.Import.DeepCopy()
	cp.Spec.IPFamilies = nil
	assert.False(t, ImportMetaSpecUpToDate(r.Import, cp))
}

func eslice(name string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   eps,
	}
}

func TestMirroredSlices(t *testing.T) {
	a := mk(exp{cluster: "east"})
	a.Slices = []*discoveryv1.EndpointSlice{
		eslice("web-abcde", discoveryv1.Endpoint{
			Addresses:  []string{"10.1.0.1"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			Hostname:   ptr.To("web-0"),
			NodeName:   ptr.To("node-1"),
			Zone:       ptr.To("z1"),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: "web-0"},
			Hints:      &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "z1"}}},
		}),
		eslice("web-empty"),
	}
	b := mk(exp{cluster: "west", age: 1})
	b.Slices = []*discoveryv1.EndpointSlice{eslice("web-abcde", discoveryv1.Endpoint{Addresses: []string{"10.2.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}})}
	gone := eslice("web-gone")
	gone.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	b.Slices = append(b.Slices, gone)
	fqdn := eslice("web-fqdn", discoveryv1.Endpoint{Addresses: []string{"db.example.com"}})
	fqdn.AddressType = discoveryv1.AddressTypeFQDN
	b.Slices = append(b.Slices, fqdn)
	v6 := eslice("web-v6", discoveryv1.Endpoint{Addresses: []string{"fd00::1"}})
	v6.AddressType = discoveryv1.AddressTypeIPv6
	b.Slices = append(b.Slices, v6)
	invalid := mk(exp{cluster: "north", noSvc: true})
	invalid.Slices = []*discoveryv1.EndpointSlice{eslice("web-zzz", discoveryv1.Endpoint{Addresses: []string{"10.3.0.1"}})}

	r := Compute(Input{Namespace: "ns", Name: "web", Exports: []Export{a, b, invalid}})
	require.Len(t, r.Slices, 4, "one mirror per IP source slice of each valid export, empty slices included")
	byName := map[string]*discoveryv1.EndpointSlice{}
	for _, s := range r.Slices {
		byName[s.Name] = s
		assert.Equal(t, "ns", s.Namespace)
	}
	east := byName[SliceName("web", "east", "web-abcde")]
	require.NotNil(t, east)
	assert.Equal(t, map[string]string{
		"multicluster.kubernetes.io/service-name":   "web",
		"multicluster.kubernetes.io/source-cluster": "east",
		"endpointslice.kubernetes.io/managed-by":    "mcs-importer.mcs-dns.io",
		"mcs-dns.io/source-managed-by":              "endpointslice-controller.k8s.io",
	}, east.Labels)
	assert.Equal(t, discoveryv1.AddressTypeIPv4, east.AddressType)
	assert.Equal(t, a.Slices[0].Ports, east.Ports)
	assert.Equal(t, []discoveryv1.Endpoint{{
		Addresses:  []string{"10.1.0.1"},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
		Hostname:   ptr.To("web-0"),
		Zone:       ptr.To("z1"),
	}}, east.Endpoints, "nodeName, targetRef and hints point into the source cluster and are dropped")
	west := byName[SliceName("web", "west", "web-abcde")]
	require.NotNil(t, west, "same source name in two clusters: two mirrors")
	assert.Equal(t, "west", west.Labels[mcsapi.LabelSourceCluster])
	assert.False(t, *west.Endpoints[0].Conditions.Ready)
	assert.NotNil(t, byName[SliceName("web", "east", "web-empty")])
	if v6m := byName[SliceName("web", "west", "web-v6")]; assert.NotNil(t, v6m) {
		assert.Equal(t, discoveryv1.AddressTypeIPv6, v6m.AddressType)
	}
	assert.Nil(t, byName[SliceName("web", "west", "web-fqdn")], "FQDN slices are not mirrored")

	assert.True(t, SliceUpToDate(east, east.DeepCopy()))
	changed := east.DeepCopy()
	changed.Endpoints[0].Conditions.Ready = ptr.To(false)
	assert.False(t, SliceUpToDate(east, changed))
	changed = east.DeepCopy()
	changed.Labels["x"] = "y"
	assert.True(t, SliceUpToDate(east, changed), "a label someone else added is theirs")
	changed = east.DeepCopy()
	changed.Labels[mcsapi.LabelSourceCluster] = "elsewhere"
	assert.False(t, SliceUpToDate(east, changed))
	empty := byName[SliceName("web", "east", "web-empty")]
	emptyActual := empty.DeepCopy()
	emptyActual.Endpoints = []discoveryv1.Endpoint{}
	assert.True(t, SliceUpToDate(empty, emptyActual), "nil and empty lists compare equal")
}

func TestSliceName(t *testing.T) {
	n := SliceName("web", "east", "web-abcde")
	assert.Equal(t, n, SliceName("web", "east", "web-abcde"), "deterministic")
	assert.NotEqual(t, n, SliceName("web", "west", "web-abcde"))
	assert.NotEqual(t, n, SliceName("web", "east", "web-fghij"))
	assert.Regexp(t, `^web-[0-9a-f]{10}$`, n)
	// The cluster/slice boundary is part of the hash input.
	assert.NotEqual(t, SliceName("s", "a", "b-c"), SliceName("s", "a-b", "c"))

	long := strings.Repeat("a", 62) + "b"
	n = SliceName(long, "east", "x")
	assert.LessOrEqual(t, len(n), 63)
	assert.Empty(t, validation.IsDNS1123Label(n))
	assert.True(t, strings.HasPrefix(n, strings.Repeat("a", 52)+"-"))
	// Cutting never leaves a dash before the hash's own dash.
	n = SliceName(strings.Repeat("a", 51)+"-"+strings.Repeat("b", 11), "east", "x")
	assert.Empty(t, validation.IsDNS1123Label(n), n)
	assert.NotContains(t, n, "--")
}

// Opt-in to a clusterset-wide VIP (--vip-mode=clusterset-cidr): the
// export's annotation overrides the default, the oldest export decides, and
// disagreeing exports all get ClusterSetIPConflict.
func TestClusterSetIPOptIn(t *testing.T) {
	optIn := func(v string) func(*Export) {
		return func(e *Export) {
			e.Export.Annotations = map[string]string{mcsapi.AnnotationUseClusterSetIP: v}
		}
	}
	run := func(def *bool, mods ...func(*Export)) Result {
		in := Input{Namespace: "ns", Name: "web"}
		if def != nil { // clusterset-cidr mode, with its policy
			in.WantsClusterSetIP = func(e *mcsv1beta1.ServiceExport) bool { return vip.OptIn(e, *def) }
		}
		for i, m := range mods {
			e := mk(exp{cluster: string(rune('a' + i)), age: i})
			if m != nil {
				m(&e)
			}
			in.Exports = append(in.Exports, e)
		}
		return Compute(in)
	}
	yes, no := true, false
	uses := func(r Result) bool { return r.Import.Annotations[mcsapi.AnnotationUseClusterSetIP] == "true" }

	r := run(nil, optIn("true"))
	assert.False(t, uses(r), "derived-service mode ignores the annotation")
	assert.Empty(t, r.Conflicts)

	r = run(&no, nil)
	assert.False(t, uses(r))
	r = run(&no, optIn("true"))
	assert.True(t, uses(r), "the annotation opts in")
	r = run(&yes, nil)
	assert.True(t, uses(r), "the default opts in")
	r = run(&yes, optIn("false"))
	assert.False(t, uses(r), "the annotation overrides the default")
	assert.Nil(t, r.Import.Annotations)

	r = run(&no, optIn("true"), nil)
	assert.True(t, uses(r), "the oldest decides")
	assert.Equal(t, []string{string(ReasonClusterSetIPConflict)}, r.Conflicts)
	for _, e := range r.Exports {
		assert.Equal(t, metav1.ConditionTrue, e.ConflictCondition.Status, e.ClusterID)
		assert.Equal(t, string(ReasonClusterSetIPConflict), e.ConflictCondition.Reason)
	}
	r = run(&yes, nil, optIn("true"))
	assert.Empty(t, r.Conflicts, "explicit and default agree")
}

// TestExportedMetaFiltered: what an export asks for on the import but the
// API server would reject, or mcs-importer owns, is left out (and said in
// the Valid message); the rest is copied.
func TestExportedMetaFiltered(t *testing.T) {
	r := compute(exp{cluster: "east",
		labels: map[string]string{"team": "a", "bad key!": "x", "tier": "has space",
			mcsapi.LabelManagedBy: "someone-else", "mcs-dns.io/anything": "x"},
		annos: map[string]string{"note": "kept", mcsapi.AnnotationClusterSetIP: "10.255.0.9",
			mcsapi.AnnotationUseClusterSetIP: "true", mcsapi.AnnotationDerivedService: "kube-dns",
			"sub.mcs-dns.io/x": "y", "Bad/Key/": "v"},
	})
	require.NotNil(t, r.Import)
	assert.Equal(t, map[string]string{"team": "a", mcsapi.LabelManagedBy: mcsapi.ManagedByImporter}, r.Import.Labels)
	assert.Equal(t, map[string]string{"note": "kept"}, r.Import.Annotations, "no forged VIP claim, opt-in or derived Service")
	require.True(t, r.Exports[0].Valid, "the export itself stays valid")
	msg := r.Exports[0].ValidCondition.Message
	assert.True(t, strings.HasPrefix(msg, "Service is exportable; not copied to the ServiceImport: "), msg)
	for _, k := range []string{"bad key!", mcsapi.LabelManagedBy, "mcs-dns.io/anything", mcsapi.AnnotationClusterSetIP, mcsapi.AnnotationDerivedService, "Bad/Key/"} {
		assert.Contains(t, msg, `"`+k+`"`)
	}
	assert.Contains(t, msg, "and 1 more", "at most 8 listed")
	// The message does not depend on map order (no status flapping).
	for range 20 {
		assert.Equal(t, msg, compute(exp{cluster: "east", labels: map[string]string{"team": "a", "bad key!": "x", "tier": "has space",
			mcsapi.LabelManagedBy: "someone-else", "mcs-dns.io/anything": "x"},
			annos: map[string]string{"note": "kept", mcsapi.AnnotationClusterSetIP: "10.255.0.9",
				mcsapi.AnnotationUseClusterSetIP: "true", mcsapi.AnnotationDerivedService: "kube-dns",
				"sub.mcs-dns.io/x": "y", "Bad/Key/": "v"}}).Exports[0].ValidCondition.Message)
	}

	// Annotations larger than the API server takes in all: none copied.
	r = compute(exp{cluster: "east", annos: map[string]string{"a": strings.Repeat("x", 200<<10), "b": strings.Repeat("y", 100<<10)}})
	require.NotNil(t, r.Import)
	assert.Empty(t, r.Import.Annotations)
	assert.Contains(t, r.Exports[0].ValidCondition.Message, "larger than")

	// Keys the schema accepts whatever their length: each is cut in the
	// message, which stays far below the CRD's 32,768 characters.
	long := map[string]string{}
	for i := range 12 {
		long[fmt.Sprintf("%d%s", i, strings.Repeat("k", 40000))] = "v"
	}
	r = compute(exp{cluster: "east", labels: long, annos: long})
	msg = r.Exports[0].ValidCondition.Message
	assert.Less(t, len(msg), 2048, msg)
	assert.Contains(t, msg, "kkk...", "keys cut, and say so")

	// Clean metadata: the message is the plain one.
	r = compute(exp{cluster: "east", labels: map[string]string{"team": "a"}})
	assert.Equal(t, "Service is exportable", r.Exports[0].ValidCondition.Message)
}

// TestMirroredPortsRenamed: proxies match a slice's ports to the import's
// by name; where an export names a port the import (the oldest export)
// names otherwise, its mirrored slices carry the import's name.
func TestMirroredPortsRenamed(t *testing.T) {
	slice := func(e *Export, port string) {
		e.Slices = []*discoveryv1.EndpointSlice{{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "web-" + e.ClusterID},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &port, Port: ptr.To[int32](8080)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}}},
		}}
	}
	in := Input{Namespace: "ns", Name: "web", Exports: []Export{
		mk(exp{cluster: "east", svc: func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{tcp("", 80)} }}),
		mk(exp{cluster: "west", age: 5, svc: func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{tcp("http", 80), tcp("metrics", 9090)} }}),
		mk(exp{cluster: "north", age: 9, svc: func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{tcp("", 80)} }}),
	}}
	slice(&in.Exports[0], "")
	slice(&in.Exports[1], "http")
	in.Exports[1].Slices[0].Ports = append(in.Exports[1].Slices[0].Ports, discoveryv1.EndpointPort{Name: ptr.To("metrics"), Port: ptr.To[int32](9090)})
	slice(&in.Exports[2], "")
	r := Compute(in)
	require.NotNil(t, r.Import)
	var names []string
	for _, p := range r.Import.Spec.Ports {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"", "metrics"}, names)
	got := map[string][]string{}
	for _, s := range r.Slices {
		for _, p := range s.Ports {
			got[s.Labels[mcsapi.LabelSourceCluster]] = append(got[s.Labels[mcsapi.LabelSourceCluster]], *p.Name)
		}
	}
	assert.Equal(t, map[string][]string{"east": {""}, "west": {"", "metrics"}, "north": {""}}, got,
		"west's 'http' is the import's unnamed port 80; 'metrics' stays")
	assert.Equal(t, "http", *in.Exports[1].Slices[0].Ports[0].Name, "the source slice is not modified")

	// A rename never gives a slice two ports of one name: the oldest has
	// b:80 and c:81, west a:80 and b:81; west's b is routed by its name,
	// so its a (port 80, the import's b) is not renamed b, and since it
	// names no port of the import it is left out of the mirror.
	in = Input{Namespace: "ns", Name: "web", Exports: []Export{
		mk(exp{cluster: "east", svc: func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{tcp("b", 80), tcp("c", 81)} }}),
		mk(exp{cluster: "west", age: 5, svc: func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{tcp("a", 80), tcp("b", 81)} }}),
	}}
	slice(&in.Exports[1], "a")
	in.Exports[1].Slices[0].Ports = append(in.Exports[1].Slices[0].Ports, discoveryv1.EndpointPort{Name: ptr.To("b"), Port: ptr.To[int32](9081)})
	r = Compute(in)
	require.Len(t, r.Slices, 1)
	require.Len(t, r.Slices[0].Ports, 1)
	assert.Equal(t, "b", *r.Slices[0].Ports[0].Name)
	assert.Equal(t, int32(9081), *r.Slices[0].Ports[0].Port)

	// A source slice port the exporting Service does not name (a
	// hand-made slice) carries no traffic there and is left out: kept, it
	// would collide with west's "http" renamed to the import's "web"
	// (two ports of one name: the API would refuse the mirror, and with
	// it every write of the import).
	in = Input{Namespace: "ns", Name: "web", Exports: []Export{
		mk(exp{cluster: "east", svc: func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{tcp("web", 80)} }}),
		mk(exp{cluster: "west", age: 5, svc: func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{tcp("http", 80)} }}),
	}}
	slice(&in.Exports[1], "http")
	in.Exports[1].Slices[0].Ports = append(in.Exports[1].Slices[0].Ports, discoveryv1.EndpointPort{Name: ptr.To("web"), Port: ptr.To[int32](9090)})
	r = Compute(in)
	require.Len(t, r.Slices, 1)
	require.Len(t, r.Slices[0].Ports, 1, "one port named web")
	assert.Equal(t, "web", *r.Slices[0].Ports[0].Name)
	assert.Equal(t, int32(8080), *r.Slices[0].Ports[0].Port, "west's http, renamed")

	// A port without a name (nil) is renamed like "".
	in = Input{Namespace: "ns", Name: "web", Exports: []Export{
		mk(exp{cluster: "east", svc: func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{tcp("http", 80)} }}),
		mk(exp{cluster: "west", age: 5, svc: func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{tcp("", 80)} }}),
	}}
	slice(&in.Exports[1], "")
	in.Exports[1].Slices[0].Ports[0].Name = nil
	r = Compute(in)
	require.Len(t, r.Slices, 1)
	require.NotNil(t, r.Slices[0].Ports[0].Name)
	assert.Equal(t, "http", *r.Slices[0].Ports[0].Name)
	assert.Nil(t, in.Exports[1].Slices[0].Ports[0].Name, "the source slice is not modified")
}

// TestFilteredMetaNoConflict: exports that differ only in entries never
// copied to the import (reserved, invalid) do not conflict.
func TestFilteredMetaNoConflict(t *testing.T) {
	r := compute(
		exp{cluster: "east", labels: map[string]string{"team": "a"}, annos: map[string]string{"note": "x"}},
		exp{cluster: "west", age: 5, labels: map[string]string{"team": "a", "bad key!": "x"},
			annos: map[string]string{"note": "x", mcsapi.AnnotationClusterSetIP: "10.255.0.1"}},
	)
	require.NotNil(t, r.Import)
	assert.Empty(t, r.Conflicts)
	// Near the API server's limit: room is kept for what mcs-importer adds.
	r = compute(exp{cluster: "east", annos: map[string]string{"big": strings.Repeat("x", 256<<10-100)}})
	assert.Empty(t, r.Import.Annotations)
}

// Mirrored addresses are canonical: a source cluster may hold IPv4
// addresses with leading zeros (accepted before Kubernetes 1.36, read as
// decimal), which newer importing clusters refuse; other families and
// non-addresses are dropped, and an endpoint left without an address too.
func TestMirroredAddressesCanonical(t *testing.T) {
	e := mk(exp{cluster: "east"})
	e.Slices = []*discoveryv1.EndpointSlice{eslice("web-a",
		discoveryv1.Endpoint{Addresses: []string{"010.001.002.004"}},
		discoveryv1.Endpoint{Addresses: []string{"10.1.2.3", "010.1.2.3"}},
		discoveryv1.Endpoint{Addresses: []string{"fd00::1"}},
		discoveryv1.Endpoint{Addresses: []string{"not-an-ip"}},
	)}
	v6 := eslice("web-b", discoveryv1.Endpoint{Addresses: []string{"FD00:0::2", "10.0.0.9"}})
	v6.AddressType = discoveryv1.AddressTypeIPv6
	e.Slices = append(e.Slices, v6)
	r := Compute(Input{Namespace: "ns", Name: "web", Exports: []Export{e}})
	got := map[string][][]string{}
	for _, s := range r.Slices {
		for _, ep := range s.Endpoints {
			got[string(s.AddressType)] = append(got[string(s.AddressType)], ep.Addresses)
		}
	}
	assert.Equal(t, map[string][][]string{
		"IPv4": {{"10.1.2.4"}, {"10.1.2.3"}},
		"IPv6": {{"fd00::2"}},
	}, got)
}

// The importer's caches hold mirrored slices slim (endpoints replaced by
// their digest); deciding whether one is up to date must not depend on
// which of the two it holds.
func TestSliceUpToDateAgainstSlimCopies(t *testing.T) {
	ready := discoveryv1.EndpointConditions{Ready: ptr.To(true)}
	src := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "svc-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "svc"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: ready}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80)}},
	}
	desired := MirrorSlice(src, "east", "svc", nil, nil, nil)
	live := desired.DeepCopy() // as an API server returns it
	slim := slicedigest.Slim(live)
	stamped := desired.DeepCopy()
	slicedigest.Stamp(stamped)
	for _, d := range []*discoveryv1.EndpointSlice{desired, stamped} {
		assert.True(t, SliceUpToDate(d, live))
		assert.True(t, SliceUpToDate(d, slim))
	}

	changed := src.DeepCopy()
	changed.Endpoints[0].Conditions.Ready = ptr.To(false)
	next := MirrorSlice(changed, "east", "svc", nil, nil, nil)
	slicedigest.Stamp(next)
	assert.False(t, SliceUpToDate(next, slim))
	assert.False(t, EndpointsUpToDate(next, slim))

	relabelled := stamped.DeepCopy()
	relabelled.Labels["extra"] = "x"
	assert.False(t, SliceUpToDate(relabelled, slim), "labels still count")

	// The source region is part of what is up to date: a region that
	// appears, changes or goes rewrites the slice.
	inEU := stamped.DeepCopy()
	inEU.Labels[mcsapi.LabelSourceRegion] = "eu"
	assert.False(t, SliceUpToDate(inEU, slim), "a region appears")
	liveEU := slicedigest.Slim(inEU)
	assert.True(t, SliceUpToDate(inEU, liveEU))
	inUS := inEU.DeepCopy()
	inUS.Labels[mcsapi.LabelSourceRegion] = "us"
	assert.False(t, SliceUpToDate(inUS, liveEU), "the region changes")
	assert.False(t, SliceUpToDate(stamped, liveEU), "the region goes")
}

// Every mirrored slice of a cluster with a region carries it; those of a
// cluster without one carry none.
func TestComputeStampsRegion(t *testing.T) {
	ready := discoveryv1.EndpointConditions{Ready: ptr.To(true)}
	mk := func(id, region string) Export {
		return Export{ClusterID: id, Region: region,
			Export:  &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc"}},
			Service: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}},
			Slices: []*discoveryv1.EndpointSlice{{
				ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "svc-" + id},
				AddressType: discoveryv1.AddressTypeIPv4,
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: ready}},
			}}}
	}
	res := Compute(Input{Namespace: "ns", Name: "svc", Exports: []Export{mk("east", "eu-west-1"), mk("west", "")}})
	require.Len(t, res.Slices, 2)
	regions := map[string]string{}
	for _, s := range res.Slices {
		r, ok := s.Labels[mcsapi.LabelSourceRegion]
		if ok {
			regions[s.Labels[mcsapi.LabelSourceCluster]] = r
		}
	}
	assert.Equal(t, map[string]string{"east": "eu-west-1"}, regions)
}

// TestPortsEqual: the written-out comparison agrees with
// equality.Semantic.DeepEqual (nil and empty lists alike).
func TestPortsEqual(t *testing.T) {
	str := func(s string) *string { return &s }
	i32 := func(v int32) *int32 { return &v }
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	p := func(name string, proto *corev1.Protocol, port int32, app *string) discoveryv1.EndpointPort {
		return discoveryv1.EndpointPort{Name: str(name), Protocol: proto, Port: i32(port), AppProtocol: app}
	}
	lists := [][]discoveryv1.EndpointPort{
		nil, {},
		{p("http", &tcp, 80, nil)},
		{p("http", &tcp, 80, str("h2c"))},
		{p("http", &udp, 80, nil)},
		{p("http", nil, 80, nil)},
		{p("dns", &tcp, 80, nil)},
		{p("http", &tcp, 81, nil)},
		{{Name: nil, Protocol: &tcp, Port: i32(80)}},
		{p("http", &tcp, 80, nil), p("dns", &udp, 53, nil)},
		{p("dns", &udp, 53, nil), p("http", &tcp, 80, nil)},
	}
	for i, a := range lists {
		for j, b := range lists {
			want := equality.Semantic.DeepEqual(a, b) || (len(a) == 0 && len(b) == 0)
			assert.Equal(t, want, portsEqual(a, b), "%d vs %d", i, j)
		}
	}
}

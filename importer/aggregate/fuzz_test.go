package aggregate

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// fuzzBytes hands out fuzz input a byte at a time (0 once it runs out).
type fuzzBytes []byte

func (b *fuzzBytes) next() byte {
	if len(*b) == 0 {
		return 0
	}
	c := (*b)[0]
	*b = (*b)[1:]
	return c
}

func (b *fuzzBytes) pick(options ...string) string { return options[int(b.next())%len(options)] }

// fuzzExport makes the i-th export of an input: Services of every type,
// port and family mix the API admits, and some it would not, sessions,
// labels and annotations, and slices of any shape.
func fuzzExport(b *fuzzBytes, i int) Export {
	e := Export{
		ClusterID: b.pick("east", "west", "north", "east", ""),
		Export: &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: int64(b.next()),
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(b.next()%4) * time.Second)),
			Annotations:       map[string]string{"mcs-dns.io/use-clusterset-ip": b.pick("", "true", "false", "yes")}},
			Spec: mcsv1beta1.ServiceExportSpec{
				ExportedLabels:      map[string]string{b.pick("a", "b", "mcs-dns.io/x"): b.pick("1", "2", "")},
				ExportedAnnotations: map[string]string{b.pick("a", "c"): b.pick("1", "2")},
			}},
	}
	if b.next()%5 == 0 {
		return e
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{
			Type:            corev1.ServiceType(b.pick("ClusterIP", "ClusterIP", "NodePort", "LoadBalancer", "ExternalName", "")),
			ClusterIP:       b.pick("10.0.0.1", "None", "", "fd00::1", "bogus"),
			SessionAffinity: corev1.ServiceAffinity(b.pick("None", "ClientIP", "")),
		}}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP && b.next()%2 == 0 {
		svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(b.next()))}}
	}
	for range b.next() % 4 {
		svc.Spec.IPFamilies = append(svc.Spec.IPFamilies, corev1.IPFamily(b.pick("IPv4", "IPv6", "")))
	}
	for range b.next() % 5 {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: b.pick("http", "dns", "", "HTTP"),
			Protocol: corev1.Protocol(b.pick("TCP", "UDP", "SCTP", "")), Port: int32(b.next()) - 10,
			AppProtocol: ptr.To(b.pick("h2", ""))})
	}
	e.Service = svc
	for s := range b.next() % 4 {
		sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("web-%d-%d", i, s),
			Labels: map[string]string{discoveryv1.LabelServiceName: b.pick("web", "other", "")}},
			AddressType: discoveryv1.AddressType(b.pick("IPv4", "IPv6", "FQDN", ""))}
		for range b.next() % 6 {
			ep := discoveryv1.Endpoint{Addresses: []string{b.pick("10.1.0.1", "10.1.0.2", "fd00::5", "x", "")}}
			switch b.next() % 3 {
			case 0:
				ep.Conditions.Ready = ptr.To(true)
			case 1:
				ep.Conditions.Ready = ptr.To(false)
			}
			if b.next()%2 == 0 {
				ep.Hostname = ptr.To(b.pick("db-0", "DB", "", "a.b"))
			}
			sl.Endpoints = append(sl.Endpoints, ep)
		}
		for range b.next() % 3 {
			sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: ptr.To(b.pick("http", "")), Port: ptr.To(int32(b.next())),
				Protocol: ptr.To(corev1.Protocol(b.pick("TCP", "UDP")))})
		}
		e.Slices = append(e.Slices, sl)
	}
	return e
}

// FuzzCompute: Compute never panics, is deterministic, answers one entry
// per export in order, names as Winner a cluster whose export is valid,
// and mirrors slices only for an import that exists.
func FuzzCompute(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 0, 1, 0, 1, 0, 1, 1, 0, 0, 1, 0, 2, 0, 2, 1, 80, 0, 1, 0, 0, 2, 0, 0, 1})
	f.Add([]byte{2, 1, 5, 2, 1, 1, 0, 0, 1, 1, 1, 2, 1, 1, 1, 53, 1, 1, 1, 3, 1, 0, 0, 1, 2, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fuzzBytes(data)
		in := Input{Namespace: "ns", Name: "web"}
		for i := range b.next() % 5 {
			in.Exports = append(in.Exports, fuzzExport(&b, int(i)))
		}
		if b.next()%2 == 0 {
			in.WantsClusterSetIP = func(e *mcsv1beta1.ServiceExport) bool {
				return e.Annotations["mcs-dns.io/use-clusterset-ip"] == "true"
			}
		}
		res := Compute(in)
		if len(res.Exports) != len(in.Exports) {
			t.Fatalf("%d export results for %d exports", len(res.Exports), len(in.Exports))
		}
		for i, er := range res.Exports {
			if er.ClusterID != in.Exports[i].ClusterID {
				t.Fatalf("result %d is for %q, export for %q", i, er.ClusterID, in.Exports[i].ClusterID)
			}
		}
		if res.Winner != "" && !slices.ContainsFunc(res.Exports, func(er ExportResult) bool { return er.Valid && er.ClusterID == res.Winner }) {
			t.Fatalf("winner %q has no valid export", res.Winner)
		}
		if res.Import == nil && len(res.Slices) > 0 {
			t.Fatalf("%d mirrored slices without an import", len(res.Slices))
		}
		if again := Compute(in); !equality.Semantic.DeepEqual(again, res) {
			t.Fatalf("Compute is not deterministic:\n%+v\n%+v", res, again)
		}
	})
}

// FuzzSliceUpToDateAs: comparing against a member's copy without making
// it agrees with SliceUpToDate on the copy, for any labels, extra labels,
// port names and renames.
func FuzzSliceUpToDateAs(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 0, 1, 1, 3, 0, 2, 1, 1, 0, 1, 2, 1, 0})
	f.Add([]byte{3, 1, 2, 2, 0, 1, 1, 2, 1, 1, 1, 0, 0, 2, 2, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fuzzBytes(data)
		keys := []string{mcsapi.LabelServiceName, mcsapi.LabelSourceCluster, mcsapi.LabelManagedBy, mcsapi.LabelKubeServiceName, "team"}
		labels := func() map[string]string {
			n := int(b.next() % 4)
			if n == 0 && b.next()%2 == 0 {
				return nil
			}
			m := map[string]string{}
			for range n {
				m[keys[int(b.next())%len(keys)]] = b.pick("a", "b")
			}
			return m
		}
		ports := func() []discoveryv1.EndpointPort {
			var ps []discoveryv1.EndpointPort
			for range b.next() % 3 {
				p := discoveryv1.EndpointPort{Port: ptr.To(int32(80 + b.next()%2))}
				if n := b.pick("", "http", "dns", "tcp-80"); n != "" || b.next()%2 == 0 {
					p.Name = ptr.To(n)
				}
				ps = append(ps, p)
			}
			return ps
		}
		desired := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Labels: labels()}, AddressType: discoveryv1.AddressTypeIPv4, Ports: ports()}
		actual := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Labels: labels()}, AddressType: discoveryv1.AddressTypeIPv4, Ports: ports()}
		extra := labels()
		var renames map[string]string
		for range b.next() % 3 {
			if renames == nil {
				renames = map[string]string{}
			}
			renames[b.pick("", "http", "dns")] = b.pick("http", "tcp-80", "dns")
		}
		if b.next()%2 == 0 {
			// Often make actual the copy itself, so that "up to date"
			// is exercised as much as "not".
			actual.Labels = maps.Clone(extra)
			if actual.Labels == nil {
				actual.Labels = map[string]string{}
			}
			maps.Copy(actual.Labels, desired.Labels)
			actual.Ports = slices.Clone(desired.Ports)
			RenamePorts(actual, renames)
		}

		c := *desired
		c.Labels = maps.Clone(extra)
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		maps.Copy(c.Labels, desired.Labels)
		c.Ports = slices.Clone(desired.Ports)
		RenamePorts(&c, renames)
		want := SliceUpToDate(&c, actual)
		if got := SliceUpToDateAs(desired, actual, extra, renames); got != want {
			t.Fatalf("SliceUpToDateAs %v, SliceUpToDate on the copy %v\ndesired %v %v\nactual %v %v\nextra %v renames %v",
				got, want, desired.Labels, desired.Ports, actual.Labels, actual.Ports, extra, renames)
		}
	})
}

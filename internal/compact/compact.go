// Package compact holds the informer transforms of the mcs plugin: they
// turn ServiceImports (any served version, and CRD forks that moved ips,
// type and ports into status) and EndpointSlices into small validated
// objects that keep only what DNS answers need. The objects satisfy
// runtime.Object and metav1.Object so that informer stores can key them.
package compact

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/listwatchjson"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// Import is a transformed ServiceImport.
type Import struct {
	Meta
	// Service is the validated view; meaningful only when Err is nil.
	Service answers.Service
	// Err says why the object was rejected; a rejected import answers
	// nothing.
	Err error
	// Skips are the malformed ips and ports left out (the rest of the
	// import still answers); nil when there are none.
	Skips   *Skips
	arrived stamp
}

// Arrived is when the transform saw this version of the object: the
// start of its DNS programming latency.
func (i *Import) Arrived() time.Time { return i.arrived.time() }

// Skips counts the malformed entries left out of an object whose other
// entries still answer, and keeps the first reason. Objects keep a
// pointer, nil for the well-formed ones: tens of thousands of imports and
// slices each carrying an empty count and error would cost about 1 MiB.
type Skips struct {
	Count int
	First error
}

// Skipped is the number of entries left out (0 for nil).
func (s *Skips) Skipped() int {
	if s == nil {
		return 0
	}
	return s.Count
}

// FirstErr is why the first one was left out (nil for nil).
func (s *Skips) FirstErr() error {
	if s == nil {
		return nil
	}
	return s.First
}

func addSkip(p **Skips, err error) {
	if *p == nil {
		*p = &Skips{First: err}
	}
	(*p).Count++
}

// stamp is a time as an offset from the process's start on the monotonic
// clock: 8 bytes per object instead of a time.Time's 24.
type stamp time.Duration

var epoch = time.Now()

func stampOf(t time.Time) stamp { return stamp(t.Sub(epoch)) }

func (s stamp) time() time.Time { return epoch.Add(time.Duration(s)) }

// DeepCopyObject implements runtime.Object.
func (i *Import) DeepCopyObject() runtime.Object {
	c := *i
	c.Service.IPs = slices.Clone(i.Service.IPs)
	c.Service.Ports = slices.Clone(i.Service.Ports)
	return &c
}

// Slice is a transformed EndpointSlice.
type Slice struct {
	Meta
	// ServiceName is the multicluster.kubernetes.io/service-name label.
	ServiceName string
	Slice       answers.Slice
	// Err says why the whole slice was rejected (no endpoints answered).
	Err error
	// Skips are the endpoints left out as malformed; nil when none.
	Skips   *Skips
	arrived stamp
}

// Arrived is when the transform saw this version of the object.
func (s *Slice) Arrived() time.Time { return s.arrived.time() }

// DeepCopyObject implements runtime.Object.
func (s *Slice) DeepCopyObject() runtime.Object {
	c := *s
	if s.Slice.Endpoints == nil {
		return &c // nil stays nil: a copy must be DeepEqual to the original
	}
	c.Slice.Endpoints = make([]answers.Endpoint, len(s.Slice.Endpoints))
	for i, ep := range s.Slice.Endpoints {
		ep.Addresses = slices.Clone(ep.Addresses)
		c.Slice.Endpoints[i] = ep
	}
	return &c
}

// ServiceKey is the "<namespace>/<service>" the slice belongs to.
func (s *Slice) ServiceKey() string { return s.Namespace + "/" + s.ServiceName }

// ImportFromUnstructured reads a ServiceImport of any served version. It
// takes type, ips and ports from spec, or from status where spec lacks
// them (CRD forks). It never fails: a malformed object comes back with Err
// set.
func ImportFromUnstructured(u *unstructured.Unstructured, now time.Time) *Import {
	imp := &Import{Meta: metaOf(u), arrived: stampOf(now)}
	imp.Service, imp.Err = readImport(u, imp.skip)
	return imp
}

func field(u *unstructured.Unstructured, name string) (any, bool) {
	for _, part := range []string{"spec", "status"} {
		if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, part, name); ok && v != nil {
			if s, isSlice := v.([]any); isSlice && len(s) == 0 {
				continue
			}
			if s, isStr := v.(string); isStr && s == "" {
				continue
			}
			return v, true
		}
	}
	return nil, false
}

// skip notes a malformed entry left out of the import.
func (i *Import) skip(err error) { addSkip(&i.Skips, err) }

// readImport validates what DNS reads of u. The type, name and namespace
// must be right or nothing answers; one malformed ips or ports entry is
// left out (through skip) and the rest still answers: a VIP is not lost to
// a bad port, nor a port to a bad VIP.
func readImport(u *unstructured.Unstructured, skip func(error)) (answers.Service, error) {
	svc := answers.Service{Namespace: intern(u.GetNamespace()), Name: u.GetName()}
	if errs := validation.IsDNS1123Label(svc.Name); len(errs) > 0 {
		return svc, fmt.Errorf("name %q is not a DNS label: %s", svc.Name, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(svc.Namespace); len(errs) > 0 {
		return svc, fmt.Errorf("namespace %q is not a DNS label: %s", svc.Namespace, strings.Join(errs, "; "))
	}
	t, _ := field(u, "type")
	switch t {
	case "ClusterSetIP":
		svc.Type = answers.ClusterSetIP
	case "Headless":
		svc.Type = answers.Headless
	default:
		return svc, fmt.Errorf("type %v is neither ClusterSetIP nor Headless", t)
	}
	if v, ok := field(u, "ips"); ok && svc.Type == answers.ClusterSetIP {
		list, isList := v.([]any)
		if !isList {
			return svc, fmt.Errorf("ips is not a list")
		}
		for _, x := range list {
			s, _ := x.(string)
			ip, err := ParseIP(s)
			if err != nil {
				skip(fmt.Errorf("ips: %w", err))
				continue
			}
			svc.IPs = append(svc.IPs, ip)
		}
	}
	if v, ok := field(u, "ports"); ok {
		list, isList := v.([]any)
		if !isList {
			return svc, fmt.Errorf("ports is not a list")
		}
		for _, x := range list {
			m, _ := x.(map[string]any)
			name, _ := m["name"].(string)
			proto, _ := m["protocol"].(string)
			p, err := readPort(name, proto, m["port"])
			if err != nil {
				skip(err)
				continue
			}
			svc.Ports = append(svc.Ports, p)
		}
	}
	if v, _ := field(u, "endpointSliceObjects"); v == "Absent" {
		svc.EndpointsAbsent = true
	}
	if v, _ := field(u, "trafficDistribution"); v != nil {
		svc.TrafficDistribution = trafficDistribution(v)
	}
	return svc, nil
}

// trafficDistribution returns the value v as one of the constants
// answers.PrefersClose knows (no string kept per import), else "": only
// those change the answers.
func trafficDistribution(v any) string {
	for _, c := range []string{"PreferClose", "PreferSameZone", "PreferSameNode"} {
		if v == c {
			return c
		}
	}
	return ""
}

func readPort(name, proto string, number any) (answers.Port, error) {
	var n int64
	switch x := number.(type) {
	case int64:
		n = x
	case float64:
		n = int64(x)
	case int:
		n = int64(x)
	}
	if n < 1 || n > 65535 {
		return answers.Port{}, fmt.Errorf("port %v is not in 1..65535", number)
	}
	if name != "" {
		// A DNS label, as Service port names are (up to 63 characters,
		// digits alone allowed); it becomes the label "_<name>" of the
		// port's SRV name.
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return answers.Port{}, fmt.Errorf("port name %q: %s", name, strings.Join(errs, "; "))
		}
	}
	var lower string // constants: no string per port
	switch proto {
	case "", "TCP":
		lower = "tcp"
	case "UDP":
		lower = "udp"
	case "SCTP":
		lower = "sctp"
	default:
		return answers.Port{}, fmt.Errorf("port %d: protocol %q is not TCP, UDP or SCTP", n, proto)
	}
	return answers.Port{Name: intern(name), Protocol: lower, Port: uint16(n)}, nil
}

// ParseIP parses an IPv4 or IPv6 address as DNS answers can carry it: no
// zone, no IPv4-mapped IPv6 form.
func ParseIP(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	if ip.Zone() != "" || ip.Is4In6() {
		return netip.Addr{}, fmt.Errorf("%q is not a plain IPv4 or IPv6 address", s)
	}
	return ip, nil
}

// ErrNoSourceCluster rejects slices without the source-cluster label.
var ErrNoSourceCluster = errors.New("no " + mcsapi.LabelSourceCluster + " label")

// SliceFromEndpointSlice keeps what DNS needs of an EndpointSlice: the
// source cluster and its region (a source-region label that is not a
// region is none), and the addresses and hostname of every ready endpoint
// (nil ready counts as ready, as in Kubernetes; DNS never answers with
// the others). A slice without a valid source cluster is rejected (Err);
// a malformed endpoint, ready or not, is skipped and counted.
func SliceFromEndpointSlice(es *discoveryv1.EndpointSlice, now time.Time) *Slice {
	s := &Slice{Meta: metaOf(es), arrived: stampOf(now), ServiceName: es.Labels[mcsapi.LabelServiceName]}
	s.Slice.Name = es.Name
	if errs := validation.IsDNS1123Label(s.ServiceName); len(errs) > 0 {
		s.Err = fmt.Errorf("%s label %q is not a DNS label", mcsapi.LabelServiceName, s.ServiceName)
		return s
	}
	id, ok := es.Labels[mcsapi.LabelSourceCluster]
	if !ok || id == "" {
		s.Err = ErrNoSourceCluster
		return s
	}
	if err := mcsapi.ValidateClusterID(id); err != nil {
		s.Err = err
		return s
	}
	s.Slice.ClusterID = intern(id)
	// A region that is not one is none: it only orders answers.
	if r := es.Labels[mcsapi.LabelSourceRegion]; r != "" && mcsapi.ValidateRegion(r) == nil {
		s.Slice.Region = intern(r)
	}
	var v6 bool
	switch es.AddressType {
	case discoveryv1.AddressTypeIPv4:
	case discoveryv1.AddressTypeIPv6:
		v6 = true
	default:
		s.Err = fmt.Errorf("addressType %q is not IPv4 or IPv6", es.AddressType)
		return s
	}
	// Only ready endpoints are kept, all their addresses in one array
	// (one allocation per slice).
	ready, total := 0, 0
	for _, ep := range es.Endpoints {
		if isReady(ep) {
			ready++
			total += len(ep.Addresses)
		}
	}
	s.Slice.Endpoints = make([]answers.Endpoint, 0, ready)
	backing := make([]netip.Addr, 0, total)
	skip := func(err error) { addSkip(&s.Skips, err) }
endpoints:
	for _, ep := range es.Endpoints {
		var out answers.Endpoint
		if ep.Hostname != nil && *ep.Hostname != "" {
			if errs := validation.IsDNS1123Label(*ep.Hostname); len(errs) > 0 {
				skip(fmt.Errorf("hostname %q is not a DNS label", *ep.Hostname))
				continue
			}
			out.Hostname = *ep.Hostname
		}
		if len(ep.Addresses) == 0 {
			skip(errors.New("endpoint without addresses"))
			continue
		}
		// A not-ready endpoint is checked all the same (a malformed one is
		// reported) but not kept.
		ready := isReady(ep)
		start := len(backing)
		for _, a := range ep.Addresses {
			ip, err := ParseIP(a)
			if err == nil && ip.Is6() != v6 {
				err = fmt.Errorf("%q is not an %s address", a, es.AddressType)
			}
			if err != nil {
				backing = backing[:start]
				skip(err)
				continue endpoints
			}
			if ready {
				backing = append(backing, ip)
			}
		}
		if !ready {
			continue
		}
		out.Addresses = backing[start:len(backing):len(backing)]
		s.Slice.Endpoints = append(s.Slice.Endpoints, out)
	}
	return s
}

// isReady reads the ready condition as Kubernetes does: nil is ready.
func isReady(ep discoveryv1.Endpoint) bool { return ep.Conditions.Ready == nil || *ep.Conditions.Ready }

// ImportFromJSON reads a ServiceImport decoded by listwatchjson as ImportFromUnstructured reads the
// same object decoded into Unstructured. It never fails: a malformed
// object comes back with Err set.
func ImportFromJSON(w *listwatchjson.ServiceImport, now time.Time) *Import {
	imp := &Import{Meta: metaOf(w), arrived: stampOf(now)}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetNamespace(w.Namespace)
	u.SetName(w.Name)
	for _, p := range []struct {
		part string
		raw  []byte
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

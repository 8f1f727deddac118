package cmd

import (
	"context"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// snapshot is what one member holds of the clusterset's services, read
// once: its ServiceExports and ServiceImports, the EndpointSlices
// mcs-importer mirrored into it, its own Services' EndpointSlices and the
// Services it exports.
type snapshot struct {
	m        *member
	exports  []unstructured.Unstructured
	imports  []unstructured.Unstructured
	mirrored []discoveryv1.EndpointSlice
	// source are the slices of the member's own Services (labelled
	// kubernetes.io/service-name, not written by mcs-importer).
	source []discoveryv1.EndpointSlice
	// services are the Services of the member's exports, by
	// "namespace/name" (absent when the Service does not exist).
	services map[string]*corev1.Service
	// namespaces that exist; nil when they could not be listed.
	namespaces map[string]bool
	err        error
}

const importerSelector = mcsapi.LabelManagedBy + "=" + mcsapi.ManagedByImporter

// fetch reads the snapshot of every usable member in parallel; namespace
// "" means all, name "" every service.
func fetch(ctx context.Context, ms []*member, namespace, name string) []*snapshot {
	out := make([]*snapshot, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		out[i] = &snapshot{m: m, err: m.Err}
		if m.Err != nil {
			continue
		}
		wg.Go(func() { out[i].err = out[i].read(ctx, namespace, name) })
	}
	wg.Wait()
	return out
}

func (s *snapshot) read(ctx context.Context, namespace, name string) error {
	m := s.m
	lo := metav1.ListOptions{}
	if name != "" {
		lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	var err error
	if s.exports, err = listDyn(ctx, m, m.Exports, namespace, lo); err != nil {
		return err
	}
	if s.imports, err = listDyn(ctx, m, m.Imports, namespace, lo); err != nil {
		return err
	}
	sel := importerSelector + "," + mcsapi.LabelServiceName
	if name != "" {
		sel += "=" + name
	}
	if s.mirrored, err = listSlices(ctx, m, namespace, sel); err != nil {
		return err
	}
	sel = discoveryv1.LabelServiceName
	if name != "" {
		sel += "=" + name
	}
	sel += "," + mcsapi.LabelManagedBy + "!=" + mcsapi.ManagedByImporter
	if s.source, err = listSlices(ctx, m, namespace, sel); err != nil {
		return err
	}
	s.services = map[string]*corev1.Service{}
	for i := range s.exports {
		e := &s.exports[i]
		svc, err := m.Kube.CoreV1().Services(e.GetNamespace()).Get(ctx, e.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return classify(m.Context, op{verb: "get", resource: "services", namespace: e.GetNamespace()}, err)
		default:
			s.services[e.GetNamespace()+"/"+e.GetName()] = svc
		}
	}
	// Only to tell a missing import from a namespace the member does not
	// have (the importer imports only where the namespace exists): not
	// being allowed to list namespaces is no reason to fail.
	if nss, err := m.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
		s.namespaces = map[string]bool{}
		for _, ns := range nss.Items {
			s.namespaces[ns.Name] = true
		}
	}
	return nil
}

func listDyn(ctx context.Context, m *member, gvr schema.GroupVersionResource, namespace string, lo metav1.ListOptions) ([]unstructured.Unstructured, error) {
	l, err := m.Dyn.Resource(gvr).Namespace(namespace).List(ctx, lo)
	if err != nil {
		return nil, classify(m.Context, op{verb: "list", resource: gvr.Resource + "." + gvr.Group, namespace: namespace}, err)
	}
	return l.Items, nil
}

func listSlices(ctx context.Context, m *member, namespace, selector string) ([]discoveryv1.EndpointSlice, error) {
	l, err := m.Kube.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, classify(m.Context, op{verb: "list", resource: "endpointslices.discovery.k8s.io", namespace: namespace}, err)
	}
	return l.Items, nil
}

// readyAddrs are the addresses of the ready endpoints of slices (nil
// ready counts as ready, as in Kubernetes and in the plugin), in
// canonical form.
func readyAddrs(slices []*discoveryv1.EndpointSlice) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil {
					out[ip] = true
				}
			}
		}
	}
	return out
}

// condition is one condition of an export, as shown.
type condition struct {
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// conditionOf reads condition typ of an MCS object (any served version:
// conditions have one shape in all of them); nil when absent.
func conditionOf(u *unstructured.Unstructured, typ string) *condition {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != typ {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		return &condition{Status: str("status"), Reason: str("reason"), Message: str("message")}
	}
	return nil
}

// importClusters is the import's status.clusters: the clusters whose
// exports the importer currently imports.
func importClusters(u *unstructured.Unstructured) []string {
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "clusters")
	var out []string
	for _, c := range list {
		if m, ok := c.(map[string]any); ok {
			if id, ok := m["cluster"].(string); ok {
				out = append(out, id)
			}
		}
	}
	return out
}

func key(ns, name string) string { return ns + "/" + name }

func (s *snapshot) usable() bool { return s.err == nil }

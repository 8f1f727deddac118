package cmd

import (
	"context"
	"fmt"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mcs-dns/mcs-dns/internal/compact"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// member objects of one service, read once.
type serviceObjects struct {
	imp    *unstructured.Unstructured
	cimp   *compact.Import
	slices []sliceObject
}

type sliceObject struct {
	es      *discoveryv1.EndpointSlice
	cs      *compact.Slice
	why     string // why it is not served, "" when it is
	info    SliceInfo
	service string
}

// readObjects reads the ServiceImports of namespace ns ("" all) of m and
// the EndpointSlices labelled with a service name, converted as the
// plugin's informer transforms convert them, slices of untrusted
// managers marked as the plugin marks them.
func readObjects(ctx context.Context, managers []string, m *member, ns string) (map[string]*serviceObjects, error) {
	imps, err := listDyn(ctx, m, m.Imports, ns, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	// The plugin watches every slice with the service-name label.
	sls, err := listSlices(ctx, m, ns, mcsapi.LabelServiceName)
	if err != nil {
		return nil, err
	}
	out := map[string]*serviceObjects{}
	get := func(k string) *serviceObjects {
		if out[k] == nil {
			out[k] = &serviceObjects{}
		}
		return out[k]
	}
	now := time.Now()
	for i := range imps {
		u := &imps[i]
		so := get(key(u.GetNamespace(), u.GetName()))
		so.imp, so.cimp = u, compact.ImportFromUnstructured(u, now)
	}
	for i := range sls {
		es := &sls[i]
		cs := compact.SliceFromEndpointSlice(es, now)
		so := sliceObject{es: es, cs: cs, service: cs.ServiceName}
		manager := es.Labels[discoveryv1.LabelManagedBy]
		switch {
		case cs.Err != nil:
			so.why = "rejected: " + cs.Err.Error()
		default:
			so.why = untrusted(managers, manager, es.Labels[mcsapi.LabelSourceManagedBy])
		}
		so.info = SliceInfo{Name: es.Name, SourceCluster: es.Labels[mcsapi.LabelSourceCluster], ManagedBy: manager, SourceManagedBy: es.Labels[mcsapi.LabelSourceManagedBy], Served: so.why == "", NotServed: so.why, Endpoints: []EndpointInfo{}}
		for _, ep := range es.Endpoints {
			ei := EndpointInfo{Addresses: ep.Addresses, Ready: ep.Conditions.Ready == nil || *ep.Conditions.Ready}
			if ep.Hostname != nil {
				ei.Hostname = *ep.Hostname
			}
			so.info.Endpoints = append(so.info.Endpoints, ei)
		}
		s := get(key(es.Namespace, cs.ServiceName))
		s.slices = append(s.slices, so)
	}
	return out, nil
}

// untrusted says why a slice managed by manager is not served under the
// trusted managers ("" when it is): the plugin's rule (compact.Untrusted),
// in words.
func untrusted(managers []string, manager, source string) string {
	switch compact.Untrusted(managers, manager, source) {
	case compact.UntrustedNoManager:
		return "no " + discoveryv1.LabelManagedBy + " label (not a trusted manager; see endpointslice_managers)"
	case compact.UntrustedManagerNotListed:
		return fmt.Sprintf("managed by %q, not one of endpointslice_managers %v", manager, managers)
	case compact.UntrustedSourceManager:
		return fmt.Sprintf("managed by %q copying a slice of %q, not one of endpointslice_managers %v", manager, source, managers)
	case compact.UntrustedKubeController:
		return "managed by the Kubernetes endpointslice controller (a cluster's own Service, never clusterset)"
	}
	return ""
}

func importInfo(so *serviceObjects) *ImportInfo {
	if so.imp == nil {
		return nil
	}
	ii := &ImportInfo{Namespace: so.imp.GetNamespace(), Name: so.imp.GetName(), Clusters: importClusters(so.imp)}
	if so.cimp.Err != nil {
		ii.Rejected = so.cimp.Err.Error()
		return ii
	}
	ii.Type = so.cimp.Service.Type.String()
	for _, ip := range so.cimp.Service.IPs {
		ii.IPs = append(ii.IPs, ip.String())
	}
	for _, p := range so.cimp.Service.Ports {
		ii.Ports = append(ii.Ports, fmt.Sprintf("%s %d/%s", orDash(p.Name), p.Port, p.Protocol))
	}
	return ii
}

// exportsOf reads the ServiceExport ns/name in every member and, where it
// is exported, what of its Service's EndpointSlices rules leave out.
func exportsOf(ctx context.Context, ms []*member, rules sourceRules, ns, name string) []ExportInfo {
	out := make([]ExportInfo, len(ms))
	done := make(chan struct{}, len(ms))
	for i, m := range ms {
		go func() {
			defer func() { done <- struct{}{} }()
			ei := ExportInfo{Context: m.Context, Cluster: m.ID}
			if m.Err != nil {
				ei.Error = short(m.Err)
				out[i] = ei
				return
			}
			u, err := m.Dyn.Resource(m.Exports).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				ei.Error = short(classify(m.Context, op{verb: "get", resource: m.Exports.Resource + "." + m.Exports.Group, namespace: ns}, err))
			default:
				ei.Exported = true
				ei.Valid = conditionOf(u, "Valid")
				ei.Conflict = conditionOf(u, "Conflict")
				srcs, err := listSlices(ctx, m, ns, discoveryv1.LabelServiceName+"="+name)
				if err != nil {
					ei.NotMirrored = []string{"its EndpointSlices could not be read: " + short(err)}
					break
				}
				_, ei.NotMirrored = rules.mirrored(m.ID, m.Context, sourceSlices(srcs, ns, name))
			}
			out[i] = ei
		}()
	}
	for range ms {
		<-done
	}
	return out
}

// Package chaos is a randomized, seeded fault test of the whole system
// (make chaos): member clusters, two mcs-importer replicas under leader
// election and one CoreDNS per member, with faults and a workload drawn
// from one seed, and invariants checked against a model all along.
//
// This file is the model: a small statement of the MCS rules (KEP-1645,
// mcs-api v0.5.2) written apart from the importer's own aggregate
// package, so that a mistake there is not repeated here. From what the
// members really hold it computes what every member's imports must be
// once the importer can see everything.
package chaos

import (
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// member is what one member cluster holds, read from its API server.
type member struct {
	// id is the member's name (its kubeconfig context); cluster is its
	// cluster ID (its ClusterProperty), which the MCS objects name.
	id, cluster string
	namespaces  map[string]bool // active (not terminating)
	exports     map[string]*mcsv1beta1.ServiceExport
	services    map[string]*corev1.Service
	// sources are the Services' EndpointSlices (the endpointslice
	// controller's), mirrored the importer's, both by "ns/name".
	sources  map[string][]discoveryv1.EndpointSlice
	imports  map[string]*mcsv1beta1.ServiceImport
	mirrored map[string][]discoveryv1.EndpointSlice
}

// want is what one member's import of one service must be.
type want struct {
	headless bool
	clusters []string
	ready    []string // ready endpoint addresses, sorted
}

type export struct {
	m   *member
	svc *corev1.Service
	exp *mcsv1beta1.ServiceExport
}

// valid: the Service exists and is not ExternalName.
func validExports(ms []*member, key string) []export {
	var out []export
	for _, m := range ms {
		e, s := m.exports[key], m.services[key]
		if e == nil || e.DeletionTimestamp != nil || s == nil || s.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		out = append(out, export{m, s, e})
	}
	// The oldest export wins every conflict; ties go to the cluster ID.
	sort.SliceStable(out, func(i, j int) bool {
		ti, tj := out[i].exp.CreationTimestamp, out[j].exp.CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return out[i].m.cluster < out[j].m.cluster
	})
	return out
}

func readyAddresses(slices_ []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range slices_ {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			out = append(out, e.Addresses...)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// expected computes, for every member, the imports it must hold by key.
func expected(ms []*member) map[string]map[string]want {
	keys := map[string]bool{}
	for _, m := range ms {
		for k := range m.exports {
			keys[k] = true
		}
	}
	out := map[string]map[string]want{}
	for _, m := range ms {
		out[m.id] = map[string]want{}
	}
	for k := range keys {
		valid := validExports(ms, k)
		if len(valid) == 0 {
			continue
		}
		w := want{headless: valid[0].svc.Spec.ClusterIP == corev1.ClusterIPNone}
		var srcs []discoveryv1.EndpointSlice
		for _, e := range valid {
			w.clusters = append(w.clusters, e.m.cluster)
			srcs = append(srcs, e.m.sources[k]...)
		}
		sort.Strings(w.clusters)
		w.clusters = slices.Compact(w.clusters)
		w.ready = readyAddresses(srcs)
		ns := valid[0].exp.Namespace
		for _, m := range ms {
			if m.namespaces[ns] {
				out[m.id][k] = w
			}
		}
	}
	return out
}

// have is what a member holds of one import, in the model's terms.
func have(m *member, key string) (want, bool) {
	si := m.imports[key]
	if si == nil {
		return want{}, false
	}
	h := want{headless: si.Spec.Type == mcsv1beta1.Headless, ready: readyAddresses(m.mirrored[key])}
	for _, c := range si.Status.Clusters {
		h.clusters = append(h.clusters, c.Cluster)
	}
	return h, true
}

// diff lists how the members differ from the model ("" entries none).
func diff(ms []*member) []string {
	exp := expected(ms)
	var out []string
	for _, m := range ms {
		for k, w := range exp[m.id] {
			h, ok := have(m, k)
			switch {
			case !ok:
				out = append(out, m.id+": no import "+k)
			case h.headless != w.headless:
				out = append(out, m.id+": "+k+" headless="+boolStr(h.headless)+", the oldest export says "+boolStr(w.headless))
			case !slices.Equal(h.clusters, w.clusters):
				out = append(out, m.id+": "+k+" clusters "+join(h.clusters)+", want "+join(w.clusters))
			case !slices.Equal(h.ready, w.ready):
				out = append(out, m.id+": "+k+" ready endpoints "+join(h.ready)+", want "+join(w.ready))
			}
		}
		for k := range m.imports {
			if _, ok := exp[m.id][k]; !ok {
				out = append(out, m.id+": import "+k+" exported nowhere")
			}
		}
	}
	sort.Strings(out)
	return out
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func join(s []string) string {
	out := "["
	for i, v := range s {
		if i > 0 {
			out += " "
		}
		out += v
	}
	return out + "]"
}

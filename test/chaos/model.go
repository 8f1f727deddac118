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
	"net/netip"
	"slices"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
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
	// ports: "name/protocol/port" of each port, sorted; affinity: the
	// session affinity and its timeout ("None", or "ClientIP/10800").
	ports    []string
	affinity string
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
		// Headlessness and session affinity are the oldest export's;
		// the ports are the union, a port two exports define
		// differently taking the oldest definition.
		w := want{headless: valid[0].svc.Spec.ClusterIP == corev1.ClusterIPNone, affinity: serviceAffinity(valid[0].svc)}
		var taken []corev1.ServicePort
		for _, e := range valid {
			for _, p := range e.svc.Spec.Ports {
				if p.Protocol == "" {
					p.Protocol = corev1.ProtocolTCP
				}
				if slices.ContainsFunc(taken, func(q corev1.ServicePort) bool {
					return q.Name == p.Name || (q.Port == p.Port && q.Protocol == p.Protocol)
				}) {
					continue
				}
				taken = append(taken, p)
				w.ports = append(w.ports, portString(p.Name, p.Protocol, p.Port))
			}
		}
		sort.Strings(w.ports)
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
	for _, p := range si.Spec.Ports {
		h.ports = append(h.ports, portString(p.Name, p.Protocol, p.Port))
	}
	sort.Strings(h.ports)
	h.affinity = affinityString(si.Spec.SessionAffinity, si.Spec.SessionAffinityConfig)
	return h, true
}

// vipProblem says what is wrong with the address of member m's import of
// key ("" if nothing): a ClusterSetIP import names one, which a Service
// of m's that the importer derived for it holds as its ClusterIP (so
// that the address is allocated there and kube-proxy routes it), with
// the import's session affinity (kube-proxy reads it from that Service);
// a Headless import names none.
//
// With a clusterset CIDR (--vip-mode=clusterset-cidr and
// --clusterset-ip-default), a ClusterSetIP import names one address of
// the CIDR instead, and no derived Service; that every member names the
// same one, and no two imports one address, is clusterVIPProblems'.
func vipProblem(m *member, key string, cidr netip.Prefix) string {
	si := m.imports[key]
	if si.Spec.Type == mcsv1beta1.Headless {
		if len(si.Spec.IPs) > 0 {
			return "headless import names addresses " + join(si.Spec.IPs)
		}
		return ""
	}
	if len(si.Spec.IPs) == 0 {
		return "ClusterSetIP import names no address"
	}
	if cidr.IsValid() {
		a, err := netip.ParseAddr(si.Spec.IPs[0])
		if len(si.Spec.IPs) != 1 || err != nil || !cidr.Contains(a) {
			return "import names " + join(si.Spec.IPs) + ", not one address of the clusterset CIDR " + cidr.String()
		}
		for _, s := range m.services {
			if s.Namespace == si.Namespace && s.Labels[mcsapi.LabelDerivedFor] == si.Name {
				return "derived Service " + s.Name + " exists for an import with a clusterset VIP"
			}
		}
		return ""
	}
	for _, s := range m.services {
		if s.Namespace != si.Namespace || s.Labels[mcsapi.LabelAppManagedBy] != mcsapi.ManagedByImporter || s.Labels[mcsapi.LabelDerivedFor] != si.Name {
			continue
		}
		if s.Spec.ClusterIP != si.Spec.IPs[0] {
			return "import names " + si.Spec.IPs[0] + ", its derived Service " + s.Name + " holds " + s.Spec.ClusterIP
		}
		if got, want := affinityString(s.Spec.SessionAffinity, s.Spec.SessionAffinityConfig), affinityString(si.Spec.SessionAffinity, si.Spec.SessionAffinityConfig); got != want {
			return "derived Service " + s.Name + " has session affinity " + got + ", the import " + want
		}
		return ""
	}
	return "import names " + si.Spec.IPs[0] + ", but no derived Service holds it"
}

func portString(name string, proto corev1.Protocol, port int32) string {
	return name + "/" + string(proto) + "/" + strconv.Itoa(int(port))
}

func serviceAffinity(s *corev1.Service) string {
	return affinityString(s.Spec.SessionAffinity, s.Spec.SessionAffinityConfig)
}

// affinityString: "None" (also for unset), or "ClientIP/<timeout>" with
// the API server's default timeout where none is set.
func affinityString(a corev1.ServiceAffinity, cfg *corev1.SessionAffinityConfig) string {
	if a != corev1.ServiceAffinityClientIP {
		return string(corev1.ServiceAffinityNone)
	}
	timeout := int32(corev1.DefaultClientIPServiceAffinitySeconds)
	if cfg != nil && cfg.ClientIP != nil && cfg.ClientIP.TimeoutSeconds != nil {
		timeout = *cfg.ClientIP.TimeoutSeconds
	}
	return "ClientIP/" + strconv.Itoa(int(timeout))
}

// clusterVIPProblems: with a clusterset CIDR, every member's import of a
// ClusterSetIP key names the same address, and no two keys one address.
func clusterVIPProblems(ms []*member) []string {
	var out []string
	byKey := map[string]string{}  // key -> its address, as the first member names it
	byAddr := map[string]string{} // address -> the key naming it
	for _, m := range ms {
		keys := make([]string, 0, len(m.imports))
		for k := range m.imports {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			si := m.imports[k]
			if si.Spec.Type != mcsv1beta1.ClusterSetIP || len(si.Spec.IPs) == 0 {
				continue
			}
			ip := si.Spec.IPs[0]
			if was, ok := byKey[k]; ok && was != ip {
				out = append(out, m.id+": "+k+" names "+ip+", another member's import "+was)
			}
			byKey[k] = ip
			if other, ok := byAddr[ip]; ok && other != k {
				out = append(out, m.id+": "+k+" and "+other+" both name "+ip)
			}
			byAddr[ip] = k
		}
	}
	return out
}

// diff lists how the members differ from the model ("" entries none);
// cidr is the clusterset CIDR VIPs come from (invalid: derived Services).
func diff(ms []*member, cidr netip.Prefix) []string {
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
			case !slices.Equal(h.ports, w.ports):
				out = append(out, m.id+": "+k+" ports "+join(h.ports)+", want "+join(w.ports))
			case h.affinity != w.affinity:
				out = append(out, m.id+": "+k+" session affinity "+h.affinity+", the oldest export says "+w.affinity)
			default:
				if p := vipProblem(m, k, cidr); p != "" {
					out = append(out, m.id+": "+k+" "+p)
				}
			}
		}
		for k := range m.imports {
			if _, ok := exp[m.id][k]; !ok {
				out = append(out, m.id+": import "+k+" exported nowhere")
			}
		}
	}
	if cidr.IsValid() {
		out = append(out, clusterVIPProblems(ms)...)
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

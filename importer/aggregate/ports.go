package aggregate

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ImportPort converts a Service port to a ServiceImport port.
func ImportPort(p corev1.ServicePort) mcsv1beta1.ServicePort {
	proto := p.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	out := mcsv1beta1.ServicePort{Name: p.Name, Protocol: proto, Port: p.Port}
	if p.AppProtocol != nil {
		ap := *p.AppProtocol
		out.AppProtocol = &ap
	}
	return out
}

func portEqual(a, b mcsv1beta1.ServicePort) bool {
	return a.Name == b.Name && a.Protocol == b.Protocol && a.Port == b.Port &&
		ptr.Equal(a.AppProtocol, b.AppProtocol)
}

// samePort reports whether two ports are "the same port" (same name, or
// same number and protocol), regardless of the rest of their definition.
func samePort(a, b mcsv1beta1.ServicePort) bool {
	return a.Name == b.Name || (a.Port == b.Port && a.Protocol == b.Protocol)
}

// portRenames maps the names of svc's ports to the names the import's
// ports (the union, oldest definition first) give them, where they differ:
// an export naming a port "http" that the oldest export leaves unnamed has
// its slices' "http" port renamed "", or proxies would find no endpoints
// for the import's port. A port whose name the import has keeps it; a
// port matched by number and protocol takes the import port's name only
// when no port of svc has that name already (a slice cannot have two
// ports of one name). Nil when nothing is renamed.
func portRenames(svc *corev1.Service, union []mcsv1beta1.ServicePort) map[string]string {
	taken := map[string]bool{}
	for _, sp := range svc.Spec.Ports {
		if slices.ContainsFunc(union, func(q mcsv1beta1.ServicePort) bool { return q.Name == sp.Name }) {
			taken[sp.Name] = true
		}
	}
	var out map[string]string
	for _, sp := range svc.Spec.Ports {
		if taken[sp.Name] {
			continue // the import has a port of this name: routed by it
		}
		p := ImportPort(sp)
		i := slices.IndexFunc(union, func(q mcsv1beta1.ServicePort) bool { return q.Port == p.Port && q.Protocol == p.Protocol })
		if i < 0 || taken[union[i].Name] {
			continue
		}
		taken[union[i].Name] = true
		if out == nil {
			out = map[string]string{}
		}
		out[sp.Name] = union[i].Name
	}
	return out
}

func portSet(svc *corev1.Service) []mcsv1beta1.ServicePort {
	out := make([]mcsv1beta1.ServicePort, 0, len(svc.Spec.Ports))
	for _, p := range svc.Spec.Ports {
		out = append(out, ImportPort(p))
	}
	return out
}

func portSetsEqual(a, b []mcsv1beta1.ServicePort) bool {
	if len(a) != len(b) {
		return false
	}
	for _, p := range a {
		if !slices.ContainsFunc(b, func(q mcsv1beta1.ServicePort) bool { return portEqual(p, q) }) {
			return false
		}
	}
	return true
}

// unionPorts merges the port sets, oldest first; a port matching one
// already taken keeps the older definition.
func unionPorts(sets [][]mcsv1beta1.ServicePort) []mcsv1beta1.ServicePort {
	var out []mcsv1beta1.ServicePort
	for _, set := range sets {
		for _, p := range set {
			if slices.ContainsFunc(out, func(q mcsv1beta1.ServicePort) bool { return samePort(p, q) }) {
				continue
			}
			out = append(out, p)
		}
	}
	return out
}

package aggregate

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	netutils "k8s.io/utils/net"
	"k8s.io/utils/ptr"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// hashLen is the number of hex digits of the name hash (40 bits).
const hashLen = 10

// maxNameLen is the longest EndpointSlice name we produce (a DNS label, so
// that the name is valid whatever the object kind).
const maxNameLen = 63

// SliceName is the deterministic name of the mirror of source slice
// srcSlice of service svc from cluster clusterID: "<svc>-<hash>", where
// hash is the first 10 hex digits of sha256("<clusterID>/<srcSlice>") and
// svc is cut short so the whole name fits in 63 characters. The same
// source slice always gets the same name in every importing cluster, and
// importer restarts or several importers agree on it.
func SliceName(svc, clusterID, srcSlice string) string {
	sum := sha256.Sum256([]byte(clusterID + "/" + srcSlice))
	h := hex.EncodeToString(sum[:])[:hashLen]
	prefix := svc
	if max := maxNameLen - hashLen - 1; len(prefix) > max {
		prefix = strings.TrimRight(prefix[:max], "-.")
	}
	if prefix == "" {
		return "mcs-" + h
	}
	return prefix + "-" + h
}

// RenamePorts renames, in place, the ports of s whose names are keys of
// names (a port without a name is named "").
func RenamePorts(s *discoveryv1.EndpointSlice, names map[string]string) {
	for i := range s.Ports {
		n := portName(s.Ports[i])
		if to, ok := names[n]; ok && to != n {
			s.Ports[i].Name = ptr.To(to)
		}
	}
}

// portName is p's name ("" when it has none).
func portName(p discoveryv1.EndpointPort) string {
	if p.Name == nil {
		return ""
	}
	return *p.Name
}

// SliceLabels are the labels of a mirrored slice of a source slice
// managed by sourceManager ("": none recorded).
func SliceLabels(svc, clusterID, sourceManager string) map[string]string {
	l := map[string]string{
		mcsapi.LabelServiceName:   svc,
		mcsapi.LabelSourceCluster: clusterID,
		mcsapi.LabelManagedBy:     mcsapi.ManagedByImporter,
	}
	if sourceManager != "" {
		l[mcsapi.LabelSourceManagedBy] = sourceManager
	}
	return l
}

// MirrorSlice is the mirror of src (a slice of Service svc in cluster
// clusterID): same namespace, deterministic name, the MCS labels, and the
// address type, ports and each endpoint's addresses, conditions
// (ready/serving/terminating), hostname and zone; the source's manager is
// recorded in LabelSourceManagedBy. Fields that point at
// objects of the source cluster (nodeName, targetRef) and topology hints
// (meant for the source cluster's proxies) are not carried. Proxies match
// a slice's ports to the Service's (here the import's) by name. When
// servicePorts is not nil (the source Service's port names), a port it
// does not name is left out first: it carries no traffic in its own
// cluster, and kept it could collide with a renamed one (a slice cannot
// have two ports of one name). Then a port whose name is in portNames is
// renamed (where exports name the same port differently the import keeps
// the oldest export's name), and, when importPorts is not nil, a port that
// then names none of the import's ports is left out (it would carry no
// traffic, and its name could later be taken by another: a derived
// Service's "tcp-80"). Addresses are written in canonical form (see
// mirrorAddress); an endpoint left without one is dropped.
func MirrorSlice(src *discoveryv1.EndpointSlice, clusterID, svc string, servicePorts map[string]bool, portNames map[string]string, importPorts map[string]bool) *discoveryv1.EndpointSlice {
	out := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: src.Namespace,
			Name:      SliceName(svc, clusterID, src.Name),
			Labels:    SliceLabels(svc, clusterID, src.Labels[mcsapi.LabelManagedBy]),
		},
		AddressType: src.AddressType,
	}
	for _, p := range src.Ports {
		if servicePorts != nil && !servicePorts[portName(p)] {
			continue
		}
		out.Ports = append(out.Ports, *p.DeepCopy())
	}
	RenamePorts(out, portNames)
	if importPorts != nil {
		out.Ports = slices.DeleteFunc(out.Ports, func(p discoveryv1.EndpointPort) bool {
			return !importPorts[portName(p)]
		})
	}
	if len(out.Ports) == 0 {
		out.Ports = nil
	}
	for _, e := range src.Endpoints {
		m := discoveryv1.Endpoint{Conditions: *e.Conditions.DeepCopy()}
		for _, a := range e.Addresses {
			if a = mirrorAddress(a, src.AddressType); a != "" && !slices.Contains(m.Addresses, a) {
				m.Addresses = append(m.Addresses, a)
			}
		}
		if len(m.Addresses) == 0 {
			continue
		}
		if e.Hostname != nil {
			m.Hostname = ptr.To(*e.Hostname)
		}
		if e.Zone != nil {
			m.Zone = ptr.To(*e.Zone)
		}
		out.Endpoints = append(out.Endpoints, m)
	}
	return out
}

// mirrorAddress is addr as an importing cluster's API accepts it: an
// address of family t in canonical form, or "" when addr is none. A source
// cluster can hold forms that newer API servers reject (IPv4 with leading
// zeros, accepted before Kubernetes 1.36 and read as decimal, as
// ParseIPSloppy does); copied as they are, the mirror would be refused and
// hold back every write of the import.
func mirrorAddress(addr string, t discoveryv1.AddressType) string {
	ip := netutils.ParseIPSloppy(addr)
	switch {
	case ip == nil:
		return ""
	case t == discoveryv1.AddressTypeIPv4 && ip.To4() != nil:
		return ip.To4().String()
	case t == discoveryv1.AddressTypeIPv6 && ip.To4() == nil:
		return ip.String()
	}
	return ""
}

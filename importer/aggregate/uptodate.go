package aggregate

import (
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/mcs-dns/mcs-dns/importer/slicedigest"
)

// SliceUpToDate reports whether actual already carries what desired says:
// labels (exactly), address type, endpoints (by digest) and ports.
func SliceUpToDate(desired, actual *discoveryv1.EndpointSlice) bool {
	return metaUpToDate(desired.Labels, actual.Labels, ownsSliceLabel) &&
		desired.AddressType == actual.AddressType &&
		EndpointsUpToDate(desired, actual) &&
		portsEqual(desired.Ports, actual.Ports)
}

// SliceUpToDateAs reports what SliceUpToDate(d, actual) would for d a copy
// of desired with extraLabels added (desired's own labels win) and its
// ports renamed by portNames, as a VIP assignment makes every member's
// copy; it builds no copy, since most compares find nothing to write.
func SliceUpToDateAs(desired, actual *discoveryv1.EndpointSlice, extraLabels, portNames map[string]string) bool {
	return labelsUpToDateWith(desired.Labels, extraLabels, actual.Labels) &&
		desired.AddressType == actual.AddressType &&
		EndpointsUpToDate(desired, actual) &&
		portsEqualRenamed(desired.Ports, actual.Ports, portNames)
}

// labelsUpToDateWith is metaUpToDate of the union of base and extra
// (base winning) against actual, for slice labels.
func labelsUpToDateWith(base, extra, actual map[string]string) bool {
	for k, v := range base {
		if av, ok := actual[k]; !ok || av != v {
			return false
		}
	}
	want := len(base)
	for k, v := range extra {
		if _, inBase := base[k]; inBase {
			continue
		}
		if av, ok := actual[k]; !ok || av != v {
			return false
		}
		want++
	}
	if len(actual) == want {
		// Every label actual has is one wanted.
		return true
	}
	for k := range actual {
		if !ownsSliceLabel(k) {
			continue
		}
		if _, ok := base[k]; ok {
			continue
		}
		if _, ok := extra[k]; !ok {
			return false
		}
	}
	return true
}

// portsEqualRenamed is portsEqual(renamed(a), b), where renamed is
// RenamePorts by names on a copy of a.
func portsEqualRenamed(a, b []discoveryv1.EndpointPort, names map[string]string) bool {
	if len(names) == 0 {
		return portsEqual(a, b)
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		name := a[i].Name
		if to, ok := names[portName(a[i])]; ok && to != portName(a[i]) {
			if b[i].Name == nil || *b[i].Name != to {
				return false
			}
		} else if !ptrEqual(name, b[i].Name) {
			return false
		}
		if !ptrEqual(a[i].Protocol, b[i].Protocol) || !ptrEqual(a[i].Port, b[i].Port) ||
			!ptrEqual(a[i].AppProtocol, b[i].AppProtocol) {
			return false
		}
	}
	return true
}

// SlicesPortsEqual reports whether two slices' port lists are the same
// (nil and empty alike).
func SlicesPortsEqual(a, b []discoveryv1.EndpointPort) bool { return portsEqual(a, b) }

// portsEqual is equality.Semantic.DeepEqual of two port lists (nil and
// empty alike), written out: it runs for every mirrored slice of every
// member on each reconcile, where reflection cost more than the rest of
// the comparison.
func portsEqual(a, b []discoveryv1.EndpointPort) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !ptrEqual(a[i].Name, b[i].Name) || !ptrEqual(a[i].Protocol, b[i].Protocol) ||
			!ptrEqual(a[i].Port, b[i].Port) || !ptrEqual(a[i].AppProtocol, b[i].AppProtocol) {
			return false
		}
	}
	return true
}

func ptrEqual[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// EndpointsUpToDate reports whether actual lists desired's endpoints (the
// rest of the slice aside).
func EndpointsUpToDate(desired, actual *discoveryv1.EndpointSlice) bool {
	return slicedigest.Of(desired) == slicedigest.Of(actual)
}

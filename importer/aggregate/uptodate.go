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

package aggregate

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/mcs-dns/mcs-dns/importer/slicedigest"
)

// SliceUpToDate reports whether actual already carries what desired says:
// labels (exactly), address type, endpoints (by digest) and ports.
func SliceUpToDate(desired, actual *discoveryv1.EndpointSlice) bool {
	return metaUpToDate(desired.Labels, actual.Labels, ownsSliceLabel) &&
		desired.AddressType == actual.AddressType &&
		EndpointsUpToDate(desired, actual) &&
		equality.Semantic.DeepEqual(normPorts(desired.Ports), normPorts(actual.Ports))
}

// EndpointsUpToDate reports whether actual lists desired's endpoints (the
// rest of the slice aside).
func EndpointsUpToDate(desired, actual *discoveryv1.EndpointSlice) bool {
	return slicedigest.Of(desired) == slicedigest.Of(actual)
}

func normPorts(in []discoveryv1.EndpointPort) []discoveryv1.EndpointPort {
	if len(in) == 0 {
		return nil
	}
	return in
}

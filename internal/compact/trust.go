package compact

import "slices"

// The reasons a slice is not trusted (the plugin counts them in
// coredns_mcs_ignored_objects_total{reason}).
const (
	UntrustedNoManager        = "no_manager"
	UntrustedKubeController   = "kubernetes_endpointslice_controller"
	UntrustedManagerNotListed = "untrusted_manager"
	// KubeEndpointSliceManager is the Kubernetes endpointslice
	// controller's endpointslice.kubernetes.io/managed-by value.
	KubeEndpointSliceManager = "endpointslice-controller.k8s.io"
)

// Untrusted is the rule for which EndpointSlices may answer (the plugin's
// endpointslice_managers): it says why a slice managed by manager is not
// served under the trusted managers, "" when it is. With managers nil, a
// slice without a manager or managed by the Kubernetes endpointslice
// controller (which publishes a cluster's own Services, never clusterset
// ones) is not served; with managers listed, only theirs are. Anyone who
// may create EndpointSlices in a namespace could otherwise put addresses,
// per-endpoint names and PTRs under a clusterset name and impersonate a
// cluster ID.
func Untrusted(managers []string, manager string) string {
	switch {
	case manager == "":
		return UntrustedNoManager
	case managers != nil && slices.Contains(managers, manager):
		return ""
	case managers != nil:
		return UntrustedManagerNotListed
	case manager == KubeEndpointSliceManager:
		return UntrustedKubeController
	}
	return ""
}

package compact

import (
	"slices"
	"strings"
)

// The reasons a slice is not trusted (the plugin counts them in
// coredns_mcs_ignored_objects_total{reason}).
const (
	UntrustedNoManager        = "no_manager"
	UntrustedKubeController   = "kubernetes_endpointslice_controller"
	UntrustedManagerNotListed = "untrusted_manager"
	// UntrustedSourceManager: a copy by a listed mirroring manager (as
	// MANAGER/SOURCE) of a slice whose recorded manager is not listed.
	UntrustedSourceManager = "untrusted_source_manager"
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
//
// A listed value may also be MANAGER/SOURCE: the slices of MANAGER (a
// mirroring controller such as mcs-importer) that record, in their
// mcs-dns.io/source-managed-by label (sourceManager), that they copy a
// slice written by SOURCE. A copy that records no source, or another,
// is then not served unless MANAGER is listed alone too.
func Untrusted(managers []string, manager, sourceManager string) string {
	switch {
	case manager == "":
		return UntrustedNoManager
	case managers != nil && slices.Contains(managers, manager):
		return ""
	case managers != nil && sourceManager != "" && slices.Contains(managers, manager+"/"+sourceManager):
		return ""
	case managers != nil && slices.ContainsFunc(managers, func(m string) bool { return strings.HasPrefix(m, manager+"/") }):
		return UntrustedSourceManager
	case managers != nil:
		return UntrustedManagerNotListed
	case manager == KubeEndpointSliceManager:
		return UntrustedKubeController
	}
	return ""
}

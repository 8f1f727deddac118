package cmd

import (
	"fmt"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/mcs-dns/mcs-dns/internal/policy"
)

// sourceRules are mcs-importer's rules for which source endpoints of an
// exported Service it mirrors: its --endpointslice-managers and, when
// given, its --export-policy, as kubectl mcs's own --source-managers and
// --export-policy give them (it cannot read the importer's flags).
type sourceRules struct {
	managers []string
	policy   *policy.Policy
}

// rulesOf reads --source-managers and --export-policy.
func rulesOf(f *memberFlags) (sourceRules, error) {
	r := sourceRules{managers: f.SourceManagers}
	if f.ExportPolicy != "" {
		p, _, err := policy.Load(f.ExportPolicy)
		if err != nil {
			return r, fmt.Errorf("--export-policy: %w", err)
		}
		r.policy = p
	}
	return r, nil
}

// mirrored is what mcs-importer mirrors of srcs, the source slices of an
// export of cluster clusterID: the slices of trusted managers, without the
// endpoint addresses the export policy does not allow (an endpoint left
// without an address goes); notes say, in words, what was left out.
func (r sourceRules) mirrored(clusterID, context string, srcs []*discoveryv1.EndpointSlice) (kept []*discoveryv1.EndpointSlice, notes []string) {
	for _, es := range srcs {
		switch m := es.Labels[discoveryv1.LabelManagedBy]; {
		case m == "":
			notes = append(notes, fmt.Sprintf("EndpointSlice %s in %s not mirrored: no %s label (mcs-importer mirrors only slices of the managers it trusts, --endpointslice-managers)",
				es.Name, context, discoveryv1.LabelManagedBy))
			continue
		case !slices.Contains(r.managers, m):
			notes = append(notes, fmt.Sprintf("EndpointSlice %s in %s not mirrored: its manager %q is not one mcs-importer trusts (--endpointslice-managers)",
				es.Name, context, m))
			continue
		}
		if !r.policy.RestrictsAddresses(clusterID) {
			kept = append(kept, es)
			continue
		}
		out := es.DeepCopy()
		out.Endpoints = nil
		for _, ep := range es.Endpoints {
			var allowed []string
			for _, a := range ep.Addresses {
				if r.policy.AddressAllowed(clusterID, a) {
					allowed = append(allowed, a)
				} else {
					notes = append(notes, fmt.Sprintf("EndpointSlice %s in %s: address %s not mirrored: outside the export policy's addressRanges for cluster %s", es.Name, context, a, clusterID))
				}
			}
			if len(allowed) > 0 {
				ep := *ep.DeepCopy()
				ep.Addresses = allowed
				out.Endpoints = append(out.Endpoints, ep)
			}
		}
		kept = append(kept, out)
	}
	return kept, notes
}

package mcsapi

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ClusterIDMaxLength is the longest valid cluster ID: a label value's
// limit, since every mirrored EndpointSlice carries its cluster's ID in
// LabelSourceCluster (a longer ID would make every slice from the cluster
// fail to write, and the plugin could never read one).
const ClusterIDMaxLength = validation.LabelValueMaxLength

// ValidateClusterID is the one rule every program applies to a cluster ID
// (the importer to the IDs it joins members under and to the export
// policy's cluster keys, the plugin to the IDs it reads from slices and to
// its cluster_id option; see package memberconn): a lower-case DNS-1123
// subdomain, since it appears in DNS names (`<hostname>.<clusterid>.<svc>...`,
// where an ID of several labels spans several), of at most
// ClusterIDMaxLength characters.
func ValidateClusterID(id string) error {
	errs := validation.IsDNS1123Subdomain(id)
	if len(id) > ClusterIDMaxLength {
		errs = append(errs, fmt.Sprintf("longer than %d characters", ClusterIDMaxLength))
	}
	if len(errs) > 0 {
		return fmt.Errorf("cluster ID %q is not valid (a DNS-1123 subdomain of at most %d characters, as it appears in DNS names and in the %s label): %s",
			id, ClusterIDMaxLength, LabelSourceCluster, strings.Join(errs, "; "))
	}
	return nil
}

package mcsapi

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ValidateRegion is the rule every program applies to a region (the
// importer to the value of a member's region ClusterProperty, the plugin
// to its region option and to the value it reads): a non-empty label
// value, since every mirrored EndpointSlice from the cluster carries it
// in LabelSourceRegion.
func ValidateRegion(region string) error {
	errs := validation.IsValidLabelValue(region)
	if region == "" {
		errs = append(errs, "empty")
	}
	if len(errs) > 0 {
		return fmt.Errorf("region %q is not valid (a label value, as it appears in the %s label): %s",
			region, LabelSourceRegion, strings.Join(errs, "; "))
	}
	return nil
}

// ValidateRegionProperty checks the name of a region ClusterProperty (an
// object name: a DNS-1123 subdomain).
func ValidateRegionProperty(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("ClusterProperty name %q is not valid (a DNS-1123 subdomain, e.g. %s): %s",
			name, RegionProperty, strings.Join(errs, "; "))
	}
	return nil
}

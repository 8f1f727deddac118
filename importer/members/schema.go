package members

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// Schema is what a member's MCS CRDs keep of the fields mcs-importer
// writes. Older mcs-api releases (v0.1 to v0.4, serving v1alpha1) lack
// fields v0.5 has (ipFamilies, internalTrafficPolicy, trafficDistribution,
// endpointSliceObjects, import conditions, a condition's
// observedGeneration) and allow one IP per import; the API server prunes
// unknown fields. Comparing what the importer wants with what such a
// member stores would then never find them equal, and every pass and
// resync would write again. The importer prunes what it wants the same
// way before comparing and writing (Prune*).
//
// A nil field set means "not known": everything is kept (what a member
// whose schema could not be read gets, the behaviour before this
// existed).
type Schema struct {
	importSpec, importStatus, importPort, exportCondition map[string]bool
	// maxImportIPs is spec.ips's maxItems (0: no limit).
	maxImportIPs int
}

// String lists what the schema lacks (for the start-up log).
func (s Schema) String() string {
	var missing []string
	for _, f := range []struct {
		set    map[string]bool
		prefix string
		fields []string
	}{
		{s.importSpec, "ServiceImport spec.", []string{"ipFamilies", "internalTrafficPolicy", "trafficDistribution", "sessionAffinityConfig"}},
		{s.importStatus, "ServiceImport status.", []string{"endpointSliceObjects", "conditions"}},
		{s.importPort, "ServiceImport spec.ports[].", []string{"appProtocol"}},
		{s.exportCondition, "ServiceExport status.conditions[].", []string{"observedGeneration"}},
	} {
		for _, name := range f.fields {
			if !has(f.set, name) {
				missing = append(missing, f.prefix+name)
			}
		}
	}
	out := "complete"
	if len(missing) > 0 {
		out = "without " + strings.Join(missing, ", ")
	}
	if s.maxImportIPs > 0 {
		out += fmt.Sprintf("; ServiceImport spec.ips: at most %d", s.maxImportIPs)
	}
	return out
}

func has(set map[string]bool, field string) bool { return set == nil || set[field] }

// PruneImport drops from si what the member's schema does not keep
// (spec and status).
func (s Schema) PruneImport(si *mcsv1beta1.ServiceImport) {
	sp := &si.Spec
	if !has(s.importSpec, "ipFamilies") {
		sp.IPFamilies = nil
	}
	if !has(s.importSpec, "internalTrafficPolicy") {
		sp.InternalTrafficPolicy = nil
	}
	if !has(s.importSpec, "trafficDistribution") {
		sp.TrafficDistribution = nil
	}
	if !has(s.importSpec, "sessionAffinityConfig") {
		sp.SessionAffinityConfig = nil
	}
	if !has(s.importPort, "appProtocol") {
		for i := range sp.Ports {
			sp.Ports[i].AppProtocol = nil
		}
	}
	if s.maxImportIPs > 0 && len(sp.IPs) > s.maxImportIPs {
		// The first is the primary family's.
		sp.IPs = sp.IPs[:s.maxImportIPs]
	}
	s.PruneImportStatus(&si.Status)
}

// PruneImportStatus drops from st what the member's schema does not keep.
func (s Schema) PruneImportStatus(st *mcsv1beta1.ServiceImportStatus) {
	if !has(s.importStatus, "endpointSliceObjects") {
		st.EndpointSliceObjects = ""
	}
	if !has(s.importStatus, "conditions") {
		st.Conditions = nil
	}
}

// PruneExportConditions drops from conds (in place) what the member's
// ServiceExport conditions do not keep.
func (s Schema) PruneExportConditions(conds []metav1.Condition) {
	if !has(s.exportCondition, "observedGeneration") {
		for i := range conds {
			conds[i].ObservedGeneration = 0
		}
	}
}

// openAPISchema is the part of an OpenAPI v3 schema object read here.
type openAPISchema struct {
	Properties map[string]*openAPISchema `json:"properties"`
	Items      *openAPISchema            `json:"items"`
	MaxItems   *int64                    `json:"maxItems"`
	GVK        []struct {
		Group, Version, Kind string
	} `json:"x-kubernetes-group-version-kind"`
}

// at returns the schema at a path of property names ("[]" steps into
// array items), or nil.
func (o *openAPISchema) at(path ...string) *openAPISchema {
	for _, p := range path {
		if o == nil {
			return nil
		}
		if p == "[]" {
			o = o.Items
			continue
		}
		o = o.Properties[p]
	}
	return o
}

// fields returns the property names of the schema at path, or nil when
// there is no such schema or it lists none (then nothing is pruned).
func (o *openAPISchema) fields(path ...string) map[string]bool {
	s := o.at(path...)
	if s == nil || len(s.Properties) == 0 {
		return nil
	}
	out := make(map[string]bool, len(s.Properties))
	for k := range s.Properties {
		out[k] = true
	}
	return out
}

// DetectSchema reads, from the member's OpenAPI v3 document of each MCS
// group version it uses, which fields its ServiceImport and ServiceExport
// schemas have.
func DetectSchema(dc discovery.DiscoveryInterface, exportVersion, importVersion string) (Schema, error) {
	paths, err := dc.OpenAPIV3().Paths()
	if err != nil {
		return Schema{}, fmt.Errorf("reading the OpenAPI v3 index: %w", err)
	}
	kinds := map[string]*openAPISchema{}
	for _, v := range uniq(exportVersion, importVersion) {
		gv, ok := paths["apis/"+mcsapi.Group+"/"+v]
		if !ok {
			return Schema{}, fmt.Errorf("no OpenAPI v3 document for %s/%s", mcsapi.Group, v)
		}
		b, err := gv.Schema("application/json")
		if err != nil {
			return Schema{}, fmt.Errorf("reading the OpenAPI v3 document of %s/%s: %w", mcsapi.Group, v, err)
		}
		var doc struct {
			Components struct {
				Schemas map[string]*openAPISchema `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return Schema{}, fmt.Errorf("decoding the OpenAPI v3 document of %s/%s: %w", mcsapi.Group, v, err)
		}
		names := make([]string, 0, len(doc.Components.Schemas))
		for n := range doc.Components.Schemas {
			names = append(names, n)
		}
		sort.Strings(names) // deterministic if a kind were listed twice
		for _, n := range names {
			o := doc.Components.Schemas[n]
			for _, gvk := range o.GVK {
				if gvk.Group == mcsapi.Group && gvk.Version == v {
					kinds[gvk.Kind+"/"+v] = o
				}
			}
		}
	}
	imp, exp := kinds["ServiceImport/"+importVersion], kinds["ServiceExport/"+exportVersion]
	if imp == nil || exp == nil {
		return Schema{}, fmt.Errorf("the OpenAPI v3 documents lack ServiceImport %s or ServiceExport %s", importVersion, exportVersion)
	}
	s := Schema{
		importSpec:      imp.fields("spec"),
		importStatus:    imp.fields("status"),
		importPort:      imp.fields("spec", "ports", "[]"),
		exportCondition: exp.fields("status", "conditions", "[]"),
	}
	if ips := imp.at("spec", "ips"); ips != nil && ips.MaxItems != nil && *ips.MaxItems > 0 {
		s.maxImportIPs = int(*ips.MaxItems)
	}
	return s, nil
}

func uniq(a, b string) []string {
	if a == b {
		return []string{a}
	}
	return []string{a, b}
}

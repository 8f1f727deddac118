// Package mcsapi holds the facts about the Multi-Cluster Services API that
// both the DNS plugin and the importer rely on: well-known labels and
// annotations, the About API ClusterProperty, and discovery of which
// multicluster.x-k8s.io version a cluster serves. Nothing else in the
// project should spell these strings.
package mcsapi

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

const (
	// Group is the MCS API group.
	Group = "multicluster.x-k8s.io"

	// ServiceImports and ServiceExports are the MCS resources.
	ServiceImports = "serviceimports"
	ServiceExports = "serviceexports"

	// LabelServiceName names the ServiceImport an EndpointSlice belongs to.
	LabelServiceName = "multicluster.kubernetes.io/service-name"
	// LabelSourceCluster is the ID of the cluster an EndpointSlice came from.
	LabelSourceCluster = "multicluster.kubernetes.io/source-cluster"
	// LabelManagedBy is the standard EndpointSlice managed-by label.
	LabelManagedBy = "endpointslice.kubernetes.io/managed-by"
	// ManagedByImporter is the managed-by value of everything mcs-importer writes.
	ManagedByImporter = "mcs-importer.mcs-dns.io"
	// LabelSourceManagedBy on a mirrored EndpointSlice is its source
	// slice's endpointslice.kubernetes.io/managed-by value, so that a
	// reader (the plugin's endpointslice_managers) can trust a copy by
	// who wrote the original as well as by who copied it.
	LabelSourceManagedBy = "mcs-dns.io/source-managed-by"
	// LabelSourceRegion on a mirrored EndpointSlice is the region of its
	// source cluster (the value of that cluster's region ClusterProperty,
	// see RegionProperty), absent when the cluster has none: the plugin
	// ranks the endpoints of clusters in its own region second.
	LabelSourceRegion = "mcs-dns.io/source-region"
	// LabelKubeServiceName is the label kube-proxy uses to route a Service's slices.
	LabelKubeServiceName = "kubernetes.io/service-name"

	// AnnotationDerivedService on a ServiceImport names the derived Service
	// whose ClusterIPs are the import's VIPs.
	AnnotationDerivedService = "multicluster.kubernetes.io/derived-service"
	// AnnotationUseClusterSetIP on a ServiceExport opts it into a
	// clusterset-wide VIP from the ClusterSet CIDR.
	AnnotationUseClusterSetIP = "mcs-dns.io/use-clusterset-ip"
	// AnnotationClusterSetIP on a ServiceImport records the clusterset-wide
	// VIP(s) allocated to it: the allocation state lives in the member
	// clusters, so restarts and racing importers agree.
	AnnotationClusterSetIP = "mcs-dns.io/clusterset-ip"
	// LabelDerivedFor on a derived Service names the ServiceImport it
	// gives a VIP to.
	LabelDerivedFor = "mcs-dns.io/derived-for"
	// LabelAppManagedBy marks the Services mcs-importer owns.
	LabelAppManagedBy = "app.kubernetes.io/managed-by"
)

// About API (KEP-2149).
const (
	AboutGroup = "about.k8s.io"
	// ClusterIDProperty is the ClusterProperty whose value is the cluster ID.
	ClusterIDProperty = "cluster.clusterset.k8s.io"
	// ClusterSetProperty is the ClusterProperty whose value names the clusterset.
	ClusterSetProperty = "clusterset.k8s.io"
	// RegionProperty is the default name of the ClusterProperty whose
	// value is the cluster's region. It is the well-known node label
	// topology.kubernetes.io/region turned into an object name (which
	// cannot hold a '/'), so that the value an operator already gives
	// its nodes reads as what it is.
	RegionProperty = "region.topology.kubernetes.io"
)

// ClusterPropertyGVR is the About API ClusterProperty resource.
var ClusterPropertyGVR = schema.GroupVersionResource{Group: AboutGroup, Version: "v1alpha1", Resource: "clusterproperties"}

// PreferredVersions lists the MCS API versions we understand, best first.
var PreferredVersions = []string{"v1beta1", "v1alpha1"}

// ErrNotServed is ServedVersion's error when the server answered and
// serves the resource in none of PreferredVersions.
var ErrNotServed = errors.New("is not served")

// ServedVersion asks the cluster which version of resource (ServiceImports
// or ServiceExports) it serves and returns the best one we understand:
// v1beta1 where served, else v1alpha1. Older clusters (mcs-api <= v0.4)
// serve only v1alpha1.
func ServedVersion(dc discovery.DiscoveryInterface, resource string) (schema.GroupVersionResource, error) {
	gvrs, err := ServedVersions(dc, resource)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return gvrs[0], nil
}

// ServedVersions is ServedVersion of each resource, in order, asking the
// cluster about each version once: ServiceExports and ServiceImports are
// one group, so both are usually answered by one request.
func ServedVersions(dc discovery.DiscoveryInterface, resources ...string) ([]schema.GroupVersionResource, error) {
	type answer struct {
		list *metav1.APIResourceList
		err  error
	}
	asked := map[string]answer{}
	ask := func(gv string) (*metav1.APIResourceList, error) {
		a, ok := asked[gv]
		if !ok {
			a.list, a.err = dc.ServerResourcesForGroupVersion(gv)
			asked[gv] = a
		}
		return a.list, a.err
	}
	out := make([]schema.GroupVersionResource, 0, len(resources))
	for _, resource := range resources {
		gvr, err := servedVersion(ask, resource)
		if err != nil {
			return nil, err
		}
		out = append(out, gvr)
	}
	return out, nil
}

func servedVersion(ask func(gv string) (*metav1.APIResourceList, error), resource string) (schema.GroupVersionResource, error) {
	var errs []error
	for _, v := range PreferredVersions {
		gv := schema.GroupVersion{Group: Group, Version: v}
		list, err := ask(gv.String())
		if apierrors.IsNotFound(err) {
			continue // that version is not served
		}
		if err != nil {
			// Not past a version that could not be asked about: a
			// passing error must not pick an older version.
			errs = append(errs, fmt.Errorf("%s: %w", gv, err))
			break
		}
		for _, r := range list.APIResources {
			if r.Name == resource {
				return gv.WithResource(resource), nil
			}
		}
	}
	if len(errs) > 0 {
		// Not an answer about the CRDs: the server could not be asked
		// (unreachable, credentials, permissions).
		return schema.GroupVersionResource{}, fmt.Errorf("discovering %s.%s: %w", resource, Group, errors.Join(errs...))
	}
	return schema.GroupVersionResource{}, fmt.Errorf("%s.%s %w (are the mcs-api CRDs installed?)", resource, Group, ErrNotServed)
}

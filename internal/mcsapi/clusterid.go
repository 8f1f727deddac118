package mcsapi

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
)

// ClusterIDMaxLength is the longest valid cluster ID: a label value's
// limit, since every mirrored EndpointSlice carries its cluster's ID in
// LabelSourceCluster (a longer ID would make every slice from the cluster
// fail to write, and the plugin could never read one).
const ClusterIDMaxLength = validation.LabelValueMaxLength

// ValidateClusterID is the one rule both programs apply to a cluster ID
// (the importer to the IDs it joins members under, the plugin to the IDs it
// reads from slices and to its cluster_id option): a lower-case DNS-1123
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

// ErrNoClusterProperty: the cluster has no ClusterProperty
// ClusterIDProperty, or does not serve the About API at all.
var ErrNoClusterProperty = errors.New("ClusterProperty " + ClusterIDProperty + " not found (or " + ClusterPropertyGVR.GroupResource().String() + " not served)")

// ErrNoClusterIDValue: the ClusterProperty has no spec.value.
var ErrNoClusterIDValue = errors.New("no spec.value")

// ReadClusterID reads the value of the About API (KEP-2149) ClusterProperty
// ClusterIDProperty: ErrNoClusterProperty when there is none,
// ErrNoClusterIDValue when it has no value, any other error as the API
// server returned it. What to do without one (the importer falls back to
// the context name, the plugin treats no endpoint as local) and checking
// the value (ValidateClusterID) are the caller's.
func ReadClusterID(ctx context.Context, dc dynamic.Interface) (string, error) {
	obj, err := dc.Resource(ClusterPropertyGVR).Get(ctx, ClusterIDProperty, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// No such property, or no About API at all: both are NotFound.
		return "", ErrNoClusterProperty
	case err != nil:
		return "", fmt.Errorf("reading ClusterProperty %s: %w", ClusterIDProperty, err)
	}
	id, _, _ := unstructured.NestedString(obj.Object, "spec", "value")
	if id == "" {
		return "", fmt.Errorf("ClusterProperty %s: %w", ClusterIDProperty, ErrNoClusterIDValue)
	}
	return id, nil
}

// Where a member's cluster ID comes from (MemberClusterID's source).
const (
	MemberIDFromProperty = "ClusterProperty"
	MemberIDFromContext  = "context"
)

// MemberClusterID is the cluster ID of a member cluster reached through a
// kubeconfig context, as mcs-importer joins it and kubectl mcs shows it:
// the value of the ClusterProperty ClusterIDProperty (ReadClusterID), else,
// when the property (or the About API) is absent, fallback (the context
// name). source is MemberIDFromProperty or MemberIDFromContext. Checking
// the ID (ValidateClusterID) is the caller's.
func MemberClusterID(ctx context.Context, dyn dynamic.Interface, fallback string) (id, source string, err error) {
	id, err = ReadClusterID(ctx, dyn)
	switch {
	case errors.Is(err, ErrNoClusterProperty):
		return fallback, MemberIDFromContext, nil
	case err != nil:
		return "", "", err
	}
	return id, MemberIDFromProperty, nil
}

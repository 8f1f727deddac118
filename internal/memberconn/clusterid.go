package memberconn

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// ErrNoClusterProperty: the cluster has no ClusterProperty
// mcsapi.ClusterIDProperty, or does not serve the About API at all.
var ErrNoClusterProperty = errors.New("ClusterProperty " + mcsapi.ClusterIDProperty + " not found (or " + mcsapi.ClusterPropertyGVR.GroupResource().String() + " not served)")

// ErrNoClusterIDValue: the ClusterProperty has no spec.value.
var ErrNoClusterIDValue = errors.New("no spec.value")

// ReadClusterID reads the value of the About API (KEP-2149) ClusterProperty
// mcsapi.ClusterIDProperty as it is: ErrNoClusterProperty when there is
// none, ErrNoClusterIDValue when it has no value, any other error as the
// API server returned it. What to do without one (the importer falls back
// to the context name and then checks whichever ID it has) is the
// caller's; a caller without a fallback reads with ReadValidClusterID.
func ReadClusterID(ctx context.Context, dc dynamic.Interface) (string, error) {
	obj, err := dc.Resource(mcsapi.ClusterPropertyGVR).Get(ctx, mcsapi.ClusterIDProperty, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// No such property, or no About API at all: both are NotFound.
		return "", ErrNoClusterProperty
	case err != nil:
		return "", fmt.Errorf("reading ClusterProperty %s: %w", mcsapi.ClusterIDProperty, err)
	}
	id, _, _ := unstructured.NestedString(obj.Object, "spec", "value")
	if id == "" {
		return "", fmt.Errorf("ClusterProperty %s: %w", mcsapi.ClusterIDProperty, ErrNoClusterIDValue)
	}
	return id, nil
}

// ReadValidClusterID is ReadClusterID, and a value that breaks
// mcsapi.ValidateClusterID is an error too: the read of the plugin, which
// has no fallback (without an ID no endpoint is local).
func ReadValidClusterID(ctx context.Context, dc dynamic.Interface) (string, error) {
	id, err := ReadClusterID(ctx, dc)
	if err != nil {
		return "", err
	}
	if err := mcsapi.ValidateClusterID(id); err != nil {
		return "", fmt.Errorf("ClusterProperty %s: %w", mcsapi.ClusterIDProperty, err)
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
// the value of the ClusterProperty (ReadClusterID), else, when the
// property (or the About API) is absent, fallback (the context name).
// source is MemberIDFromProperty or MemberIDFromContext. Checking the ID
// (mcsapi.ValidateClusterID) is the caller's.
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

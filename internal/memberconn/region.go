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

// ErrNotRegion: the region ClusterProperty has no value, or one that is
// not a region.
var ErrNotRegion = errors.New("not a region")

// ReadRegion reads the cluster's region: the value of the About API
// ClusterProperty property (mcsapi.RegionProperty when ""). A cluster
// without that property, or without the About API, has no region: "" and
// no error. A property without a value, or whose value is not a region
// (mcsapi.ValidateRegion), is an error wrapping ErrNotRegion; any error
// of the API server is returned as it is. Callers log an error and go on without a region: a region only
// orders answers, so it never keeps anything from working.
func ReadRegion(ctx context.Context, dc dynamic.Interface, property string) (string, error) {
	if property == "" {
		property = mcsapi.RegionProperty
	}
	obj, err := dc.Resource(mcsapi.ClusterPropertyGVR).Get(ctx, property, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading ClusterProperty %s: %w", property, err)
	}
	region, _, _ := unstructured.NestedString(obj.Object, "spec", "value")
	if region == "" {
		return "", fmt.Errorf("ClusterProperty %s: no spec.value: %w", property, ErrNotRegion)
	}
	if err := mcsapi.ValidateRegion(region); err != nil {
		return "", fmt.Errorf("ClusterProperty %s: %w: %w", property, ErrNotRegion, err)
	}
	return region, nil
}

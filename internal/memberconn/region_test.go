package memberconn

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

func property(name string, value any) *unstructured.Unstructured {
	spec := map[string]any{}
	if value != nil {
		spec["value"] = value
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": mcsapi.ClusterPropertyGVR.GroupVersion().String(),
		"kind":       "ClusterProperty",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
}

// No property is no region; a malformed one is an error the caller
// logs; the name is configurable.
func TestReadRegion(t *testing.T) {
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{mcsapi.ClusterPropertyGVR: "ClusterPropertyList"},
		property(mcsapi.RegionProperty, "eu-west-1"),
		property("zone.example.com", "eu west"),
		property("empty.example.com", nil),
	)
	ctx := context.Background()
	r, err := ReadRegion(ctx, dc, "")
	require.NoError(t, err)
	assert.Equal(t, "eu-west-1", r)
	r, err = ReadRegion(ctx, dc, "missing.example.com")
	require.NoError(t, err)
	assert.Empty(t, r)
	_, err = ReadRegion(ctx, dc, "zone.example.com")
	assert.ErrorContains(t, err, "not valid")
	assert.ErrorIs(t, err, ErrNotRegion)
	_, err = ReadRegion(ctx, dc, "empty.example.com")
	assert.ErrorIs(t, err, ErrNotRegion)
}

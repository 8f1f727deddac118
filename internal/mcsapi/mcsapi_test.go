package mcsapi

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// servedLists answers ServerResourcesForGroupVersion from lists (a
// group version absent is not served; one in fail cannot be asked) and
// counts the questions.
type servedLists struct {
	discovery.DiscoveryInterface
	lists map[string][]string
	fail  map[string]bool
	asked []string
}

func (d *servedLists) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.asked = append(d.asked, gv)
	if d.fail[gv] {
		return nil, errors.New("connection refused")
	}
	names, ok := d.lists[gv]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	list := &metav1.APIResourceList{GroupVersion: gv}
	for _, n := range names {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: n})
	}
	return list, nil
}

func TestServedVersions(t *testing.T) {
	beta, alpha := Group+"/v1beta1", Group+"/v1alpha1"
	t.Run("both at v1beta1: one question", func(t *testing.T) {
		d := &servedLists{lists: map[string][]string{beta: {ServiceExports, ServiceImports}, alpha: {ServiceExports, ServiceImports}}}
		got, err := ServedVersions(d, ServiceExports, ServiceImports)
		require.NoError(t, err)
		assert.Equal(t, []string{"v1beta1", "v1beta1"}, []string{got[0].Version, got[1].Version})
		assert.Equal(t, ServiceImports, got[1].Resource)
		assert.Equal(t, []string{beta}, d.asked)
	})
	t.Run("exports only at v1alpha1", func(t *testing.T) {
		d := &servedLists{lists: map[string][]string{beta: {ServiceImports}, alpha: {ServiceExports, ServiceImports}}}
		got, err := ServedVersions(d, ServiceExports, ServiceImports)
		require.NoError(t, err)
		assert.Equal(t, []string{"v1alpha1", "v1beta1"}, []string{got[0].Version, got[1].Version})
		assert.Equal(t, []string{beta, alpha}, d.asked, "each version asked once")
	})
	t.Run("a version that cannot be asked about picks no older one", func(t *testing.T) {
		d := &servedLists{lists: map[string][]string{alpha: {ServiceExports, ServiceImports}}, fail: map[string]bool{beta: true}}
		_, err := ServedVersions(d, ServiceExports, ServiceImports)
		require.Error(t, err)
		assert.NotErrorIs(t, err, ErrNotServed)
	})
	t.Run("not served", func(t *testing.T) {
		d := &servedLists{lists: map[string][]string{beta: {ServiceExports}}}
		_, err := ServedVersions(d, ServiceExports, ServiceImports)
		assert.ErrorIs(t, err, ErrNotServed)
		gvr, err := ServedVersion(d, ServiceExports)
		require.NoError(t, err)
		assert.Equal(t, "v1beta1", gvr.Version)
	})
}

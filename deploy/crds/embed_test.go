package crds

import (
	"testing"

	"github.com/stretchr/testify/require"
	mcscrd "sigs.k8s.io/mcs-api/config/crd"
)

// The mcs-api CRDs we ship must stay byte-identical to the pinned module's.
func TestMCSAPICRDsMatchModule(t *testing.T) {
	se, err := Raw("multicluster.x-k8s.io_serviceexports.yaml")
	require.NoError(t, err)
	require.Equal(t, string(mcscrd.ServiceExportCRD), string(se))
	si, err := Raw("multicluster.x-k8s.io_serviceimports.yaml")
	require.NoError(t, err)
	require.Equal(t, string(mcscrd.ServiceImportCRD), string(si))
}

func TestAllDecode(t *testing.T) {
	all, err := All()
	require.NoError(t, err)
	require.Len(t, all, 3)
	require.Equal(t, "clusterproperties.about.k8s.io", all[2].Name)
	for _, crd := range all[:2] {
		var served []string
		for _, v := range crd.Spec.Versions {
			if v.Served {
				served = append(served, v.Name)
			}
		}
		require.ElementsMatch(t, []string{"v1alpha1", "v1beta1"}, served, crd.Name)
	}
}

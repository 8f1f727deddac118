package member

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The embedded files are the kustomization's resources, in its order.
func TestFilesAreTheKustomization(t *testing.T) {
	raw, err := os.ReadFile("kustomization.yaml")
	require.NoError(t, err)
	var k struct {
		Resources []string `json:"resources"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &k))
	require.Equal(t, k.Resources, Files)
}

func TestObjects(t *testing.T) {
	objs, err := Objects()
	require.NoError(t, err)
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	require.Equal(t, []string{
		"Namespace//" + Namespace,
		"ServiceAccount/" + Namespace + "/" + ServiceAccount,
		"ClusterRole//mcs-dns:importer",
		"ClusterRoleBinding//mcs-dns:importer",
		"Role/" + Namespace + "/mcs-dns:importer-leader-election",
		"RoleBinding/" + Namespace + "/mcs-dns:importer-leader-election",
		"ClusterRole//mcs-dns:aggregate-to-edit",
		"ClusterRole//mcs-dns:aggregate-to-view",
	}, got)
}

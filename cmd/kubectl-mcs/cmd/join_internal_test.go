package cmd

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// Every object join writes has a known resource, and the CRDs come in
// deploy/crds' order.
func TestMemberObjects(t *testing.T) {
	crdObjs, identity, err := memberObjects()
	require.NoError(t, err)
	var names []string
	for _, o := range crdObjs {
		assert.Equal(t, "CustomResourceDefinition", o.GetKind())
		names = append(names, o.GetName())
	}
	assert.Equal(t, []string{"serviceexports.multicluster.x-k8s.io", "serviceimports.multicluster.x-k8s.io", "clusterproperties.about.k8s.io"}, names)
	require.NotEmpty(t, identity)
	assert.Equal(t, "Namespace", identity[0].GetKind(), "the namespace first")
	for _, o := range append(append(crdObjs, identity...), clusterPropertyObject("east"), tokenSecretObject()) {
		_, ok := gvrOf[o.GetKind()]
		assert.True(t, ok, o.GetKind())
	}
}

func TestDeploymentContexts(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
		ok   bool
	}{
		{[]string{"--kubeconfig=/k", "--contexts=east,west"}, []string{"east", "west"}, true},
		{[]string{"-contexts", "east, west ,"}, []string{"east", "west"}, true},
		{[]string{"--metrics-addr=:8080"}, nil, false},
	} {
		got, ok := deploymentContexts([]corev1.Container{{Name: "x"}, {Name: "mcs-importer", Args: tc.args}})
		assert.Equal(t, tc.ok, ok, tc.args)
		assert.Equal(t, tc.want, got, tc.args)
	}
}

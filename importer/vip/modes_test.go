package vip

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// TestForModeClusterSetIPPolicy: in clusterset-cidr mode the provider
// answers which exports ask for a clusterset-wide VIP: the export's
// annotation, else --clusterset-ip-default; the other modes give none.
func TestForModeClusterSetIPPolicy(t *testing.T) {
	export := func(v string) *mcsv1beta1.ServiceExport {
		e := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
		if v != "" {
			e.Annotations = map[string]string{mcsapi.AnnotationUseClusterSetIP: v}
		}
		return e
	}
	for _, def := range []bool{false, true} {
		p, leftovers, err := ForMode(Config{Mode: ModeCIDR, CIDRs: []string{"10.250.0.0/16"}, ClusterSetIPDefault: def}, nil)
		require.NoError(t, err)
		assert.Nil(t, leftovers)
		cs, ok := p.(ClusterSetIPs)
		require.True(t, ok, "clusterset-cidr gives clusterset-wide VIPs")
		assert.True(t, cs.WantsClusterSetIP(export("true")), "the annotation opts in")
		assert.False(t, cs.WantsClusterSetIP(export("false")), "the annotation opts out")
		assert.Equal(t, def, cs.WantsClusterSetIP(export("")), "else the default")
		assert.Equal(t, def, cs.WantsClusterSetIP(export("maybe")), "else the default")
	}
	for _, mode := range []string{ModeDerived, ModeNone} {
		p, _, err := ForMode(Config{Mode: mode}, nil)
		require.NoError(t, err)
		_, ok := p.(ClusterSetIPs)
		assert.False(t, ok, mode)
	}
	_, _, err := ForMode(Config{Mode: "banana"}, nil)
	assert.ErrorContains(t, err, `--vip-mode must be derived-service, clusterset-cidr or none, not "banana"`)
	assert.Len(t, Config{Mode: ModeNone, CIDRs: []string{"10.0.0.0/8"}, ClusterSetIPDefault: true}.Validate(), 2)
	assert.Empty(t, Config{Mode: ModeCIDR, CIDRs: []string{"10.0.0.0/8"}, ClusterSetIPDefault: true}.Validate())
}

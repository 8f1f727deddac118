package helm_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/mcs-dns/mcs-dns/internal/stanza"
)

// readStanza reads the one mcs stanza of a Corefile as the plugin's setup
// does, so that a rendered Corefile our CoreDNS would refuse fails here.
func readStanza(t testing.TB, corefile string) stanza.Stanza {
	t.Helper()
	sts, err := stanza.Read("Corefile", strings.NewReader(corefile))
	require.NoError(t, err, "Corefile:\n%s", corefile)
	require.Len(t, sts, 1, "mcs stanzas in:\n%s", corefile)
	return sts[0]
}

// TestUpstreamCoreDNSChart renders the upstream CoreDNS chart (a copy in
// testdata/coredns-upstream) with the values deploy/helm/README.md gives:
// it runs our image with an mcs server block and may read what the plugin
// reads.
func TestUpstreamCoreDNSChart(t *testing.T) {
	raw, err := os.ReadFile("upstream-coredns-values.yaml")
	require.NoError(t, err)
	vals := map[string]any{}
	require.NoError(t, yaml.Unmarshal(raw, &vals))
	objs := render(t, "testdata/coredns-upstream/coredns", vals)

	var cm, dep, role, svc *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ConfigMap":
			cm = o
		case "Deployment":
			dep = o
		case "ClusterRole":
			role = o
		case "Service":
			svc = o
		}
	}
	require.NotNil(t, cm, "ConfigMap in %v", keys(objs))
	require.NotNil(t, dep)
	require.NotNil(t, role)
	require.NotNil(t, svc)

	corefile, _, _ := unstructured.NestedString(cm.Object, "data", "Corefile")
	st := readStanza(t, corefile)
	require.Equal(t, []string{"clusterset.local."}, st.Zones)
	require.Equal(t, []string{"mcs-importer.mcs-dns.io"}, st.Managers)
	require.Equal(t, "east", st.Shaping.ClusterID)
	require.True(t, st.Shaping.Rotate)
	require.Contains(t, corefileLines(corefile), "clusterset.local.:1053 {")
	for _, want := range []string{"health", "ready", "prometheus :9153", "bufsize 1232"} {
		require.Contains(t, corefileLines(corefile), want)
	}

	c := container(t, dep)
	require.Equal(t, "mcs-dns/coredns:latest", c["image"])
	// DNS on 1053 over UDP and TCP, nothing on a privileged port.
	var dnsPorts []string
	for _, p := range c["ports"].([]any) {
		p := p.(map[string]any)
		require.NotEqualValues(t, 53, p["containerPort"], "%v", p)
		if p["containerPort"] == int64(1053) {
			dnsPorts = append(dnsPorts, p["protocol"].(string))
		}
	}
	require.ElementsMatch(t, []string{"UDP", "TCP"}, dnsPorts)
	sc := c["securityContext"].(map[string]any)
	require.NotContains(t, sc["capabilities"], "add", "our image has no file capabilities to use")
	svcPorts, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	for _, p := range svcPorts {
		p := p.(map[string]any)
		require.EqualValues(t, 53, p["port"], "%v", p)
		require.EqualValues(t, 1053, p["targetPort"], "%v", p)
	}

	// What the plugin needs (plugin/mcs/README.md, RBAC).
	verbs := map[string][]string{}
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	for _, r := range rules {
		r := r.(map[string]any)
		for _, g := range r["apiGroups"].([]any) {
			for _, res := range r["resources"].([]any) {
				for _, v := range r["verbs"].([]any) {
					k := g.(string) + "/" + res.(string)
					verbs[k] = append(verbs[k], v.(string))
				}
			}
		}
	}
	for _, res := range []string{"multicluster.x-k8s.io/serviceimports", "discovery.k8s.io/endpointslices"} {
		require.Subset(t, verbs[res], []string{"list", "watch"}, res)
	}
}

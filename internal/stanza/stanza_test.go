package stanza_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/stanza"
)

func TestRead(t *testing.T) {
	t.Setenv("MCS_TEST_CLUSTER", "west")
	in := `# options that do not decide answers are skipped, not checked
clusterset.local 10.250.0.0/16 {
    errors
    mcs clusterset.local 10.250.0.0/16 {
        kubeconfig /nowhere/kubeconfig east
        ttl 30
        cluster_id {$MCS_TEST_CLUSTER}
        region eu-west-1
        region_property region.example.com
        locality local-first
        rotate
        max_answers 20
        endpointslice_managers mcs-importer.mcs-dns.io other.example/endpointslice-controller.k8s.io
    }
}
example.org {
    whoami
}
.:1053 {
    mcs
}
`
	got, err := stanza.Read("Corefile", strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, []string{"clusterset.local", "10.250.0.0/16"}, got[0].Keys)
	assert.Equal(t, 4, got[0].Line)
	assert.Equal(t, []string{"clusterset.local.", "250.10.in-addr.arpa."}, got[0].Zones)
	assert.Equal(t, answers.Shaping{ClusterID: "west", Region: "eu-west-1", Locality: answers.LocalityLocalFirst, Rotate: true, MaxAnswers: 20}, got[0].Shaping)
	assert.Equal(t, "region.example.com", got[0].RegionProperty)
	assert.Equal(t, []string{"mcs-importer.mcs-dns.io", "other.example/endpointslice-controller.k8s.io"}, got[0].Managers)
	assert.Equal(t, []string{"clusterset.local."}, got[1].Zones, "the default zone")
	assert.Equal(t, stanza.Options{}, got[1].Options)
}

// The shipped Corefiles read, and the errors are the plugin's own.
func TestReadExamplesAndErrors(t *testing.T) {
	files, err := filepath.Glob("../../corefile-examples/*.Corefile")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		got, err := stanza.Read(f, strings.NewReader(string(raw)))
		require.NoError(t, err, f)
		if strings.HasSuffix(f, "/production.Corefile") {
			require.Len(t, got, 1)
			assert.True(t, got[0].Shaping.Rotate)
			assert.Equal(t, []string{"mcs-importer.mcs-dns.io"}, got[0].Managers)
		}
	}
	for in, want := range map[string]string{
		"a {\n mcs {\n  max_answers 0\n }\n}":                `Corefile:3 - Error during parsing: max_answers "0" is not a number in 1..4096`,
		"a {\n mcs {\n  locality near\n }\n}":                `locality "near" is neither local-first nor none`,
		"a {\n mcs {\n  cluster_id Not_An_ID\n }\n}":         `cluster_id: cluster ID "Not_An_ID" is not valid (a DNS-1123 subdomain`,
		"a {\n mcs {\n  rotate always\n }\n}":                "Wrong argument count",
		"a {\n mcs {\n  region eu west\n }\n}":               "Wrong argument count",
		"a {\n mcs {\n  region -eu\n }\n}":                   `region: region "-eu" is not valid (a label value`,
		"a {\n mcs {\n  region_property a/b\n }\n}":          `region_property: ClusterProperty name "a/b" is not valid`,
		"a {\n mcs in-addr.arpa\n}":                          "at least one zone must be a forward (non-reverse) zone",
		"a {\n mcs\n mcs\n}":                                 "server block a has more than one mcs stanza",
		"a {\n mcs {\n  endpointslice_managers\n }\n}":       "Wrong argument count",
		"a {\n mcs {\n  endpointslice_managers a/\n }\n}":    `endpointslice_managers: "a/" is neither MANAGER nor MANAGER/SOURCE: "" is not a label value: empty`,
		"a {\n mcs {\n  endpointslice_managers a/b/c\n }\n}": `endpointslice_managers: "a/b/c" is neither MANAGER nor MANAGER/SOURCE: "b/c" is not a label value`,
		"a {\n mcs {\n  endpointslice_managers -x\n }\n}":    `"-x" is not a label value`,
	} {
		_, err := stanza.Read("Corefile", strings.NewReader(in))
		assert.ErrorContains(t, err, want, in)
	}
}

package policy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sample = `
apiVersion: mcs-dns.io/v1alpha1
kind: ExportPolicy
default:
  namespaces:
    deny: ["tmp-*"]
  maxEndpoints: 100
clusters:
  east:
    namespaces:
      allow: ["shop", "team-*", "tmp-*", "kube-system"]
    addressRanges: ["10.1.0.0/16", "fd00:1::/64"]
`

func TestParseAndCheck(t *testing.T) {
	p, err := Parse([]byte(sample))
	require.NoError(t, err)

	assert.Nil(t, p.CheckNamespace("west", "shop"))
	r := p.CheckNamespace("west", "tmp-1")
	require.NotNil(t, r)
	assert.Equal(t, ReasonNamespaceNotAllowed, r.Reason)
	assert.Contains(t, r.Message, `default.namespaces.deny[0] "tmp-*"`)
	for _, ns := range Protected {
		assert.NotNil(t, p.CheckNamespace("west", ns), "%s needs an allow by name", ns)
	}

	assert.Nil(t, p.CheckNamespace("east", "team-a"))
	assert.Nil(t, p.CheckNamespace("east", "kube-system"), "allowed by name")
	assert.NotNil(t, p.CheckNamespace("east", "kube-public"))
	r = p.CheckNamespace("east", "billing")
	require.NotNil(t, r)
	assert.Contains(t, r.Message, "clusters.east.namespaces.allow")
	assert.Nil(t, p.CheckNamespace("east", "tmp-1"), "east's namespaces replace the default's")

	assert.Nil(t, p.CheckEndpoints("east", 100), "east inherits maxEndpoints")
	r = p.CheckEndpoints("east", 101)
	require.NotNil(t, r)
	assert.Equal(t, ReasonTooManyEndpoints, r.Reason)
	assert.Contains(t, r.Message, "clusters.east.maxEndpoints")

	assert.True(t, p.RestrictsAddresses("east"))
	assert.False(t, p.RestrictsAddresses("west"))
	assert.True(t, p.AddressAllowed("east", "10.1.2.3"))
	assert.True(t, p.AddressAllowed("east", "::ffff:10.1.2.3"))
	assert.True(t, p.AddressAllowed("east", "fd00:1::5"))
	assert.False(t, p.AddressAllowed("east", "10.2.0.1"))
	assert.False(t, p.AddressAllowed("east", "not-an-ip"))
	assert.True(t, p.AddressAllowed("west", "192.0.2.1"))
}

func TestNilPolicy(t *testing.T) {
	var p *Policy
	assert.Nil(t, p.CheckNamespace("any", "shop"))
	assert.NotNil(t, p.CheckNamespace("any", "kube-system"), "protected namespaces even without a policy")
	assert.Nil(t, p.CheckEndpoints("any", 1_000_000))
	assert.True(t, p.AddressAllowed("any", "192.0.2.1"))
}

func TestParseRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"kind":          "apiVersion: mcs-dns.io/v1alpha1\nkind: Other\n",
		"version":       "apiVersion: v2\nkind: ExportPolicy\n",
		"unknown field": "apiVersion: mcs-dns.io/v1alpha1\nkind: ExportPolicy\ndefault:\n  maxEndpoint: 5\n",
		"bad glob":      "apiVersion: mcs-dns.io/v1alpha1\nkind: ExportPolicy\ndefault:\n  namespaces:\n    allow: [\"[\"]\n",
		"bad CIDR":      "apiVersion: mcs-dns.io/v1alpha1\nkind: ExportPolicy\nclusters:\n  east:\n    addressRanges: [\"10.0.0.0/33\"]\n",
		"negative":      "apiVersion: mcs-dns.io/v1alpha1\nkind: ExportPolicy\ndefault:\n  maxEndpoints: -1\n",
		"bad ID":        "apiVersion: mcs-dns.io/v1alpha1\nkind: ExportPolicy\nclusters:\n  East_1: {}\n",
		"long ID":       "apiVersion: mcs-dns.io/v1alpha1\nkind: ExportPolicy\nclusters:\n  " + strings.Repeat("a", 62) + ".b: {}\n", // no member can have it
		"not YAML":      "{",
	} {
		_, err := Parse([]byte(doc))
		assert.Error(t, err, name)
	}
}

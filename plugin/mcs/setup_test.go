package mcs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/cache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/stanza"
)

// writeKubeconfig writes a kubeconfig with contexts "one" and "two"; the
// server is never contacted by parse.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters:
- name: one
  cluster: {server: "https://127.0.0.1:1"}
- name: two
  cluster: {server: "https://127.0.0.1:2"}
users:
- name: u
  user: {token: x}
contexts:
- name: one
  context: {cluster: one, user: u}
- name: two
  context: {cluster: two, user: u}
current-context: one
`), 0o600))
	return path
}

func TestParse(t *testing.T) {
	kc := writeKubeconfig(t)
	tests := []struct {
		name  string
		input string
		check func(t *testing.T, c *config)
	}{
		{"defaults", "mcs", func(t *testing.T, c *config) {
			assert.Equal(t, []string{"clusterset.local."}, c.zones)
			assert.Equal(t, uint32(5), c.ttl)
			assert.Nil(t, c.rest, "in-cluster config")
			assert.Empty(t, c.fall.Zones)
		}},
		{"zones and reverse", "mcs ClusterSet.Local. 10.in-addr.arpa ip6.arpa", func(t *testing.T, c *config) {
			assert.Equal(t, []string{"clusterset.local.", "10.in-addr.arpa.", "ip6.arpa."}, c.zones)
			assert.Equal(t, []string{"clusterset.local."}, c.forwardZones())
		}},
		{"longest forward zone", "mcs " + strings.Repeat("z", 49) + "." + strings.Repeat("y", 48), func(t *testing.T, c *config) {
			assert.Len(t, c.zones[0], stanza.MaxForwardZone)
		}},
		{"cidr zone", "mcs clusterset.local 10.250.0.0/16", func(t *testing.T, c *config) {
			assert.Equal(t, []string{"clusterset.local.", "250.10.in-addr.arpa."}, c.zones)
		}},
		{"kubeconfig", "mcs {\n kubeconfig " + kc + "\n}", func(t *testing.T, c *config) {
			require.NotNil(t, c.rest)
			assert.Equal(t, "https://127.0.0.1:1", c.rest.Host)
		}},
		{"kubeconfig context", "mcs {\n kubeconfig " + kc + " two\n}", func(t *testing.T, c *config) {
			assert.Equal(t, "https://127.0.0.1:2", c.rest.Host)
			assert.Equal(t, "two", c.context)
		}},
		{"ttl", "mcs {\n ttl 0\n}", func(t *testing.T, c *config) { assert.Equal(t, uint32(0), c.ttl) }},
		{"ttl max", "mcs {\n ttl 3600\n}", func(t *testing.T, c *config) { assert.Equal(t, uint32(3600), c.ttl) }},
		{"fallthrough all", "mcs {\n fallthrough\n}", func(t *testing.T, c *config) {
			assert.Equal(t, []string{"."}, c.fall.Zones)
		}},
		{"fallthrough zones", "mcs clusterset.local in-addr.arpa {\n fallthrough in-addr.arpa\n}", func(t *testing.T, c *config) {
			assert.Equal(t, []string{"in-addr.arpa."}, c.fall.Zones)
		}},
		{"namespaces", "mcs {\n namespaces demo prod\n}", func(t *testing.T, c *config) {
			assert.Equal(t, []string{"demo", "prod"}, c.namespaces)
		}},
		{"shaping defaults", "mcs", func(t *testing.T, c *config) {
			assert.Equal(t, answers.Shaping{}, c.shaping, "locality default, no cluster_id, rotate or max_answers")
		}},
		{"cluster_id", "mcs {\n cluster_id east.eu-1\n}", func(t *testing.T, c *config) {
			assert.Equal(t, "east.eu-1", c.shaping.ClusterID)
		}},
		{"locality local-first", "mcs {\n locality local-first\n}", func(t *testing.T, c *config) {
			assert.Equal(t, answers.LocalityLocalFirst, c.shaping.Locality)
		}},
		{"locality none", "mcs {\n locality none\n}", func(t *testing.T, c *config) {
			assert.Equal(t, answers.LocalityNone, c.shaping.Locality)
		}},
		{"rotate and max_answers", "mcs {\n rotate\n max_answers 20\n}", func(t *testing.T, c *config) {
			assert.True(t, c.shaping.Rotate)
			assert.Equal(t, 20, c.shaping.MaxAnswers)
		}},
		{"max_udp_size default", "mcs", func(t *testing.T, c *config) {
			assert.Equal(t, DefaultMaxUDPSize, c.maxUDP)
		}},
		{"max_udp_size", "mcs {\n max_udp_size 4096\n}", func(t *testing.T, c *config) {
			assert.Equal(t, 4096, c.maxUDP)
		}},
		{"namespaces repeated", "mcs {\n namespaces demo prod demo\n namespaces prod\n}", func(t *testing.T, c *config) {
			assert.Equal(t, []string{"demo", "prod"}, c.namespaces)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parse(caddy.NewTestController("dns", tt.input))
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

func TestParseErrors(t *testing.T) {
	kc := writeKubeconfig(t)
	noCurrent := filepath.Join(t.TempDir(), "no-current")
	b, err := os.ReadFile(kc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(noCurrent, []byte(strings.ReplaceAll(string(b), "current-context: one\n", "")), 0o600))
	tests := []struct {
		name, input string
		// want are substrings the error must hold: the problem and the line.
		want []string
	}{
		{"unknown option", "mcs {\n ttl 5\n pods insecure\n}", []string{`unknown property "pods"`, ":3 "}},
		{"ttl arity", "mcs {\n ttl\n}", []string{"Wrong argument count", "ttl", ":2 "}},
		{"ttl two args", "mcs {\n ttl 5 6\n}", []string{"Wrong argument count", ":2 "}},
		{"ttl not a number", "mcs {\n ttl five\n}", []string{`ttl "five"`, "0..3600", ":2 "}},
		{"ttl negative", "mcs {\n ttl -1\n}", []string{`ttl "-1"`}},
		{"ttl too big", "mcs {\n\n ttl 3601\n}", []string{`ttl "3601"`, ":3 "}},
		{"kubeconfig arity", "mcs {\n kubeconfig\n}", []string{"Wrong argument count", "kubeconfig"}},
		{"kubeconfig three args", "mcs {\n kubeconfig a b c\n}", []string{"Wrong argument count"}},
		{"unreadable kubeconfig", "mcs {\n kubeconfig /nonexistent/kubeconfig\n}", []string{"kubeconfig /nonexistent/kubeconfig", ":2 "}},
		{"unknown context", "mcs {\n kubeconfig " + kc + " nope\n}", []string{"kubeconfig", `"nope"`, ":2 "}},
		{"no current-context", "mcs {\n kubeconfig " + noCurrent + "\n}", []string{"has no current-context", "CONTEXT", ":2 "}},
		{"bad zone", "mcs clusterset..local", []string{"clusterset..local", ":1 "}},
		{"bad zone chars", "mcs cluster/set.local", []string{`zone "cluster/set.local"`}},
		{"zone with port", "mcs clusterset.local:53", []string{"no port"}},
		{"only reverse zones", "mcs in-addr.arpa", []string{"forward"}},
		{"zone too long", "mcs " + strings.Repeat("z", 50) + "." + strings.Repeat("y", 48), []string{"too long", "at most 99"}},
		{"namespaces arity", "mcs {\n namespaces\n}", []string{"Wrong argument count"}},
		{"bad namespace", "mcs {\n namespaces Demo\n}", []string{`"Demo"`}},
		{"twice", "mcs\nmcs", []string{"once"}},
		{"cluster_id arity", "mcs {\n cluster_id\n}", []string{"Wrong argument count"}},
		{"bad cluster_id", "mcs {\n cluster_id East_1\n}", []string{"cluster_id", `"East_1"`, ":2 "}},
		{"locality arity", "mcs {\n locality\n}", []string{"Wrong argument count"}},
		{"bad locality", "mcs {\n locality nearest\n}", []string{`locality "nearest"`, "local-first", ":2 "}},
		{"rotate with an argument", "mcs {\n rotate 8\n}", []string{"Wrong argument count"}},
		{"max_answers arity", "mcs {\n max_answers\n}", []string{"Wrong argument count"}},
		{"max_udp_size arity", "mcs {\n max_udp_size\n}", []string{"Wrong argument count"}},
		{"max_udp_size too small", "mcs {\n max_udp_size 511\n}", []string{`max_udp_size "511"`, "512..65535"}},
		{"max_udp_size not a number", "mcs {\n max_udp_size big\n}", []string{`max_udp_size "big"`}},
		{"max_answers zero", "mcs {\n max_answers 0\n}", []string{`max_answers "0"`, "1..4096"}},
		{"max_answers too big", "mcs {\n max_answers 4097\n}", []string{`max_answers "4097"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(caddy.NewTestController("dns", tt.input))
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestSetupErrorIsPluginError checks that start-up fails with a
// plugin.Error naming the plugin and the line.
func TestSetupErrorIsPluginError(t *testing.T) {
	err := setup(caddy.NewTestController("dns", "mcs {\n ttl 9999\n}"))
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "plugin/mcs: "), err.Error())
	assert.Contains(t, err.Error(), "Testfile:2")
}

func TestSetupWithoutKubeconfigOutsideCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	err := setup(caddy.NewTestController("dns", "mcs"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "in-cluster")
}

// TestSourceKey: stanzas that watch the same API the same way share a
// controller across a reload; anything the answers or the watches depend
// on (zones, ttl, namespaces, the server and credentials the kubeconfig
// gives) makes a new one.
func TestSourceKey(t *testing.T) {
	kc := writeKubeconfig(t)
	key := func(stanza string) string {
		t.Helper()
		cfg, err := parse(caddy.NewTestController("dns", strings.ReplaceAll(stanza, "KC", kc)))
		require.NoError(t, err, stanza)
		return sourceKey(cfg, cfg.rest)
	}
	base := key("mcs clusterset.local { \n kubeconfig KC one \n namespaces a b \n }")
	require.NotEmpty(t, base)
	assert.Equal(t, base, key("mcs clusterset.local { \n kubeconfig KC one \n namespaces b a \n }"), "namespace order")
	assert.Equal(t, base, key("mcs clusterset.local in-addr.arpa { \n kubeconfig KC one \n namespaces a b \n fallthrough \n }"),
		"reverse zones and fallthrough are the handler's, not the controller's")
	for _, other := range []string{
		"mcs clusterset.local { \n kubeconfig KC two \n namespaces a b \n }",
		"mcs clusterset.local { \n kubeconfig KC one \n namespaces a \n }",
		"mcs clusterset.local { \n kubeconfig KC one \n namespaces a b \n ttl 9 \n }",
		"mcs example.org { \n kubeconfig KC one \n namespaces a b \n }",
		"mcs clusterset.local { \n kubeconfig KC one \n namespaces a b \n cluster_id east \n }",
		"mcs clusterset.local { \n kubeconfig KC one \n namespaces a b \n locality none \n }",
		"mcs clusterset.local { \n kubeconfig KC one \n namespaces a b \n rotate \n }",
		"mcs clusterset.local { \n kubeconfig KC one \n namespaces a b \n max_answers 9 \n }",
	} {
		assert.NotEqual(t, base, key(other), other)
	}
	b, err := os.ReadFile(kc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(kc, append(b, "# a comment\n"...), 0o600))
	assert.Equal(t, base, key("mcs clusterset.local { \n kubeconfig KC one \n namespaces a b \n }"), "the same configuration")
	require.NoError(t, os.WriteFile(kc, []byte(strings.Replace(string(b), "token: x", "token: rotated", 1)), 0o600))
	assert.NotEqual(t, base, key("mcs clusterset.local { \n kubeconfig KC one \n namespaces a b \n }"), "new credentials")
}

// TestCacheInFront: subsets are off only behind a cache (before mcs in
// the chain) whose zones overlap mcs's forward zones.
func TestCacheInFront(t *testing.T) {
	p := newMCS(&config{zones: []string{"clusterset.local.", "in-addr.arpa."}}, nil)
	other := newMCS(&config{zones: []string{"example."}}, nil)
	withZones := func(zones ...string) *cache.Cache {
		c := cache.New()
		c.Zones = zones
		return c
	}
	for _, c := range []struct {
		handlers []plugin.Handler
		want     bool
	}{
		{[]plugin.Handler{other, p}, false},
		{[]plugin.Handler{withZones("."), other, p}, true},
		{[]plugin.Handler{withZones("clusterset.local."), p}, true},
		{[]plugin.Handler{withZones("svc.clusterset.local."), p}, true},
		{[]plugin.Handler{withZones("cluster.local.", "in-addr.arpa."), p}, false},
		{[]plugin.Handler{p, withZones(".")}, false},
		{nil, false},
	} {
		var desc []string
		for _, h := range c.handlers {
			desc = append(desc, h.Name())
		}
		assert.Equal(t, c.want, cacheInFront(c.handlers, p), "%v", desc)
	}
}

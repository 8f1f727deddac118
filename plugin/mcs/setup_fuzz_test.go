package mcs

import (
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/miekg/dns"
)

// FuzzParse feeds arbitrary stanzas to the Corefile parser: it never
// panics, and a stanza it accepts gives a config the plugin can serve
// with (forward zones that are names, a TTL in range, known options
// only).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"mcs", "mcs clusterset.local", "mcs clusterset.local 250.10.in-addr.arpa",
		"mcs {\n ttl 5\n}", "mcs {\n ttl 3601\n}", "mcs {\n fallthrough in-addr.arpa\n}",
		"mcs {\n namespaces demo prod\n}", "mcs {\n endpointslice_managers mcs-importer.mcs-dns.io\n}",
		"mcs {\n kubeconfig /nonexistent ctx\n}", "mcs clusterset..local", "mcs\nmcs", "mcs {\n ttl\n}",
		"mcs in-addr.arpa", "mcs {\n pods insecure\n}", "mcs . {\n}", "mcs {\n namespaces Demo\n}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stanza string) {
		if !strings.HasPrefix(stanza, "mcs") || strings.Contains(stanza, "import") {
			return // the directive is mcs; Caddy's import reads files
		}
		cfg, err := parse(caddy.NewTestController("dns", stanza))
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("%q: an error without a message", stanza)
			}
			return
		}
		if len(cfg.zones) == 0 {
			t.Fatalf("%q: accepted without zones", stanza)
		}
		for _, z := range cfg.zones {
			if _, ok := dns.IsDomainName(z); !ok || !dns.IsFqdn(z) {
				t.Fatalf("%q: zone %q is not a fully qualified name", stanza, z)
			}
		}
		if cfg.ttl > 3600 {
			t.Fatalf("%q: ttl %d", stanza, cfg.ttl)
		}
	})
}

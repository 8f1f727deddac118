// Command coredns is CoreDNS v1.15.0 with all of its standard plugins plus
// mcs-dns's `mcs` plugin, which answers the Multi-Cluster Services zone
// (clusterset.local) from ServiceImports and EndpointSlices.
package main

import (
	"slices"

	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/core/plugin" // every standard CoreDNS plugin
	"github.com/coredns/coredns/coremain"

	_ "github.com/mcs-dns/mcs-dns/plugin/mcs"
)

func init() {
	dnsserver.Directives = withMCS(dnsserver.Directives)
}

// withMCS places mcs directly after kubernetes in the plugin chain, so that
// a server block using both behaves like CoreDNS built from a plugin.cfg
// with `mcs:github.com/mcs-dns/mcs-dns/plugin/mcs` after `kubernetes`.
func withMCS(directives []string) []string {
	if slices.Contains(directives, "mcs") {
		return directives
	}
	i := slices.Index(directives, "kubernetes")
	if i < 0 {
		return append(directives, "mcs")
	}
	return slices.Insert(slices.Clone(directives), i+1, "mcs")
}

func main() {
	coremain.Run()
}

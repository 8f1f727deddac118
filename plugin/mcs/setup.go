// Package mcs is a placeholder until the plugin lands: it registers the
// directive so the custom build links.
package mcs

import (
	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"
)

const pluginName = "mcs"

func init() { plugin.Register(pluginName, setup) }

func setup(c *caddy.Controller) error {
	return plugin.Error(pluginName, c.Err("not implemented yet"))
}

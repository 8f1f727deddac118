package main

import (
	"testing"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/stretchr/testify/require"
)

func TestMCSDirectlyAfterKubernetes(t *testing.T) {
	d := dnsserver.Directives
	for i, name := range d {
		if name == "kubernetes" {
			require.Equal(t, "mcs", d[i+1])
			return
		}
	}
	t.Fatal("kubernetes directive not found")
}

func TestWithMCSIdempotent(t *testing.T) {
	in := []string{"a", "kubernetes", "b"}
	once := withMCS(in)
	require.Equal(t, []string{"a", "kubernetes", "mcs", "b"}, once)
	require.Equal(t, once, withMCS(once))
	require.Equal(t, []string{"a", "mcs"}, withMCS([]string{"a"}))
}

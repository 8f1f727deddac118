package importer_test

import (
	"bytes"
	"errors"
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcs-dns/mcs-dns/importer"
)

func TestParseFlags(t *testing.T) {
	var out bytes.Buffer
	o, err := importer.ParseFlags([]string{"--contexts", "east, west,north", "--import-into", "east",
		"--export-conditions-in", "east,west", "--endpoint-grace-period", "30s", "--resync=1m", "--metrics-addr", "", "--log-format", "json", "--v", "2"}, &out)
	require.NoError(t, err)
	assert.Equal(t, []string{"east", "west", "north"}, o.Contexts)
	assert.Equal(t, []string{"east"}, o.ImportInto)
	assert.Equal(t, []string{"east", "west"}, o.ExportConditionsIn)
	assert.Equal(t, 30*time.Second, o.EndpointGracePeriod)
	assert.Equal(t, time.Minute, o.Resync)
	assert.Equal(t, "", o.MetricsAddr)
	assert.Equal(t, "json", o.LogFormat)
	assert.Equal(t, 2, o.Verbosity)
	assert.Empty(t, out.String(), "nothing printed on success")

	o, err = importer.ParseFlags([]string{"--contexts=a"}, &out)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Minute, o.EndpointGracePeriod, "default grace period")
	assert.Equal(t, ":8080", o.MetricsAddr)
	assert.Empty(t, o.ImportInto, "default: import into every member")
	assert.Empty(t, o.ExportConditionsIn, "default: the members it imports into")
	assert.Zero(t, o.QPS, "default: no client-side limit")
	assert.Zero(t, o.Burst)
	assert.Equal(t, "region.topology.kubernetes.io", o.RegionProperty, "default region ClusterProperty")
	assert.Equal(t, 0.9, o.MemoryLimitRatio, "default: GOMEMLIMIT at 90% of the container's limit")
	o, err = importer.ParseFlags([]string{"--contexts=a", "--auto-gomemlimit-ratio", "0"}, &out)
	require.NoError(t, err)
	assert.Zero(t, o.MemoryLimitRatio, "0 turns it off")
	o, err = importer.ParseFlags([]string{"--contexts=a", "--region-property", "region.example.com"}, &out)
	require.NoError(t, err)
	assert.Equal(t, "region.example.com", o.RegionProperty)

	o, err = importer.ParseFlags([]string{"--contexts=a", "--endpointslice-managers", "endpointslice-controller.k8s.io,agent.example.com"}, &out)
	require.NoError(t, err)
	assert.Equal(t, []string{"endpointslice-controller.k8s.io", "agent.example.com"}, o.EndpointSliceManagers)
	o, err = importer.ParseFlags([]string{"--contexts=a", "--kube-api-qps", "50"}, &out)
	require.NoError(t, err)
	assert.Equal(t, float32(50), o.QPS)
	assert.Equal(t, 100, o.Burst, "burst defaults to twice the rate")
	o, err = importer.ParseFlags([]string{"--contexts=a", "--kube-api-qps", "0.2"}, &out)
	require.NoError(t, err)
	assert.Equal(t, 1, o.Burst, "at least 1")

	_, err = importer.ParseFlags([]string{"--help"}, &out)
	assert.True(t, errors.Is(err, flag.ErrHelp))
	assert.Contains(t, out.String(), "-endpoint-grace-period")

	for _, args := range [][]string{
		{},
		{"--contexts", "a,a"},
		{"--contexts", "a", "--import-into", "b"},
		{"--contexts", "a", "--export-conditions-in", "b"},
		{"--contexts", "a", "--workers", "0"},
		{"--contexts", "a", "--auto-gomemlimit-ratio", "-0.1"},
		{"--contexts", "a", "--auto-gomemlimit-ratio", "1.5"},
		{"--contexts", "a", "--auto-gomemlimit-ratio", "NaN"},
		{"--contexts", "a", "--endpoint-grace-period", "-1s"},
		{"--contexts", "a", "--health-probe-interval", "0s"},
		{"--contexts", "a", "--health-access-check-interval", "0s"},
		{"--contexts", "a", "--nope"},
		{"--contexts", "a", "--region-property", "topology.kubernetes.io/region"},
		{"--contexts", "a", "--kube-api-qps", "-1"},
		{"--contexts", "a", "--kube-api-qps", "x"},
		{"--contexts", "a", "--kube-api-burst", "10"},
		{"--contexts", "a", "--endpointslice-managers", "mcs-importer.mcs-dns.io"},
		{"--contexts", "a", "--endpointslice-managers", "not a label value"},
		{"--contexts", "a", "--kube-api-qps", "5", "--kube-api-burst", "-1"},
	} {
		_, err := importer.ParseFlags(args, &out)
		assert.Error(t, err, "%v", args)
	}

	// Settings that would fail only after start-up (client-go's leader
	// election checks) or be ignored fail at once, saying why.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--contexts", "a", "--leader-elect", "--leader-elect-retry-period", "9s", "--leader-elect-renew-deadline", "10s"}, "1.2 x --leader-elect-retry-period"},
		{[]string{"--contexts", "a", "--leader-elect", "--leader-elect-renew-deadline", "20s"}, "< --leader-elect-lease-duration"},
		{[]string{"--contexts", "a", "--clusterset-ip-default"}, "--clusterset-ip-default needs --vip-mode=clusterset-cidr"},
		{[]string{"--contexts", "a", "--vip-mode", "none", "--clusterset-ip-default"}, "--clusterset-ip-default needs --vip-mode=clusterset-cidr"},
	} {
		_, err := importer.ParseFlags(tc.args, &out)
		if assert.Error(t, err, "%v", tc.args) {
			assert.Contains(t, err.Error(), tc.want, "%v", tc.args)
		}
	}
	_, err = importer.ParseFlags([]string{"--contexts", "a", "--leader-elect", "--leader-elect-retry-period", "8s", "--leader-elect-renew-deadline", "10s"}, &out)
	assert.NoError(t, err, "renew deadline above 1.2 x the retry period")
}

package importer_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// regionsBySource returns the source-region label of the mirrored slices
// of svc in every cluster, by "importing cluster/source cluster" ("-":
// none).
func regionsBySource(t assert.TestingT, w *testbed, ns, svc string) map[string]string {
	out := map[string]string{}
	for _, cl := range w.all {
		items, err := mirrored(cl, ns, svc)
		if !assert.NoError(t, err) {
			continue
		}
		for _, s := range items {
			r, ok := s.Labels[mcsapi.LabelSourceRegion]
			if !ok {
				r = "-"
			}
			out[cl.Name+"/"+s.Labels[mcsapi.LabelSourceCluster]] = r
		}
	}
	return out
}

// A member's region ClusterProperty, read when it joins, is stamped on
// every slice mirrored from it; a member without one gets no label. A
// region changed, or gone, takes effect when the member next joins (here
// the importer's restart), and rewrites the slices.
func TestRegionLabelFromClusterProperty(t *testing.T) {
	w := newTestbed(t)
	for _, cl := range w.all {
		t.Cleanup(func() { assert.NoError(t, cl.DeleteClusterProperty(bg(), mcsapi.RegionProperty)) })
	}
	require.NoError(t, w.east.SetClusterProperty(bg(), mcsapi.RegionProperty, "eu-west-1"))
	require.NoError(t, w.west.SetClusterProperty(bg(), mcsapi.RegionProperty, "not a region"))
	ns := "imp-region"
	mkNamespace(t, ns, w.all...)
	for _, cl := range w.all {
		mkService(t, cl, ns, "db", true, tcpPort("pg", 5432))
		putSlice(t, cl, ns, "db", "db-"+cl.Name, ep{"10.77.0.1", true, "db-0"})
		mkExport(t, cl, ns, "db")
	}
	want := func(east, west, north string) map[string]string {
		out := map[string]string{}
		for _, cl := range w.all {
			out[cl.Name+"/east-1"], out[cl.Name+"/west"], out[cl.Name+"/north"] = east, west, north
		}
		return out
	}
	r := startImporter(t, baseOptions(w.kubeconfig, w.contexts...))
	// west's value is not a region: it joins without one.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, want("eu-west-1", "-", "-"), regionsBySource(c, w, ns, "db"))
	}, waitFor, tick)

	// Changed while the importer runs: nothing until the member joins
	// again.
	require.NoError(t, w.east.SetClusterProperty(bg(), mcsapi.RegionProperty, "eu-central-1"))
	require.NoError(t, w.north.SetClusterProperty(bg(), mcsapi.RegionProperty, "us-east-1"))
	time.Sleep(3 * time.Second) // three resyncs
	assert.Equal(t, want("eu-west-1", "-", "-"), regionsBySource(t, w, ns, "db"), "read when a member joins")
	r.stop()

	before := writesOf(t, w)
	r = startImporter(t, baseOptions(w.kubeconfig, w.contexts...))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, want("eu-central-1", "-", "us-east-1"), regionsBySource(c, w, ns, "db"))
	}, waitFor, tick)
	assert.NotEqual(t, before, writesOf(t, w), "the slices were rewritten")
	r.stop()

	// A region gone: the label goes at the next join.
	require.NoError(t, w.east.DeleteClusterProperty(bg(), mcsapi.RegionProperty))
	o := baseOptions(w.kubeconfig, w.contexts...)
	o.RegionProperty = "region.example.com" // and another property: none has it
	startImporter(t, o)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, want("-", "-", "-"), regionsBySource(c, w, ns, "db"))
	}, waitFor, tick)
}

// writesOf is the resourceVersion of every mirrored slice of the test's
// service, to tell a rewrite.
func writesOf(t *testing.T, w *testbed) map[string]string {
	out := map[string]string{}
	for _, cl := range w.all {
		items, err := mirrored(cl, "imp-region", "db")
		require.NoError(t, err)
		for _, s := range items {
			out[cl.Name+"/"+s.Name] = s.ResourceVersion
		}
	}
	return out
}

package importer_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// An endpoint change is carried by mirrored-slice writes alone: those
// writes time it in mcs_importer_propagation_seconds (by its source) and
// mcs_importer_member_write_lag_seconds (by each member written), as an
// export's first import is.
func TestPropagationTimesEndpointChanges(t *testing.T) {
	w, imp := importing(t)
	all := []*cluster.Cluster{w.east, w.west, w.north}
	ns := "prop-times"
	mkNamespace(t, ns, all...)
	mkService(t, w.east, ns, "web", false, tcpPort("http", 80))
	putSlice(t, w.east, ns, "web", "web-a", ips(2, "10.1.0")...)
	mkExport(t, w.east, ns, "web")
	waitEndpoints(t, all, ns, "web", map[string][]string{"east-1": {"10.1.0.1", "10.1.0.2"}})
	// The statuses settle; then nothing waits to be carried.
	require.Eventually(t, func() bool { return imp.histogramCounts(t, "mcs_importer_propagation_seconds")["east-1"] >= 1 }, waitFor, tick)
	imp.quiesce(t, 2*time.Second)
	before := imp.histogramCounts(t, "mcs_importer_propagation_seconds")["east-1"]
	lagBefore := imp.histogramCounts(t, "mcs_importer_member_write_lag_seconds")

	putSlice(t, w.east, ns, "web", "web-a", ips(3, "10.1.0")...)
	waitEndpoints(t, all, ns, "web", map[string][]string{"east-1": {"10.1.0.1", "10.1.0.2", "10.1.0.3"}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Greater(c, imp.histogramCounts(t, "mcs_importer_propagation_seconds")["east-1"], before, "the change timed to its last slice write")
		lag := imp.histogramCounts(t, "mcs_importer_member_write_lag_seconds")
		assert.Len(c, lag, len(all))
		for m := range lag {
			assert.Greater(c, lag[m], lagBefore[m], "the write into %s", m)
		}
	}, waitFor, tick)
}

package importer_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// TestScale measures how long N exports (one endpoint slice each, in one
// cluster) take to be imported into three clusters, and a restart over
// them. Opt-in: MCS_IMPORTER_SCALE=N.
func TestScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MCS_IMPORTER_SCALE"))
	if n == 0 {
		t.Skip("set MCS_IMPORTER_SCALE=N to run")
	}
	set := cluster.Start(t, cluster.Names("east", "west", "north")...)
	all := set.Clusters
	east := set.Get("east")
	ns := "scale"
	mkNamespace(t, ns, all...)
	for i := range n {
		name := fmt.Sprintf("svc-%04d", i)
		mkService(t, east, ns, name, false, tcpPort("http", 80))
		putSlice(t, east, ns, name, name+"-1", ep{ip: fmt.Sprintf("10.100.%d.%d", i/250, i%250+1), ready: true})
	}
	r := startImporter(t, baseOptions(set.Kubeconfig, "east", "west", "north"))
	start := time.Now()
	for i := range n {
		mkExport(t, east, ns, fmt.Sprintf("svc-%04d", i))
	}
	created := time.Since(start)
	require.Eventually(t, func() bool {
		for _, c := range all {
			l, err := c.Kube.DiscoveryV1().EndpointSlices(ns).List(bg(), metav1.ListOptions{LabelSelector: mcsapi.LabelManagedBy + "=" + mcsapi.ManagedByImporter})
			if err != nil || len(l.Items) != n {
				return false
			}
			sis, err := c.MCS.MulticlusterV1beta1().ServiceImports(ns).List(bg(), metav1.ListOptions{})
			if err != nil || len(sis.Items) != n {
				return false
			}
		}
		return true
	}, 10*time.Minute, 200*time.Millisecond)
	imported := time.Since(start)
	w := r.quiesce(t, 3*time.Second)
	t.Logf("%d exports created in %s; imported into 3 clusters after %s; %.0f writes", n, created.Round(time.Millisecond), imported.Round(time.Millisecond), total(w))
	r.stop()

	start = time.Now()
	r = startImporter(t, baseOptions(set.Kubeconfig, "east", "west", "north"))
	ready := time.Since(start)
	w = r.quiesce(t, 3*time.Second)
	t.Logf("restart over %d imports: ready after %s, %.0f writes", n, ready.Round(time.Millisecond), total(w))
	require.Zero(t, total(w))
}

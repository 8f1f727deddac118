package importer_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

// world counts what the importer made in c for namespace ns: imports,
// derived Services and mirrored slices, and each import's ips.
func world(t *testing.T, c *cluster.Cluster, ns string) (imports, derived, slices int, ips map[string]string) {
	t.Helper()
	sis, err := c.MCS.MulticlusterV1beta1().ServiceImports(ns).List(bg(), metav1.ListOptions{})
	require.NoError(t, err)
	ips = map[string]string{}
	for _, si := range sis.Items {
		ips[si.Name] = strings.Join(si.Spec.IPs, ",")
	}
	svcs, err := c.Kube.CoreV1().Services(ns).List(bg(), metav1.ListOptions{LabelSelector: mcsapi.LabelDerivedFor})
	require.NoError(t, err)
	sl, err := c.Kube.DiscoveryV1().EndpointSlices(ns).List(bg(), metav1.ListOptions{LabelSelector: mcsapi.LabelManagedBy + "=" + mcsapi.ManagedByImporter})
	require.NoError(t, err)
	return len(sis.Items), len(svcs.Items), len(sl.Items), ips
}

// startReplicas starts two importers with args and waits until one leads.
func startReplicas(t *testing.T, args []string) (leader, follower *importerProc) {
	t.Helper()
	a := startImporterProc(t, "importer-a", args...)
	b := startImporterProc(t, "importer-b", args...)
	if l, _ := whoLeads(t, a.Process, b.Process); l == b.Process {
		return b, a
	}
	return a, b
}

// whoLeads waits until one of two replicas leads.
func whoLeads(t *testing.T, a, b *procs.Process) (leader, follower *procs.Process) {
	t.Helper()
	require.Eventually(t, func() bool {
		switch {
		case strings.Contains(a.Output(), "msg=leading"):
			leader, follower = a, b
		case strings.Contains(b.Output(), "msg=leading"):
			leader, follower = b, a
		}
		return leader != nil
	}, waitFor, tick)
	return leader, follower
}

// Two replicas with --leader-elect: exactly one writes; killed with
// SIGKILL, the other takes over within the lease duration, with no
// duplicate objects and no VIP change.
func TestLeaderElection(t *testing.T) {
	set := cluster.Start(t, cluster.Names("east", "west")...)
	east, west := set.Clusters[0], set.Clusters[1]
	mkNamespace(t, "shop", east, west)
	// A renew deadline a loaded machine does not miss: a leader whose
	// renewals stall steps down, and the standby would lead before the
	// kill.
	const lease = 8 * time.Second
	args := []string{"--kubeconfig", set.Kubeconfig, "--contexts", "east,west",
		"--leader-elect", "--leader-elect-context", "west",
		"--leader-elect-lease-duration", lease.String(), "--leader-elect-renew-deadline", "6s", "--leader-elect-retry-period", "500ms"}

	leader, follower := startReplicas(t, args)
	// mcs_importer_leader says which replica works.
	require.Eventually(t, func() bool {
		standby, ok := follower.metrics("mcs_importer_leader")[""]
		return leader.metrics("mcs_importer_leader")[""] == 1 && ok && standby == 0
	}, waitFor, tick)

	exportService(t, east, "shop", "web")
	require.Eventually(t, func() bool {
		n, d, s, ips := world(t, west, "shop")
		return n == 1 && d == 1 && s == 1 && ips["web"] != ""
	}, waitFor, tick)
	_, _, _, before := world(t, west, "shop")
	require.NotContains(t, follower.Output(), "created", "the standby wrote")
	require.NotContains(t, follower.Output(), "msg=leading")

	killed := time.Now()
	leader.Kill()
	require.Eventually(t, func() bool { return strings.Contains(follower.Output(), "msg=leading") }, 3*lease, 100*time.Millisecond,
		"the standby did not take over:\n%s", follower.Output())
	t.Logf("takeover %s after SIGKILL (lease %s)", time.Since(killed).Round(10*time.Millisecond), lease)
	require.Eventually(t, func() bool { return follower.metrics("mcs_importer_leader")[""] == 1 }, waitFor, tick)

	exportService(t, east, "shop", "api")
	require.Eventually(t, func() bool {
		n, d, s, ips := world(t, west, "shop")
		return n == 2 && d == 2 && s == 2 && ips["api"] != ""
	}, waitFor, tick)
	_, _, _, after := world(t, west, "shop")
	require.Equal(t, before["web"], after["web"], "the VIP changed across the failover")
}

// SIGKILL in the middle of reconciling many exports, then a restart:
// everything converges, once.
func TestKilledMidReconcile(t *testing.T) {
	bin := procs.ImporterBinary(t)
	set := cluster.Start(t, cluster.Names("east", "west")...)
	east, west := set.Clusters[0], set.Clusters[1]
	mkNamespace(t, "bulk", east, west)
	args := []string{"--kubeconfig", set.Kubeconfig, "--contexts", "east,west", "--metrics-addr", "127.0.0.1:0"}
	const n = 30
	for i := range n {
		exportService(t, east, "bulk", fmt.Sprintf("s%02d", i))
	}
	p := procs.Start(t, "importer", bin, args...)
	require.Eventually(t, func() bool { return strings.Contains(p.Output(), "created ServiceImport") }, waitFor, 10*time.Millisecond)
	p.Kill()
	imports, _, _, _ := world(t, west, "bulk")
	t.Logf("killed with %d of %d imports written in west", imports, n)

	procs.Start(t, "importer-restarted", bin, args...)
	require.Eventually(t, func() bool {
		for _, c := range []*cluster.Cluster{east, west} {
			imports, derived, slices, ips := world(t, c, "bulk")
			if imports != n || derived != n || slices != n {
				return false
			}
			for i := range n {
				name := fmt.Sprintf("s%02d", i)
				svc, err := c.Kube.CoreV1().Services("bulk").Get(bg(), vip.DerivedName("bulk", name), metav1.GetOptions{})
				if err != nil || ips[name] != strings.Join(svc.Spec.ClusterIPs, ",") {
					return false
				}
			}
		}
		return true
	}, waitFor, tick)
}

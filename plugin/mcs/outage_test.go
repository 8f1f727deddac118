package mcs

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// TestAPIServerOutage stops the kube-apiserver the plugin watches (the
// real process; etcd keeps running) for 30 s (MCS_DNS_OUTAGE overrides),
// compacts etcd meanwhile (so the plugin's watches can only resume with a
// relist: 410 Gone), writes while it restarts, and checks that the plugin
// answers from its last good state throughout (no SERVFAIL, still ready),
// says how stale that state is, relists, and serves the changes once the
// API server is back, without a CoreDNS restart.
func TestAPIServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	outage := 30 * time.Second
	if s := os.Getenv("MCS_DNS_OUTAGE"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "MCS_DNS_OUTAGE")
		outage = d
	}
	set := cluster.Start(t, cluster.Spec{Name: "east", ClusterID: "east"})
	c := set.Clusters[0]
	tcp := corev1.ProtocolTCP
	createNamespace(t, c, "demo")
	createImport(t, c, "demo", "web", mcsv1beta1.ClusterSetIP, []string{"10.96.50.1"}, false, port("http", tcp, 80))
	createImport(t, c, "demo", "db", mcsv1beta1.Headless, nil, false, port("pg", tcp, 5432))
	createSlice(t, c, "demo", "db-east", "db", "east", discoveryv1.AddressTypeIPv4,
		endpoint("db-0", ptr.To(true), "10.1.0.1"), endpoint("db-1", ptr.To(true), "10.1.0.2"))

	readyAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	srv := startCoreDNS(t, fmt.Sprintf(`clusterset.local:0 {
    ready %s
    mcs {
        kubeconfig %s east
    }
}`, readyAddr, set.Kubeconfig))
	webA := answer("web.demo.svc.clusterset.local. A 10.96.50.1")
	dbA := answer("db.demo.svc.clusterset.local. A 10.1.0.1", "db.demo.svc.clusterset.local. A 10.1.0.2")
	srv.eventually(t, "web.demo.svc.clusterset.local", dns.TypeA, webA)
	srv.eventually(t, "db.demo.svc.clusterset.local", dns.TypeA, dbA)
	require.Eventually(t, func() bool { code, _ := httpGet("http://" + readyAddr + "/ready"); return code == http.StatusOK }, 30*time.Second, 100*time.Millisecond)

	// Queries all along: every answer must be the last good state.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var queries, wrong, timeouts atomic.Int64
	var firstWrong atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			name, check := "web.demo.svc.clusterset.local", webA
			if i%2 == 1 {
				name, check = "db.demo.svc.clusterset.local", dbA
			}
			network := []string{"udp", "tcp"}[i%4/2]
			r, err := ask(srv.addr(network), network, name, dns.TypeA, 1232)
			var nerr net.Error
			if errors.As(err, &nerr) && nerr.Timeout() {
				// A lost datagram on a loaded machine: retry, as resolvers do.
				timeouts.Add(1)
				r, err = ask(srv.addr(network), network, name, dns.TypeA, 1232)
			}
			if err == nil {
				err = check(r)
			}
			queries.Add(1)
			if err != nil {
				wrong.Add(1)
				firstWrong.CompareAndSwap(nil, fmt.Sprintf("%s over %s: %v", name, network, err))
			}
		}
	}()

	// The resource version the plugin's watches resume from, at most.
	before, err := c.Kube.DiscoveryV1().EndpointSlices("").List(ctxT(t), metav1.ListOptions{})
	require.NoError(t, err)
	listsBefore := map[string]float64{}
	for _, res := range []string{"serviceimports", "endpointslices"} {
		listsBefore[res] = testutil.ToFloat64(lists.WithLabelValues(res))
	}

	require.NoError(t, c.StopAPIServer())
	down := time.Now()
	rev, err := c.CompactEtcd(ctxT(t))
	require.NoError(t, err)
	t.Logf("etcd compacted at revision %d; the plugin last saw %s at most", rev, before.ResourceVersion)
	notReady := 0
	for time.Since(down) < outage {
		if code, _ := httpGet("http://" + readyAddr + "/ready"); code != http.StatusOK {
			notReady++
		}
		time.Sleep(time.Second)
	}
	staleness := lastSyncAge()
	t.Logf("after %s down: %d queries, coredns_mcs_last_sync_age_seconds %.1f", outage, queries.Load(), staleness)
	assert.GreaterOrEqual(t, staleness, outage.Seconds()-5, "the staleness metric tells how long the API server has been away")
	assert.Zero(t, notReady, "readiness dropped while serving the last good state")

	require.NoError(t, c.StartAPIServer(ctxT(t)))
	back := time.Now()
	// The queries stop before the changes below: once the plugin is back,
	// the new state is the right answer, not the last good one.
	close(stop)
	wg.Wait()
	// Changes right away, while the plugin is still cut off (its watches
	// come back with backoff).
	createImport(t, c, "demo", "new", mcsv1beta1.ClusterSetIP, []string{"10.96.50.2"}, false, port("http", tcp, 80))
	_, err = c.Kube.DiscoveryV1().EndpointSlices("demo").Update(ctxT(t), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "db-east", Labels: sliceLabels("db", "east")},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{endpoint("db-0", ptr.To(true), "10.1.0.1")},
	}, metav1.UpdateOptions{})
	require.NoError(t, err)
	written := time.Now()
	t.Logf("%d queries in all, %d not the last good state, %d retried after a timeout", queries.Load(), wrong.Load(), timeouts.Load())
	assert.Zero(t, wrong.Load(), "answers during the outage: first %v", firstWrong.Load())

	// When each change is first served (measured, not asserted).
	seen := map[string]time.Duration{}
	for deadline := time.Now().Add(30 * time.Second); len(seen) < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r, err := ask(srv.udp, "udp", "new.demo.svc.clusterset.local", dns.TypeA, 1232); err == nil && len(r.Answer) == 1 {
			if _, ok := seen["import created"]; !ok {
				seen["import created"] = time.Since(written)
			}
		}
		if r, err := ask(srv.udp, "udp", "db.demo.svc.clusterset.local", dns.TypeA, 1232); err == nil && len(r.Answer) == 1 {
			if _, ok := seen["slice updated"]; !ok {
				seen["slice updated"] = time.Since(written)
			}
		}
	}
	t.Logf("first served after the writes: %v", seen)
	srv.eventually(t, "new.demo.svc.clusterset.local", dns.TypeA, answer("new.demo.svc.clusterset.local. A 10.96.50.2"))
	srv.eventually(t, "db.demo.svc.clusterset.local", dns.TypeA, answer("db.demo.svc.clusterset.local. A 10.1.0.1"))
	t.Logf("changes written %s after the API server was back; served %s after they were written",
		written.Sub(back).Round(time.Millisecond), time.Since(written).Round(time.Millisecond))
	assert.Eventually(t, func() bool { return lastSyncAge() < 5 }, 30*time.Second, 100*time.Millisecond, "staleness back to fresh")

	// The compaction is real: a watch from where the plugin was ends with
	// 410 Gone, so the plugin has read each resource whole again.
	w, err := c.Kube.DiscoveryV1().EndpointSlices("").Watch(ctxT(t), metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	if err == nil {
		ev := <-w.ResultChan()
		w.Stop()
		require.Equal(t, watch.Error, ev.Type, "a watch from before the compaction")
		err = apierrors.FromObject(ev.Object)
	}
	assert.True(t, apierrors.IsResourceExpired(err) || apierrors.IsGone(err), "a watch from before the compaction: %v", err)
	for res, n := range listsBefore {
		relists := testutil.ToFloat64(lists.WithLabelValues(res)) - n
		t.Logf("%s read whole %v times after the restart", res, relists)
		assert.GreaterOrEqual(t, relists, 1.0, "%s relisted", res)
	}
}

func sliceLabels(svc, clusterID string) map[string]string {
	return map[string]string{mcsapi.LabelServiceName: svc, mcsapi.LabelSourceCluster: clusterID, mcsapi.LabelManagedBy: mcsapi.ManagedByImporter}
}

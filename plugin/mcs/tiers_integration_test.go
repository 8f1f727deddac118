package mcs

// Tiered local-first answers on a real API server: this cluster's
// endpoints, then those of the clusters of its region, then the rest,
// and failover from one tier to the next when a tier has no ready
// endpoint.

import (
	"fmt"
	"slices"
	"testing"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// tierClusters are the source clusters of the tiered fixture, their
// regions and the second octet of their addresses.
var tierClusters = []struct {
	id, region string
	octet      byte
}{{"east", "eu", 1}, {"north", "eu", 2}, {"south", "us", 3}}

// tierOf maps the fixture's A records and SRV targets to their cluster.
func tierCluster(rr dns.RR) string {
	switch r := rr.(type) {
	case *dns.A:
		return tierClusters[r.A.To4()[1]-1].id
	case *dns.SRV:
		for _, c := range tierClusters {
			if len(r.Target) > len(c.id) && r.Target[:len(c.id)+1] == c.id+"-" {
				return c.id
			}
		}
	}
	return "?"
}

// tiered expects the answer's clusters, in order, and for SRV the
// priority of each cluster's targets.
func tiered(clusters []string, prio map[string]uint16) func(*dns.Msg) error {
	return func(r *dns.Msg) error {
		var got []string
		for _, rr := range r.Answer {
			c := tierCluster(rr)
			got = append(got, c)
			if srv, ok := rr.(*dns.SRV); ok && srv.Priority != prio[c] {
				return fmt.Errorf("%s priority %d, want %d", srv.Target, srv.Priority, prio[c])
			}
		}
		if r.Rcode != dns.RcodeSuccess || !slices.Equal(got, clusters) {
			return fmt.Errorf("rcode %s, clusters %v, want %v", dns.RcodeToString[r.Rcode], got, clusters)
		}
		return nil
	}
}

// setReady marks every endpoint of the tiered slice of cluster id ready
// or not.
func setReady(t *testing.T, c *cluster.Cluster, id string, ready bool) {
	t.Helper()
	es, err := c.Kube.DiscoveryV1().EndpointSlices("tier").Get(ctxT(t), "tiered-"+id, metav1.GetOptions{})
	require.NoError(t, err)
	for i := range es.Endpoints {
		es.Endpoints[i].Conditions.Ready = ptr.To(ready)
	}
	_, err = c.Kube.DiscoveryV1().EndpointSlices("tier").Update(ctxT(t), es, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func TestTiersIntegration(t *testing.T) {
	set := cluster.Start(t, cluster.Spec{Name: "east", ClusterID: "east"})
	c := set.Get("east")
	require.NoError(t, c.SetClusterProperty(ctxT(t), mcsapi.RegionProperty, "eu"))
	createNamespace(t, c, "tier")
	createImport(t, c, "tier", "tiered", mcsv1beta1.Headless, nil, false, port("pg", corev1.ProtocolTCP, 5432))
	for _, tc := range tierClusters {
		var eps []discoveryv1.Endpoint
		for i := range 2 {
			eps = append(eps, endpoint(fmt.Sprintf("%s-%d", tc.id, i), nil, fmt.Sprintf("10.%d.0.%d", tc.octet, i+1)))
		}
		createSlice(t, c, "tier", "tiered-"+tc.id, "tiered", tc.id, discoveryv1.AddressTypeIPv4, eps...)
		es, err := c.Kube.DiscoveryV1().EndpointSlices("tier").Get(ctxT(t), "tiered-"+tc.id, metav1.GetOptions{})
		require.NoError(t, err)
		es.Labels[mcsapi.LabelSourceRegion] = tc.region
		_, err = c.Kube.DiscoveryV1().EndpointSlices("tier").Update(ctxT(t), es, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	// fromProperty learns its cluster ID and region from the
	// ClusterProperties; inUS is told its region, us.
	fromProperty := startCoreDNS(t, fmt.Sprintf(`.:0 {
    mcs {
        kubeconfig %s east
        locality local-first
    }
}`, set.Kubeconfig))
	inUS := startCoreDNS(t, fmt.Sprintf(`.:0 {
    mcs {
        kubeconfig %s east
        region us
        locality local-first
    }
}`, set.Kubeconfig))
	// noRegion reads a region property that does not exist: two tiers,
	// as before regions.
	noRegion := startCoreDNS(t, fmt.Sprintf(`.:0 {
    mcs {
        kubeconfig %s east
        region_property region.example.com
        locality local-first
    }
}`, set.Kubeconfig))
	const name, srv = "tiered.tier.svc.clusterset.local", "_pg._tcp.tiered.tier.svc.clusterset.local"
	e, n, s := "east", "north", "south"

	t.Run("three tiers", func(t *testing.T) {
		fromProperty.eventually(t, name, dns.TypeA, tiered([]string{e, e, n, n, s, s}, nil))
		for _, q := range []string{name, srv} {
			fromProperty.eventually(t, q, dns.TypeSRV, tiered([]string{e, e, n, n, s, s}, map[string]uint16{e: 0, n: 10, s: 20}))
		}
		inUS.eventually(t, name, dns.TypeA, tiered([]string{e, e, s, s, n, n}, nil))
		inUS.eventually(t, srv, dns.TypeSRV, tiered([]string{e, e, s, s, n, n}, map[string]uint16{e: 0, s: 10, n: 20}))
		noRegion.eventually(t, name, dns.TypeA, tiered([]string{e, e, n, n, s, s}, nil))
		noRegion.eventually(t, srv, dns.TypeSRV, tiered([]string{e, e, n, n, s, s}, map[string]uint16{e: 0, n: 10, s: 10}))
	})

	t.Run("failover to the region, then to the rest", func(t *testing.T) {
		setReady(t, c, e, false)
		fromProperty.eventually(t, name, dns.TypeA, tiered([]string{n, n, s, s}, nil))
		fromProperty.eventually(t, srv, dns.TypeSRV, tiered([]string{n, n, s, s}, map[string]uint16{n: 10, s: 20}))
		setReady(t, c, n, false)
		fromProperty.eventually(t, name, dns.TypeA, tiered([]string{s, s}, nil))
		fromProperty.eventually(t, srv, dns.TypeSRV, tiered([]string{s, s}, map[string]uint16{s: 20}))
		// Back: the local tier first again.
		setReady(t, c, e, true)
		fromProperty.eventually(t, name, dns.TypeA, tiered([]string{e, e, s, s}, nil))
		fromProperty.eventually(t, srv, dns.TypeSRV, tiered([]string{e, e, s, s}, map[string]uint16{e: 0, s: 20}))
	})
}

package mcs

// Shaped headless answers on real API servers: two member clusters, one
// CoreDNS each, queried over UDP and TCP.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// localityFixtures writes what an importer would write in every member:
// headless imports "close" (trafficDistribution PreferClose) and
// "plain" (none), with three endpoints in east and three in west.
func localityFixtures(t *testing.T, c *cluster.Cluster) {
	createNamespace(t, c, "loc")
	for _, name := range []string{"close", "plain"} {
		spec := mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{port("pg", corev1.ProtocolTCP, 5432)}}
		if name == "close" {
			spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
		}
		si, err := c.MCS.MulticlusterV1beta1().ServiceImports("loc").Create(ctxT(t), &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		require.NoError(t, err)
		si.Status.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
		_, err = c.MCS.MulticlusterV1beta1().ServiceImports("loc").UpdateStatus(ctxT(t), si, metav1.UpdateOptions{})
		require.NoError(t, err)
		for n, id := range []string{"east", "west"} {
			var eps []discoveryv1.Endpoint
			for i := range 3 {
				eps = append(eps, endpoint(fmt.Sprintf("%s-%d", id, i), nil, fmt.Sprintf("10.%d.0.%d", 10*(n+1), i+1)))
			}
			createSlice(t, c, "loc", name+"-"+id, name, id, discoveryv1.AddressTypeIPv4, eps...)
		}
	}
}

// dualFixture is a dual-stack headless import of 100 endpoints in east
// (d-i at 10.30.0.i and fd00::30:i).
func dualFixture(t *testing.T, c *cluster.Cluster) {
	createImport(t, c, "loc", "dual", mcsv1beta1.Headless, nil, false, port("pg", corev1.ProtocolTCP, 5432))
	var v4, v6 []discoveryv1.Endpoint
	for i := range 100 {
		v4 = append(v4, endpoint(fmt.Sprintf("d-%d", i), nil, fmt.Sprintf("10.30.0.%d", i)))
		v6 = append(v6, endpoint(fmt.Sprintf("d-%d", i), nil, fmt.Sprintf("fd00::30:%x", i)))
	}
	createSlice(t, c, "loc", "dual-v4", "dual", "east", discoveryv1.AddressTypeIPv4, v4...)
	createSlice(t, c, "loc", "dual-v6", "dual", "east", discoveryv1.AddressTypeIPv6, v6...)
}

// mixedFixture is a headless import "mixed" with 30 endpoints in each of
// east and west (m-i): IPv4 and IPv6 when i%3 is 0, IPv4 only when 1,
// IPv6 only when 2; cluster n's at 10.4n.0.i and fd00::4n:i.
func mixedFixture(t *testing.T, c *cluster.Cluster) {
	createImport(t, c, "loc", "mixed", mcsv1beta1.Headless, nil, false, port("pg", corev1.ProtocolTCP, 5432))
	for n, id := range []string{"east", "west"} {
		var v4, v6 []discoveryv1.Endpoint
		for i := range 30 {
			host := fmt.Sprintf("m-%d", i)
			if i%3 != 2 {
				v4 = append(v4, endpoint(host, nil, fmt.Sprintf("10.4%d.0.%d", n, i)))
			}
			if i%3 != 1 {
				v6 = append(v6, endpoint(host, nil, fmt.Sprintf("fd00::4%d:%x", n, i)))
			}
		}
		createSlice(t, c, "loc", "mixed-"+id+"-v4", "mixed", id, discoveryv1.AddressTypeIPv4, v4...)
		createSlice(t, c, "loc", "mixed-"+id+"-v6", "mixed", id, discoveryv1.AddressTypeIPv6, v6...)
	}
}

// mixedEndpoint names the endpoint of mixedFixture an A or AAAA record
// belongs to ("east/m-3"), and whether it has both families.
func mixedEndpoint(rr dns.RR) (string, bool) {
	var cluster, i int
	switch r := rr.(type) {
	case *dns.A:
		cluster, i = int(r.A.To4()[1]-40), int(r.A.To4()[3])
	case *dns.AAAA:
		cluster, i = int(r.AAAA[13]-0x40), int(r.AAAA[15])
	default:
		return "?", false
	}
	return fmt.Sprintf("%s/m-%d", []string{"east", "west"}[cluster], i), i%3 == 0
}

// clusterOf maps the fixture's addresses and targets to their cluster.
func clusterOf(rr dns.RR) string {
	switch r := rr.(type) {
	case *dns.A:
		if r.A[1] == 10 {
			return "east"
		}
		return "west"
	case *dns.SRV:
		return strings.SplitN(r.Target, "-", 2)[0]
	}
	return "?"
}

// order expects NOERROR with six answers whose clusters are want, in order.
func order(want ...string) func(*dns.Msg) error {
	return func(r *dns.Msg) error {
		var got []string
		for _, rr := range r.Answer {
			got = append(got, clusterOf(rr))
		}
		if r.Rcode != dns.RcodeSuccess || r.Truncated || !slices.Equal(got, want) {
			return fmt.Errorf("rcode %s, TC %v, clusters %v, want %v", dns.RcodeToString[r.Rcode], r.Truncated, got, want)
		}
		return nil
	}
}

// priorities expects SRV records with priority 0 for the targets of local
// and prio for the others, local ones first.
func priorities(local string, prio uint16) func(*dns.Msg) error {
	return func(r *dns.Msg) error {
		if len(r.Answer) != 6 {
			return fmt.Errorf("%d answers, want 6", len(r.Answer))
		}
		for i, rr := range r.Answer {
			srv := rr.(*dns.SRV)
			want := prio
			if clusterOf(srv) == local {
				want = 0
				if i >= 3 {
					return fmt.Errorf("local target %s at %d", srv.Target, i)
				}
			}
			if srv.Priority != want {
				return fmt.Errorf("%s priority %d, want %d", srv.Target, srv.Priority, want)
			}
		}
		return nil
	}
}

func TestLocalityIntegration(t *testing.T) {
	set := cluster.Start(t, cluster.Spec{Name: "east", ClusterID: "east"}, cluster.Spec{Name: "west", ClusterID: "west"})
	for _, name := range []string{"east", "west"} {
		localityFixtures(t, set.Get(name))
	}
	dualFixture(t, set.Get("west"))
	mixedFixture(t, set.Get("east"))
	// east learns its cluster ID from its ClusterProperty, and makes
	// every headless answer local-first, rotated; west is told its ID,
	// and leaves locality to the imports' trafficDistribution.
	east := startCoreDNS(t, fmt.Sprintf(`.:0 {
    mcs {
        kubeconfig %s east
        locality local-first
        rotate
        max_answers 20
    }
}`, set.Kubeconfig))
	west := startCoreDNS(t, fmt.Sprintf(`.:0 {
    mcs {
        kubeconfig %s west
        cluster_id west
    }
}`, set.Kubeconfig))
	// A cache before mcs in the same server block (cache comes before
	// mcs in the plugin order): UDP answers that do not fit are
	// truncated (TC) instead of cut to a subset the cache would keep for
	// TCP clients too. A cache of other zones changes nothing.
	cached := startCoreDNS(t, fmt.Sprintf(`.:0 {
    mcs {
        kubeconfig %s west
        cluster_id west
    }
    cache 30
}`, set.Kubeconfig))
	cacheElsewhere := startCoreDNS(t, fmt.Sprintf(`.:0 {
    cache 30 cluster.local
    mcs {
        kubeconfig %s west
        cluster_id west
    }
}`, set.Kubeconfig))
	// none: as without shaping, but at most 4 endpoints.
	none := startCoreDNS(t, fmt.Sprintf(`.:0 {
    mcs {
        kubeconfig %s west
        cluster_id west
        locality none
        max_answers 4
    }
}`, set.Kubeconfig))
	e, w := "east", "west"

	t.Run("locality none and max_answers", func(t *testing.T) {
		none.eventually(t, "close.loc.svc.clusterset.local", dns.TypeA, order(e, e, e, w))
		none.eventually(t, "_pg._tcp.close.loc.svc.clusterset.local", dns.TypeSRV, func(r *dns.Msg) error {
			if err := order(e, e, e, w)(r); err != nil {
				return err
			}
			for _, rr := range r.Answer {
				if rr.(*dns.SRV).Priority != 0 {
					return fmt.Errorf("priority of %v", rr)
				}
			}
			return nil
		})
	})

	t.Run("local-first A and SRV priorities", func(t *testing.T) {
		for _, name := range []string{"close", "plain"} {
			east.eventually(t, name+".loc.svc.clusterset.local", dns.TypeA, order(e, e, e, w, w, w))
			east.eventually(t, "_pg._tcp."+name+".loc.svc.clusterset.local", dns.TypeSRV, priorities(e, 10))
			east.eventually(t, name+".loc.svc.clusterset.local", dns.TypeSRV, priorities(e, 10))
		}
		// trafficDistribution: PreferClose makes "close" local-first by
		// default; "plain" answers as with locality none.
		west.eventually(t, "close.loc.svc.clusterset.local", dns.TypeA, order(w, w, w, e, e, e))
		west.eventually(t, "_pg._tcp.close.loc.svc.clusterset.local", dns.TypeSRV, priorities(w, 10))
		west.eventually(t, "plain.loc.svc.clusterset.local", dns.TypeA, order(e, e, e, w, w, w))
		west.eventually(t, "_pg._tcp.plain.loc.svc.clusterset.local", dns.TypeSRV, priorities("none", 0))
	})

	t.Run("rotation visits every local endpoint first", func(t *testing.T) {
		for _, network := range []string{"udp", "tcp"} {
			first := map[string]bool{}
			for range 3 {
				r, err := ask(east.addr(network), network, "close.loc.svc.clusterset.local", dns.TypeA, 0)
				require.NoError(t, err)
				require.NoError(t, order(e, e, e, w, w, w)(r))
				first[r.Answer[0].(*dns.A).A.String()] = true
			}
			assert.Len(t, first, 3, "%s: %v", network, first)
		}
		// west does not rotate: the same order every time.
		var seen []string
		for range 3 {
			r, err := ask(west.udp, "udp", "close.loc.svc.clusterset.local", dns.TypeA, 0)
			require.NoError(t, err)
			seen = append(seen, fmt.Sprint(r.Answer))
		}
		assert.Equal(t, seen[0], seen[1])
		assert.Equal(t, seen[0], seen[2])
	})

	t.Run("a trafficDistribution change flips the default", func(t *testing.T) {
		mc := set.Get("west")
		si, err := mc.MCS.MulticlusterV1beta1().ServiceImports("loc").Get(ctxT(t), "plain", metav1.GetOptions{})
		require.NoError(t, err)
		si.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
		_, err = mc.MCS.MulticlusterV1beta1().ServiceImports("loc").Update(ctxT(t), si, metav1.UpdateOptions{})
		require.NoError(t, err)
		west.eventually(t, "plain.loc.svc.clusterset.local", dns.TypeA, order(w, w, w, e, e, e))
		west.eventually(t, "_pg._tcp.plain.loc.svc.clusterset.local", dns.TypeSRV, priorities(w, 10))
	})

	t.Run("subsets fit without TC and A and AAAA name the same endpoints", func(t *testing.T) {
		const name = "dual.loc.svc.clusterset.local"
		require.Eventually(t, func() bool {
			r, err := ask(west.tcp, "tcp", name, dns.TypeAAAA, 0)
			return err == nil && len(r.Answer) == 100
		}, 30*time.Second, 50*time.Millisecond)
		for _, size := range []uint16{0, 1232} {
			var sets [2][]byte
			for i, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
				r := askSubset(t, west.udp, name, qtype, size)
				assert.Less(t, len(r.Answer), 100)
				for _, rr := range r.Answer {
					switch a := rr.(type) {
					case *dns.A:
						sets[i] = append(sets[i], a.A.To4()[3])
					case *dns.AAAA:
						sets[i] = append(sets[i], a.AAAA[15])
					}
				}
			}
			assert.Equal(t, sets[0], sets[1], "bufsize %d: the same endpoints", size)
		}
	})

	t.Run("ANY of a big headless name is the A subset without TC", func(t *testing.T) {
		// RFC 8482: one RRset, here A; west neither rotates nor puts
		// "dual" local-first, so an A and an ANY query get the same.
		const name = "dual.loc.svc.clusterset.local"
		require.Eventually(t, func() bool {
			r, err := ask(west.tcp, "tcp", name, dns.TypeANY, 0)
			return err == nil && len(r.Answer) == 100
		}, 30*time.Second, 50*time.Millisecond, "over TCP, every endpoint")
		for _, size := range []uint16{0, 1232} {
			a, err := ask(west.udp, "udp", name, dns.TypeA, size)
			require.NoError(t, err)
			r := askSubset(t, west.udp, name, dns.TypeANY, size)
			assert.Equal(t, dns.RcodeSuccess, r.Rcode)
			assert.Less(t, len(r.Answer), 100)
			assert.Equal(t, fmt.Sprint(a.Answer), fmt.Sprint(r.Answer), "bufsize %d", size)
		}
	})

	t.Run("a cache in front: TC over UDP, every endpoint over TCP", func(t *testing.T) {
		const name = "dual.loc.svc.clusterset.local"
		for _, srv := range []*server{cached, cacheElsewhere} {
			// Synced: the last endpoint's own name (another cache key).
			srv.eventually(t, "d-99.east."+name, dns.TypeAAAA, func(r *dns.Msg) error {
				if len(r.Answer) != 1 {
					return fmt.Errorf("%v", r.Answer)
				}
				return nil
			})
		}
		for round := range 2 { // the second from the cache
			for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
				r, err := ask(cached.udp, "udp", name, qtype, 1232)
				require.NoError(t, err)
				assert.True(t, r.Truncated, "round %d %s: TC", round, dns.TypeToString[qtype])
				assert.Less(t, len(r.Answer), 100)
				r, err = ask(cached.tcp, "tcp", name, qtype, 1232)
				require.NoError(t, err)
				assert.False(t, r.Truncated)
				assert.Len(t, r.Answer, 100, "round %d %s over TCP after UDP: every endpoint", round, dns.TypeToString[qtype])
			}
		}
		r, err := ask(cacheElsewhere.udp, "udp", name, dns.TypeA, 1232)
		require.NoError(t, err)
		assert.False(t, r.Truncated, "a cache of other zones: the subset, as without it")
		assert.NotEmpty(t, r.Answer)
		assert.Less(t, len(r.Answer), 100)
		r, err = ask(cacheElsewhere.tcp, "tcp", name, dns.TypeA, 1232)
		require.NoError(t, err)
		assert.Len(t, r.Answer, 100)
	})

	t.Run("with single-family endpoints A and AAAA subsets name the same dual-stack endpoints", func(t *testing.T) {
		// east: local-first, rotating, at most 20. Wait on per-endpoint
		// names (the last of each slice), not on the service name: its
		// A and AAAA answers turn in step only if both are asked in turn.
		const name = "mixed.loc.svc.clusterset.local"
		for _, id := range []string{"east", "west"} {
			east.eventually(t, "m-28."+id+"."+name, dns.TypeA, func(r *dns.Msg) error {
				if len(r.Answer) != 1 {
					return fmt.Errorf("%v", r.Answer)
				}
				return nil
			})
			east.eventually(t, "m-29."+id+"."+name, dns.TypeAAAA, func(r *dns.Msg) error {
				if len(r.Answer) != 1 {
					return fmt.Errorf("%v", r.Answer)
				}
				return nil
			})
		}
		for _, size := range []uint16{0, 1232} {
			first := map[string]bool{}
			for round := range 12 {
				var all, both [2][]string
				for i, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
					r := askSubset(t, east.udp, name, qtype, size)
					assert.LessOrEqual(t, len(r.Answer), 20, "max_answers")
					for _, rr := range r.Answer {
						ep, dual := mixedEndpoint(rr)
						all[i] = append(all[i], ep)
						if dual {
							both[i] = append(both[i], ep)
						}
					}
					// 20 local endpoints of each family: a subset of at
					// most 20 is east's alone.
					for _, ep := range all[i] {
						assert.True(t, strings.HasPrefix(ep, "east/"), "%s: local first: %v", dns.TypeToString[qtype], all[i])
					}
				}
				assert.Equal(t, both[0], both[1], "bufsize %d round %d: the same dual-stack endpoints\nA    %v\nAAAA %v", size, round, all[0], all[1])
				if size == 0 {
					assert.Less(t, len(all[1]), 20, "AAAA cut to fit 512 octets")
				}
				first[all[0][0]] = true
			}
			assert.Greater(t, len(first), 1, "bufsize %d: the answers rotate: %v", size, first)
		}
	})
}

// askSubset asks name over UDP with an EDNS0 buffer of size (0: none) and
// checks what every headless subset must be: not truncated, non-empty, and
// within the client's buffer (512 without EDNS0) as sent.
func askSubset(t *testing.T, addr, name string, qtype, size uint16) *dns.Msg {
	t.Helper()
	r, err := ask(addr, "udp", name, qtype, size)
	require.NoError(t, err)
	assert.False(t, r.Truncated, "%s bufsize %d", dns.TypeToString[qtype], size)
	require.NotEmpty(t, r.Answer)
	r.Compress = true // as sent: Pack would not compress otherwise
	b, err := r.Pack()
	require.NoError(t, err)
	assert.LessOrEqual(t, len(b), max(512, int(size)))
	return r
}

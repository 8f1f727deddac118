package mcs

// Integration tests: real kube-apiservers (test/cluster), CoreDNS running
// in-process from a Corefile, and real DNS queries over UDP and TCP.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	coretest "github.com/coredns/coredns/test"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/deploy/crds"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

func init() {
	// As cmd/coredns does: mcs right after kubernetes.
	if !slices.Contains(dnsserver.Directives, pluginName) {
		i := slices.Index(dnsserver.Directives, "kubernetes")
		dnsserver.Directives = slices.Insert(slices.Clone(dnsserver.Directives), i+1, pluginName)
	}
}

// server is a CoreDNS instance started in-process.
type server struct {
	udp, tcp string
	inst     *caddy.Instance
	corefile string
}

func startCoreDNS(t *testing.T, corefile string) *server {
	t.Helper()
	inst, udp, tcp, err := coretest.CoreDNSServerAndPorts(corefile)
	require.NoError(t, err, corefile)
	t.Cleanup(func() {
		// Stop does not run shutdown callbacks; a reload or exit would.
		inst.ShutdownCallbacks()
		_ = inst.Stop()
	})
	return &server{udp: udp, tcp: tcp, inst: inst, corefile: corefile}
}

// ask sends one query; bufsize 0 sends no EDNS0 record.
func ask(addr, network, name string, qtype uint16, bufsize uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	if bufsize > 0 {
		m.SetEdns0(bufsize, false)
	}
	c := &dns.Client{Net: network, Timeout: 2 * time.Second, UDPSize: 65535}
	r, _, err := c.Exchange(m, addr)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		// A reply late or lost on a loaded machine: ask once more (a
		// wrong answer is never asked away).
		r, _, err = c.Exchange(m, addr)
	}
	return r, err
}

func (s *server) addr(network string) string {
	if network == "tcp" {
		return s.tcp
	}
	return s.udp
}

// eventually queries over UDP and TCP until check passes for both.
func (s *server) eventually(t *testing.T, name string, qtype uint16, check func(*dns.Msg) error) {
	t.Helper()
	procs.AnswerEventually(t, 30*time.Second, s.addr, name, qtype, check)
}

// render gives "owner TYPE rdata" lines, sorted, OPT left out.
func render(section []dns.RR) []string {
	out := []string{}
	for _, rr := range section {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		f := strings.Fields(rr.String())
		out = append(out, strings.ToLower(f[0])+" "+strings.Join(f[3:], " "))
	}
	sort.Strings(out)
	return out
}

// answer expects NOERROR with exactly these answer records (any order).
func answer(want ...string) func(*dns.Msg) error {
	sort.Strings(want)
	return func(r *dns.Msg) error {
		if r.Rcode != dns.RcodeSuccess {
			return fmt.Errorf("rcode %s, want NOERROR", dns.RcodeToString[r.Rcode])
		}
		if got := render(r.Answer); !slices.Equal(got, want) {
			return fmt.Errorf("answer %q, want %q", got, want)
		}
		return nil
	}
}

// answerExtra is answer plus exactly these additional records.
func answerExtra(want, extra []string) func(*dns.Msg) error {
	sort.Strings(extra)
	a := answer(want...)
	return func(r *dns.Msg) error {
		if err := a(r); err != nil {
			return err
		}
		if got := render(r.Extra); !slices.Equal(got, extra) {
			return fmt.Errorf("extra %q, want %q", got, extra)
		}
		return nil
	}
}

// negative expects rcode, no answer and the zone's SOA in the authority
// section (RFC 2308).
func negative(rcode int, zone string) func(*dns.Msg) error {
	return func(r *dns.Msg) error {
		if r.Rcode != rcode {
			return fmt.Errorf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[rcode])
		}
		if len(r.Answer) != 0 {
			return fmt.Errorf("answer %v, want none", r.Answer)
		}
		if len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA || r.Ns[0].Header().Name != zone {
			return fmt.Errorf("authority %v, want the SOA of %s", r.Ns, zone)
		}
		return nil
	}
}

var (
	wantNX     = negative(dns.RcodeNameError, "clusterset.local.")
	wantNODATA = negative(dns.RcodeSuccess, "clusterset.local.")
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func createNamespace(t *testing.T, c *cluster.Cluster, ns string) {
	_, err := c.Kube.CoreV1().Namespaces().Create(ctxT(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func createImport(t *testing.T, c *cluster.Cluster, ns, name string, typ mcsv1beta1.ServiceImportType, ips []string, absent bool, ports ...mcsv1beta1.ServicePort) {
	t.Helper()
	si, err := c.MCS.MulticlusterV1beta1().ServiceImports(ns).Create(ctxT(t), &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: typ, IPs: ips, Ports: ports},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	si.Status.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
	if absent {
		si.Status.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsAbsent
	}
	_, err = c.MCS.MulticlusterV1beta1().ServiceImports(ns).UpdateStatus(ctxT(t), si, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func port(name string, proto corev1.Protocol, n int32) mcsv1beta1.ServicePort {
	return mcsv1beta1.ServicePort{Name: name, Protocol: proto, Port: n}
}

func endpoint(host string, ready *bool, ips ...string) discoveryv1.Endpoint {
	ep := discoveryv1.Endpoint{Addresses: ips, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	if host != "" {
		ep.Hostname = ptr.To(host)
	}
	return ep
}

func createSlice(t *testing.T, c *cluster.Cluster, ns, name, svc, clusterID string, at discoveryv1.AddressType, eps ...discoveryv1.Endpoint) {
	t.Helper()
	labels := map[string]string{mcsapi.LabelServiceName: svc, mcsapi.LabelManagedBy: mcsapi.ManagedByImporter}
	if clusterID != "" {
		labels[mcsapi.LabelSourceCluster] = clusterID
	}
	_, err := c.Kube.DiscoveryV1().EndpointSlices(ns).Create(ctxT(t), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: labels},
		AddressType: at,
		Endpoints:   eps,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func reverse(t *testing.T, ip string) string {
	r, err := dns.ReverseAddr(ip)
	require.NoError(t, err)
	return r
}

func counter(t *testing.T, kind string) float64 {
	return testutil.ToFloat64(rejectedObjects.WithLabelValues(kind))
}

// fixtures writes, by hand, what an importer would write in the cluster.
func fixtures(t *testing.T, c *cluster.Cluster) {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	createNamespace(t, c, "demo")
	createNamespace(t, c, "other")
	createImport(t, c, "demo", "web", mcsv1beta1.ClusterSetIP, []string{"10.96.100.10"}, false, port("http", tcp, 80), port("", tcp, 8080))
	createSlice(t, c, "demo", "web-east", "web", "east", discoveryv1.AddressTypeIPv4, endpoint("web-0", nil, "10.1.0.1"))
	createImport(t, c, "demo", "v6", mcsv1beta1.ClusterSetIP, []string{"fd00:10:96::100:c"}, false, port("", tcp, 80))
	createImport(t, c, "demo", "dual", mcsv1beta1.ClusterSetIP, []string{"10.96.100.11", "fd00:10:96::100:b"}, false, port("", tcp, 80))
	createImport(t, c, "demo", "dns", mcsv1beta1.ClusterSetIP, []string{"10.96.100.53"}, false, port("dns", udp, 42), port("dns-tcp", tcp, 42))
	createImport(t, c, "demo", "db", mcsv1beta1.Headless, nil, false, port("pg", tcp, 5432), port("metrics", tcp, 9187))
	createSlice(t, c, "demo", "db-east", "db", "east", discoveryv1.AddressTypeIPv4,
		endpoint("db-0", ptr.To(true), "10.1.0.5"),
		endpoint("db-1", ptr.To(false), "10.1.0.6"),
		endpoint("", nil, "10.1.0.7"))
	createSlice(t, c, "demo", "db-west", "db", "west.eu", discoveryv1.AddressTypeIPv6, endpoint("", ptr.To(true), "fd00::7"))
	// malformed slices of db: never answered, never break db
	createSlice(t, c, "demo", "db-nolabel", "db", "", discoveryv1.AddressTypeIPv4, endpoint("db-9", nil, "10.1.0.9"))
	createSlice(t, c, "demo", "db-badid", "db", "East_1", discoveryv1.AddressTypeIPv4, endpoint("db-8", nil, "10.1.0.8"))
	createImport(t, c, "demo", "absent", mcsv1beta1.Headless, nil, true, port("http", tcp, 80))
	createSlice(t, c, "demo", "absent-east", "absent", "east", discoveryv1.AddressTypeIPv4, endpoint("a-0", nil, "10.1.1.1"))
	// One bad ips entry beside a good one: the good one answers. A name
	// that is not a DNS label (the API takes subdomains): rejected whole.
	createImport(t, c, "demo", "bad", mcsv1beta1.ClusterSetIP, []string{"10.96.100.300", "10.96.100.30"}, false, port("", tcp, 80))
	createImport(t, c, "demo", "dotted.name", mcsv1beta1.ClusterSetIP, []string{"10.96.100.31"}, false, port("", tcp, 80))
	createImport(t, c, "demo", "empty", mcsv1beta1.Headless, nil, false, port("http", tcp, 80))
	createImport(t, c, "other", "api", mcsv1beta1.ClusterSetIP, []string{"10.96.100.20"}, false, port("", tcp, 80))
	var big []discoveryv1.Endpoint
	for i := range 500 {
		big = append(big, endpoint("", nil, fmt.Sprintf("10.3.%d.%d", i/250, i%250+1)))
	}
	createImport(t, c, "demo", "big", mcsv1beta1.Headless, nil, false, port("http", tcp, 80))
	createSlice(t, c, "demo", "big-east", "big", "east", discoveryv1.AddressTypeIPv4, big...)
}

func TestIntegration(t *testing.T) {
	set := cluster.Start(t,
		cluster.Spec{Name: "main", ClusterID: "main"},
		cluster.Spec{Name: "alpha", SkipMCSCRDs: true},
		cluster.Spec{Name: "fork", SkipMCSCRDs: true},
	)
	mc := set.Get("main")
	rejectedBefore := counter(t, kindServiceImport) + counter(t, kindEndpointSlice) + counter(t, kindImportEntry)
	fixtures(t, mc)

	srv := startCoreDNS(t, fmt.Sprintf(`.:0 {
    mcs clusterset.local in-addr.arpa ip6.arpa {
        kubeconfig %s main
        ttl 7
    }
}`, set.Kubeconfig))

	// Wait for the last fixture to be served (over TCP: it is big).
	require.Eventually(t, func() bool {
		r, err := ask(srv.tcp, "tcp", "big.demo.svc.clusterset.local", dns.TypeSRV, 0)
		return err == nil && len(r.Answer) == 500
	}, 30*time.Second, 50*time.Millisecond)

	t.Run("apex and dns-version", func(t *testing.T) {
		srv.eventually(t, "dns-version.clusterset.local", dns.TypeTXT, answer(`dns-version.clusterset.local. TXT "1.0.0"`))
		srv.eventually(t, "DNS-VERSION.ClusterSet.Local", dns.TypeTXT, answer(`dns-version.clusterset.local. TXT "1.0.0"`))
		srv.eventually(t, "clusterset.local", dns.TypeNS, answer("clusterset.local. NS ns.dns.clusterset.local."))
		srv.eventually(t, "clusterset.local", dns.TypeSOA, func(r *dns.Msg) error {
			if len(r.Answer) != 1 || r.Answer[0].(*dns.SOA).Ns != "ns.dns.clusterset.local." || r.Answer[0].Header().Ttl != 7 {
				return fmt.Errorf("apex SOA %v", r.Answer)
			}
			return nil
		})
		r, err := ask(srv.udp, "udp", "ns.dns.clusterset.local", dns.TypeA, 0)
		require.NoError(t, err)
		assert.Equal(t, dns.RcodeSuccess, r.Rcode, "the NS target exists")
	})

	t.Run("ClusterSetIP", func(t *testing.T) {
		srv.eventually(t, "web.demo.svc.clusterset.local", dns.TypeA, answer("web.demo.svc.clusterset.local. A 10.96.100.10"))
		srv.eventually(t, "Web.DEMO.svc.clusterset.local", dns.TypeA, answer("web.demo.svc.clusterset.local. A 10.96.100.10"))
		srv.eventually(t, "web.demo.svc.clusterset.local", dns.TypeAAAA, wantNODATA)
		srv.eventually(t, "web.demo.svc.clusterset.local", dns.TypeMX, wantNODATA)
		srv.eventually(t, "v6.demo.svc.clusterset.local", dns.TypeAAAA, answer("v6.demo.svc.clusterset.local. AAAA fd00:10:96::100:c"))
		srv.eventually(t, "v6.demo.svc.clusterset.local", dns.TypeA, wantNODATA)
		srv.eventually(t, "dual.demo.svc.clusterset.local", dns.TypeA, answer("dual.demo.svc.clusterset.local. A 10.96.100.11"))
		srv.eventually(t, "dual.demo.svc.clusterset.local", dns.TypeAAAA, answer("dual.demo.svc.clusterset.local. AAAA fd00:10:96::100:b"))
		srv.eventually(t, "_http._tcp.web.demo.svc.clusterset.local", dns.TypeSRV, answerExtra(
			[]string{"_http._tcp.web.demo.svc.clusterset.local. SRV 0 100 80 web.demo.svc.clusterset.local."},
			[]string{"web.demo.svc.clusterset.local. A 10.96.100.10"}))
		srv.eventually(t, "web.demo.svc.clusterset.local", dns.TypeSRV, answer(
			"web.demo.svc.clusterset.local. SRV 0 100 80 web.demo.svc.clusterset.local."))
		srv.eventually(t, "dns.demo.svc.clusterset.local", dns.TypeSRV, answer(
			"dns.demo.svc.clusterset.local. SRV 0 100 42 dns.demo.svc.clusterset.local."))
		srv.eventually(t, "_dns._udp.dns.demo.svc.clusterset.local", dns.TypeSRV, answer(
			"_dns._udp.dns.demo.svc.clusterset.local. SRV 0 100 42 dns.demo.svc.clusterset.local."))
		// ClusterSetIP imports have no per-endpoint names, even with slices.
		srv.eventually(t, "web-0.east.web.demo.svc.clusterset.local", dns.TypeA, wantNX)
		srv.eventually(t, "east.web.demo.svc.clusterset.local", dns.TypeA, wantNX)
	})

	t.Run("Headless", func(t *testing.T) {
		srv.eventually(t, "db.demo.svc.clusterset.local", dns.TypeA, answer(
			"db.demo.svc.clusterset.local. A 10.1.0.5", "db.demo.svc.clusterset.local. A 10.1.0.7"))
		srv.eventually(t, "db.demo.svc.clusterset.local", dns.TypeAAAA, answer("db.demo.svc.clusterset.local. AAAA fd00::7"))
		srv.eventually(t, "db-0.east.db.demo.svc.clusterset.local", dns.TypeA, answer("db-0.east.db.demo.svc.clusterset.local. A 10.1.0.5"))
		srv.eventually(t, "10-1-0-7.east.db.demo.svc.clusterset.local", dns.TypeA, answer("10-1-0-7.east.db.demo.svc.clusterset.local. A 10.1.0.7"))
		srv.eventually(t, "fd00--7.west.eu.db.demo.svc.clusterset.local", dns.TypeAAAA, answer("fd00--7.west.eu.db.demo.svc.clusterset.local. AAAA fd00::7"))
		srv.eventually(t, "db-1.east.db.demo.svc.clusterset.local", dns.TypeA, wantNX)
		srv.eventually(t, "db-9.main.db.demo.svc.clusterset.local", dns.TypeA, wantNX)
		srv.eventually(t, "_pg._tcp.db.demo.svc.clusterset.local", dns.TypeSRV, answerExtra([]string{
			"_pg._tcp.db.demo.svc.clusterset.local. SRV 0 33 5432 db-0.east.db.demo.svc.clusterset.local.",
			"_pg._tcp.db.demo.svc.clusterset.local. SRV 0 33 5432 10-1-0-7.east.db.demo.svc.clusterset.local.",
			"_pg._tcp.db.demo.svc.clusterset.local. SRV 0 33 5432 fd00--7.west.eu.db.demo.svc.clusterset.local.",
		}, []string{
			"db-0.east.db.demo.svc.clusterset.local. A 10.1.0.5",
			"10-1-0-7.east.db.demo.svc.clusterset.local. A 10.1.0.7",
			"fd00--7.west.eu.db.demo.svc.clusterset.local. AAAA fd00::7",
		}))
		srv.eventually(t, "db.demo.svc.clusterset.local", dns.TypeSRV, func(r *dns.Msg) error {
			if len(r.Answer) != 6 {
				return fmt.Errorf("bare-name SRV: %d records, want 3 endpoints x 2 ports", len(r.Answer))
			}
			// every target resolves
			for _, rr := range r.Answer {
				target := rr.(*dns.SRV).Target
				q, err := ask(srv.udp, "udp", target, dns.TypeA, 0)
				if err != nil {
					return err
				}
				q6, err := ask(srv.udp, "udp", target, dns.TypeAAAA, 0)
				if err != nil {
					return err
				}
				if len(q.Answer)+len(q6.Answer) == 0 {
					return fmt.Errorf("SRV target %s does not resolve", target)
				}
			}
			return nil
		})
		srv.eventually(t, "empty.demo.svc.clusterset.local", dns.TypeA, wantNX)
		srv.eventually(t, "absent.demo.svc.clusterset.local", dns.TypeA, wantNX)
		srv.eventually(t, "a-0.east.absent.demo.svc.clusterset.local", dns.TypeA, wantNX)
	})

	t.Run("cluster ID names and non-terminals", func(t *testing.T) {
		srv.eventually(t, "east.db.demo.svc.clusterset.local", dns.TypeA, wantNODATA)
		srv.eventually(t, "west.eu.db.demo.svc.clusterset.local", dns.TypeA, wantNODATA)
		srv.eventually(t, "eu.db.demo.svc.clusterset.local", dns.TypeA, wantNODATA)
		srv.eventually(t, "north.db.demo.svc.clusterset.local", dns.TypeA, wantNX)
		srv.eventually(t, "svc.clusterset.local", dns.TypeA, wantNODATA)
		srv.eventually(t, "demo.svc.clusterset.local", dns.TypeA, wantNODATA)
		srv.eventually(t, "nope.svc.clusterset.local", dns.TypeA, wantNX)
		srv.eventually(t, "nothere.demo.svc.clusterset.local", dns.TypeA, wantNX)
		srv.eventually(t, "web.demo.pod.clusterset.local", dns.TypeA, wantNX)
	})

	t.Run("PTR", func(t *testing.T) {
		srv.eventually(t, reverse(t, "10.96.100.10"), dns.TypePTR, answer(reverse(t, "10.96.100.10")+" PTR web.demo.svc.clusterset.local."))
		srv.eventually(t, reverse(t, "fd00:10:96::100:b"), dns.TypePTR, answer(reverse(t, "fd00:10:96::100:b")+" PTR dual.demo.svc.clusterset.local."))
		srv.eventually(t, reverse(t, "10.1.0.5"), dns.TypePTR, answer(reverse(t, "10.1.0.5")+" PTR db-0.east.db.demo.svc.clusterset.local."))
		srv.eventually(t, reverse(t, "fd00::7"), dns.TypePTR, answer(reverse(t, "fd00::7")+" PTR fd00--7.west.eu.db.demo.svc.clusterset.local."))
		srv.eventually(t, reverse(t, "10.1.0.6"), dns.TypePTR, negative(dns.RcodeNameError, "in-addr.arpa."))
		srv.eventually(t, reverse(t, "10.1.0.1"), dns.TypePTR, negative(dns.RcodeNameError, "in-addr.arpa."))
	})

	t.Run("malformed objects are skipped", func(t *testing.T) {
		srv.eventually(t, "bad.demo.svc.clusterset.local", dns.TypeA, answer("bad.demo.svc.clusterset.local. A 10.96.100.30"))
		srv.eventually(t, "dotted.name.demo.svc.clusterset.local", dns.TypeA, wantNX)
		assert.GreaterOrEqual(t, counter(t, kindServiceImport)+counter(t, kindEndpointSlice)+counter(t, kindImportEntry)-rejectedBefore, 4.0,
			"one bad import, one bad ips entry, two bad slices")
	})

	t.Run("subsets of 500 endpoints", func(t *testing.T) {
		// Over UDP, the largest subset that fits the client's buffer (at
		// most max_udp_size, 1232 by default), without TC (the MCS DNS
		// specification allows a subset of the ready endpoints); over
		// TCP all of them.
		const big = "big.demo.svc.clusterset.local"
		for _, size := range []uint16{0, 1232, 4096} {
			r, err := ask(srv.udp, "udp", big, dns.TypeA, size)
			require.NoError(t, err)
			assert.False(t, r.Truncated, "UDP bufsize %d", size)
			r.Compress = true
			b, _ := r.Pack()
			limit := min(max(512, int(size)), DefaultMaxUDPSize)
			assert.LessOrEqual(t, len(b), limit, "UDP bufsize %d", size)
			assert.Less(t, len(r.Answer), 500)
			assert.Greater(t, len(b)+16, limit, "one more record would not fit")
		}
		r, err := ask(srv.tcp, "tcp", big, dns.TypeA, 0)
		require.NoError(t, err)
		assert.False(t, r.Truncated)
		assert.Len(t, r.Answer, 500, "the full answer over TCP")
	})

	t.Run("updates", func(t *testing.T) {
		ctx := ctxT(t)
		es, err := mc.Kube.DiscoveryV1().EndpointSlices("demo").Get(ctx, "db-east", metav1.GetOptions{})
		require.NoError(t, err)
		es.Endpoints[0].Conditions.Ready = ptr.To(false) // db-0 turns unready
		before := histogramCount(t)
		_, err = mc.Kube.DiscoveryV1().EndpointSlices("demo").Update(ctx, es, metav1.UpdateOptions{})
		require.NoError(t, err)
		srv.eventually(t, "db.demo.svc.clusterset.local", dns.TypeA, answer("db.demo.svc.clusterset.local. A 10.1.0.7"))
		srv.eventually(t, "db-0.east.db.demo.svc.clusterset.local", dns.TypeA, wantNX)
		srv.eventually(t, reverse(t, "10.1.0.5"), dns.TypePTR, negative(dns.RcodeNameError, "in-addr.arpa."))
		// Observed just after the answer is published.
		assert.Eventually(t, func() bool { return histogramCount(t) > before }, 5*time.Second, 10*time.Millisecond, "programming latency observed")

		require.NoError(t, mc.MCS.MulticlusterV1beta1().ServiceImports("demo").Delete(ctx, "web", metav1.DeleteOptions{}))
		srv.eventually(t, "web.demo.svc.clusterset.local", dns.TypeA, wantNX)
		srv.eventually(t, reverse(t, "10.96.100.10"), dns.TypePTR, negative(dns.RcodeNameError, "in-addr.arpa."))

		si, err := mc.MCS.MulticlusterV1beta1().ServiceImports("demo").Get(ctx, "dual", metav1.GetOptions{})
		require.NoError(t, err)
		si.Spec.IPs = []string{"10.96.100.12"}
		_, err = mc.MCS.MulticlusterV1beta1().ServiceImports("demo").Update(ctx, si, metav1.UpdateOptions{})
		require.NoError(t, err)
		srv.eventually(t, "dual.demo.svc.clusterset.local", dns.TypeA, answer("dual.demo.svc.clusterset.local. A 10.96.100.12"))
		srv.eventually(t, "dual.demo.svc.clusterset.local", dns.TypeAAAA, wantNODATA)

		// the only import of a namespace goes: the namespace goes too
		require.NoError(t, mc.MCS.MulticlusterV1beta1().ServiceImports("other").Delete(ctx, "api", metav1.DeleteOptions{}))
		srv.eventually(t, "other.svc.clusterset.local", dns.TypeA, wantNX)
	})

	t.Run("fallthrough", func(t *testing.T) {
		zonefile := filepath.Join(t.TempDir(), "clusterset.local.db")
		require.NoError(t, os.WriteFile(zonefile, []byte(`$ORIGIN clusterset.local.
@ 3600 IN SOA ns.legacy. admin.legacy. 1 7200 1800 86400 5
legacy 5 IN A 192.0.2.99
`), 0o644))
		ft := startCoreDNS(t, fmt.Sprintf(`clusterset.local:0 {
    mcs {
        kubeconfig %s main
        fallthrough
    }
    file %s clusterset.local
}`, set.Kubeconfig, zonefile))
		ft.eventually(t, "legacy.clusterset.local", dns.TypeA, answer("legacy.clusterset.local. A 192.0.2.99"))
		ft.eventually(t, "v6.demo.svc.clusterset.local", dns.TypeAAAA, answer("v6.demo.svc.clusterset.local. AAAA fd00:10:96::100:c"))
		srv.eventually(t, "legacy.clusterset.local", dns.TypeA, wantNX)
	})

	t.Run("namespaces option", func(t *testing.T) {
		createImport(t, mc, "other", "api2", mcsv1beta1.ClusterSetIP, []string{"10.96.100.21"}, false, port("", corev1.ProtocolTCP, 80))
		ns := startCoreDNS(t, fmt.Sprintf(`.:0 {
    mcs {
        kubeconfig %s main
        namespaces other
    }
}`, set.Kubeconfig))
		ns.eventually(t, "api2.other.svc.clusterset.local", dns.TypeA, answer("api2.other.svc.clusterset.local. A 10.96.100.21"))
		ns.eventually(t, "dual.demo.svc.clusterset.local", dns.TypeA, wantNX)
	})

	t.Run("shutdown stops everything, gauges follow", func(t *testing.T) { testLifecycle(t, set) })
	t.Run("reload", func(t *testing.T) { testReload(t, set) })
	t.Run("RBAC from the README", func(t *testing.T) { testRBAC(t, set) })
	t.Run("v1alpha1 only, CRDs installed late, ready", func(t *testing.T) { testAlpha(t, set) })
	t.Run("status fork and API down", func(t *testing.T) { testForkAndAPIDown(t, set) })
}

func histogramCount(t *testing.T) uint64 {
	var m dto.Metric
	require.NoError(t, programmingLatency.Write(&m))
	return m.GetHistogram().GetSampleCount()
}

// informerGoroutines counts goroutines running client-go informer code or
// this package's controller.
func informerGoroutines() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "k8s.io/client-go/tools/cache") || strings.Contains(g, "plugin/mcs.(*controller)") {
			n++
		}
	}
	return n
}

// testLifecycle starts a plugin on the main cluster directly, checks the
// gauges it adds and that stop ends all of its goroutines and takes its
// gauge contributions back (what a reload relies on).
func testLifecycle(t *testing.T, set *cluster.Set) {
	mc := set.Get("main")
	baseG := informerGoroutines()
	baseImports := testutil.ToFloat64(importsServed.WithLabelValues("Headless"))
	baseEndpoints := testutil.ToFloat64(endpointsServed)

	p := newMCS(&config{zones: []string{"clusterset.local."}, ttl: 5}, mc.Config)
	assert.False(t, p.Ready())
	p.start()
	require.Eventually(t, p.Ready, 30*time.Second, 20*time.Millisecond)
	assert.Equal(t, "v1beta1", p.ctl.servedVersion())
	// Headless imports with answers in demo: db (2 or 3 ready endpoints,
	// depending on whether "updates" ran) and big (500).
	assert.Equal(t, 2.0, testutil.ToFloat64(importsServed.WithLabelValues("Headless"))-baseImports)
	assert.Contains(t, []int64{502, 503}, p.index.Endpoints())
	assert.Equal(t, float64(p.index.Endpoints()), testutil.ToFloat64(endpointsServed)-baseEndpoints)
	assert.Greater(t, informerGoroutines(), baseG)

	p.stop()
	assert.Equal(t, baseImports, testutil.ToFloat64(importsServed.WithLabelValues("Headless")))
	assert.Equal(t, baseEndpoints, testutil.ToFloat64(endpointsServed))
	require.Eventually(t, func() bool { return informerGoroutines() <= baseG }, 10*time.Second, 50*time.Millisecond,
		"informer goroutines left after stop: %d > %d", informerGoroutines(), baseG)
}

// testReload restarts a CoreDNS instance the way a Corefile reload does
// (caddy Restart): the new instance answers, the old one's informers stop.
func testReload(t *testing.T, set *cluster.Set) {
	corefile := func(ttl int) string {
		return fmt.Sprintf(`.:0 {
    mcs {
        kubeconfig %s main
        ttl %d
    }
}`, set.Kubeconfig, ttl)
	}
	inst, err := coretest.CoreDNSServer(corefile(5))
	require.NoError(t, err)
	s1 := &server{inst: inst}
	s1.udp, s1.tcp = coretest.CoreDNSServerPorts(inst, 0)
	s1.eventually(t, "v6.demo.svc.clusterset.local", dns.TypeAAAA, answer("v6.demo.svc.clusterset.local. AAAA fd00:10:96::100:c"))
	running := informerGoroutines()
	fullReads := func() float64 {
		return testutil.ToFloat64(lists.WithLabelValues("serviceimports")) + testutil.ToFloat64(lists.WithLabelValues("endpointslices"))
	}
	readsBefore := fullReads()

	// The same stanza again: the running informers and answers are
	// handed over, none are started.
	same, err := inst.Restart(coretest.NewInput(corefile(5)))
	require.NoError(t, err)
	inst = same
	s1 = &server{inst: inst}
	s1.udp, s1.tcp = coretest.CoreDNSServerPorts(inst, 0)
	r, err := ask(s1.udp, "udp", "v6.demo.svc.clusterset.local", dns.TypeAAAA, 1232)
	require.NoError(t, err)
	require.NoError(t, answer("v6.demo.svc.clusterset.local. AAAA fd00:10:96::100:c")(r), "answered at once after the reload")
	// A started informer lists its resource; a stopped one's goroutines
	// go. (A reflector between its list and its watch can show one
	// goroutine more or less for a moment.)
	assert.Equal(t, readsBefore, fullReads(), "no informers started")
	assert.Eventually(t, func() bool { return informerGoroutines() == running }, 5*time.Second, 50*time.Millisecond, "no informers started or stopped")

	// A reload that fails after the plugin's start-up (its new port is
	// taken): caddy drops the new instance without shutting it down; the
	// informers its start-up began are stopped all the same.
	busy, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	defer busy.Close()
	_, busyPort, _ := net.SplitHostPort(busy.Addr().String())
	_, err = inst.Restart(coretest.NewInput(corefile(7) + "\n.:" + busyPort + " {\n    whoami\n}\n"))
	require.Error(t, err, "the port is taken")
	require.Eventually(t, func() bool { return informerGoroutines() <= running }, 10*time.Second, 50*time.Millisecond,
		"the failed reload's informers must stop: %d goroutines, %d before", informerGoroutines(), running)
	r, err = ask(s1.udp, "udp", "v6.demo.svc.clusterset.local", dns.TypeAAAA, 1232)
	require.NoError(t, err)
	require.NoError(t, answer("v6.demo.svc.clusterset.local. AAAA fd00:10:96::100:c")(r), "the running instance still answers")

	next, err := inst.Restart(coretest.NewInput(corefile(9)))
	require.NoError(t, err)
	t.Cleanup(func() {
		next.ShutdownCallbacks()
		_ = next.Stop()
	})
	s2 := &server{inst: next}
	s2.udp, s2.tcp = coretest.CoreDNSServerPorts(next, 0)
	s2.eventually(t, "v6.demo.svc.clusterset.local", dns.TypeAAAA, func(r *dns.Msg) error {
		if len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 9 {
			return fmt.Errorf("answer %v, want one AAAA with the new TTL", r.Answer)
		}
		return nil
	})
	require.Eventually(t, func() bool { return informerGoroutines() <= running }, 10*time.Second, 50*time.Millisecond,
		"the old instance's informers must stop: %d goroutines, %d before the reload", informerGoroutines(), running)
}

// testRBAC runs the plugin as a user without permissions: CoreDNS start-up
// and a reload to it fail naming the refused request; a plugin started
// anyway is not ready and counts the Forbidden errors; once the README's
// rules are bound it syncs and answers, and CoreDNS starts.
func testRBAC(t *testing.T, set *cluster.Set) {
	mc := set.Get("main")
	kc, err := clientcmd.LoadFromFile(set.Kubeconfig)
	require.NoError(t, err)
	kc.AuthInfos["main"].Impersonate = "mcs-dns-test"
	denied := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, denied))
	deniedCorefile := fmt.Sprintf(".:0 {\n    mcs {\n        kubeconfig %s main\n    }\n}", denied)
	_, _, _, err = coretest.CoreDNSServerAndPorts(deniedCorefile)
	require.Error(t, err, "RBAC denies the lists: start-up fails")
	assert.Contains(t, err.Error(), "plugin/mcs: ")
	assert.Contains(t, err.Error(), `is forbidden: User "mcs-dns-test" cannot list resource`)
	// A reload to it fails too; the running instance keeps answering.
	running := startCoreDNS(t, fmt.Sprintf(".:0 {\n    mcs {\n        kubeconfig %s main\n    }\n}", set.Kubeconfig))
	running.eventually(t, "v6.demo.svc.clusterset.local", dns.TypeAAAA, answer("v6.demo.svc.clusterset.local. AAAA fd00:10:96::100:c"))
	_, err = running.inst.Restart(coretest.NewInput(deniedCorefile))
	require.Error(t, err, "a reload to the denied stanza fails")
	assert.Contains(t, err.Error(), `is forbidden: User "mcs-dns-test" cannot list resource`)
	r, err := ask(running.udp, "udp", "v6.demo.svc.clusterset.local", dns.TypeAAAA, 1232)
	require.NoError(t, err)
	require.NoError(t, answer("v6.demo.svc.clusterset.local. AAAA fd00:10:96::100:c")(r), "the running instance still answers")

	cfg := rest.CopyConfig(mc.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "mcs-dns-test"}
	before := testutil.ToFloat64(watchErrors.WithLabelValues(mcsapi.ServiceImports))
	p := newMCS(&config{zones: []string{"clusterset.local."}, ttl: 5}, cfg)
	p.start()
	t.Cleanup(p.stop)
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(watchErrors.WithLabelValues(mcsapi.ServiceImports)) > before
	}, 20*time.Second, 50*time.Millisecond, "Forbidden is reported")
	assert.False(t, p.Ready())

	ctx := ctxT(t)
	_, err = mc.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "mcs-dns-test"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"serviceimports"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = mc.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mcs-dns-test"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "mcs-dns-test"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "mcs-dns-test"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, p.Ready, 60*time.Second, 50*time.Millisecond, "ready once the rules are bound")
	r = query(t, p, "v6.demo.svc.clusterset.local.", dns.TypeAAAA)
	assert.Equal(t, []string{"v6.demo.svc.clusterset.local. AAAA fd00:10:96::100:c"}, rrs(r.Answer))
	allowed := startCoreDNS(t, deniedCorefile)
	allowed.eventually(t, "v6.demo.svc.clusterset.local", dns.TypeAAAA, answer("v6.demo.svc.clusterset.local. AAAA fd00:10:96::100:c"))
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// serviceImportCRD returns the shipped ServiceImport CRD.
func serviceImportCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	all, err := crds.All()
	require.NoError(t, err)
	for _, c := range all {
		if c.Spec.Group == mcsapi.Group && c.Spec.Names.Plural == mcsapi.ServiceImports {
			return c.DeepCopy()
		}
	}
	t.Fatal("no ServiceImport CRD")
	return nil
}

func installCRD(t *testing.T, c *cluster.Cluster, crd *apiextensionsv1.CustomResourceDefinition) {
	cs, err := apiextensions.NewForConfig(c.Config)
	require.NoError(t, err)
	_, err = cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctxT(t), crd, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctxT(t), crd.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond)
}

// testAlpha: a cluster that serves only v1alpha1, and whose CRDs come
// after CoreDNS started. Not ready (and SERVFAIL rather than NXDOMAIN)
// until the informers sync; then answers from v1alpha1 objects.
func testAlpha(t *testing.T, set *cluster.Set) {
	ac := set.Get("alpha")
	readyPort := freePort(t)
	srv := startCoreDNS(t, fmt.Sprintf(`.:0 {
    ready 127.0.0.1:%d
    mcs {
        kubeconfig %s alpha
    }
}`, readyPort, set.Kubeconfig))
	readyURL := "http://127.0.0.1:" + strconv.Itoa(readyPort) + "/ready"
	require.Eventually(t, func() bool { code, _ := httpGet(readyURL); return code != 0 }, 10*time.Second, 20*time.Millisecond)
	time.Sleep(time.Second)
	code, body := httpGet(readyURL)
	assert.Equal(t, http.StatusServiceUnavailable, code, "no CRDs yet: not ready")
	assert.Contains(t, body, "mcs")
	r, err := ask(srv.udp, "udp", "nothere.demo.svc.clusterset.local", dns.TypeA, 0)
	require.NoError(t, err)
	assert.Equal(t, dns.RcodeServerFailure, r.Rcode, "before sync an unknown name is SERVFAIL, not NXDOMAIN")

	crd := serviceImportCRD(t)
	var alpha []apiextensionsv1.CustomResourceDefinitionVersion
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1alpha1" {
			v.Served, v.Storage = true, true
			alpha = append(alpha, v)
		}
	}
	require.Len(t, alpha, 1)
	crd.Spec.Versions = alpha
	crd.ResourceVersion = ""
	installCRD(t, ac, crd)
	createNamespace(t, ac, "demo")
	gvr := schema.GroupVersionResource{Group: mcsapi.Group, Version: "v1alpha1", Resource: mcsapi.ServiceImports}
	_, err = ac.Dynamic.Resource(gvr).Namespace("demo").Create(ctxT(t), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport",
		"metadata": map[string]any{"name": "old"},
		"spec": map[string]any{"type": "ClusterSetIP", "ips": []any{"10.96.200.1"},
			"ports": []any{map[string]any{"name": "http", "protocol": "TCP", "port": int64(80)}}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	srv.eventually(t, "old.demo.svc.clusterset.local", dns.TypeA, answer("old.demo.svc.clusterset.local. A 10.96.200.1"))
	srv.eventually(t, "_http._tcp.old.demo.svc.clusterset.local", dns.TypeSRV, answer(
		"_http._tcp.old.demo.svc.clusterset.local. SRV 0 100 80 old.demo.svc.clusterset.local."))
	require.Eventually(t, func() bool { code, _ := httpGet(readyURL); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond)
	srv.eventually(t, "nothere.demo.svc.clusterset.local", dns.TypeA, wantNX)

	// The CRD is upgraded to serve v1beta1 only (v1alpha1 no longer
	// served): the plugin follows, without a restart, and imports
	// created and deleted since are answered as they are.
	cs, err := apiextensions.NewForConfig(ac.Config)
	require.NoError(t, err)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctxT(t), crd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Versions = serviceImportCRD(t).Spec.Versions
		for i := range cur.Spec.Versions {
			if cur.Spec.Versions[i].Name == "v1alpha1" {
				cur.Spec.Versions[i].Served = false
			}
		}
		_, err = cs.ApiextensionsV1().CustomResourceDefinitions().Update(ctxT(t), cur, metav1.UpdateOptions{})
		return err
	}))
	beta := schema.GroupVersionResource{Group: mcsapi.Group, Version: "v1beta1", Resource: mcsapi.ServiceImports}
	require.Eventually(t, func() bool {
		_, err := ac.Dynamic.Resource(beta).Namespace("demo").Create(ctxT(t), &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
			"metadata": map[string]any{"name": "newer"},
			"spec": map[string]any{"type": "ClusterSetIP", "ips": []any{"10.96.200.2"},
				"ports": []any{map[string]any{"name": "http", "protocol": "TCP", "port": int64(80)}}},
		}}, metav1.CreateOptions{})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "v1beta1 served")
	require.NoError(t, ac.Dynamic.Resource(beta).Namespace("demo").Delete(ctxT(t), "old", metav1.DeleteOptions{}))
	srv.eventually(t, "newer.demo.svc.clusterset.local", dns.TypeA, answer("newer.demo.svc.clusterset.local. A 10.96.200.2"))
	srv.eventually(t, "old.demo.svc.clusterset.local", dns.TypeA, wantNX)
	code, _ = httpGet(readyURL)
	assert.Equal(t, http.StatusOK, code, "ready throughout")
}

// testForkAndAPIDown: a CRD fork that keeps type, ips and ports in status;
// then the API server stops and the last answers keep being served.
func testForkAndAPIDown(t *testing.T, set *cluster.Set) {
	fc := set.Get("fork")
	preserve := &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	installCRD(t, fc, &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "serviceimports.multicluster.x-k8s.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: mcsapi.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "serviceimports", Singular: "serviceimport", Kind: "ServiceImport", ListKind: "ServiceImportList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1beta1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": *preserve, "status": *preserve},
				}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	})
	createNamespace(t, fc, "demo")
	gvr := schema.GroupVersionResource{Group: mcsapi.Group, Version: "v1beta1", Resource: mcsapi.ServiceImports}
	res := fc.Dynamic.Resource(gvr).Namespace("demo")
	obj, err := res.Create(ctxT(t), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
		"metadata": map[string]any{"name": "forked"},
		"spec":     map[string]any{},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	obj.Object["status"] = map[string]any{"type": "ClusterSetIP", "ips": []any{"10.96.201.1", "fd00:10:96::201:1"},
		"ports": []any{map[string]any{"name": "http", "protocol": "TCP", "port": int64(80)}}}
	_, err = res.UpdateStatus(ctxT(t), obj, metav1.UpdateOptions{})
	require.NoError(t, err)

	srv := startCoreDNS(t, fmt.Sprintf(`.:0 {
    mcs clusterset.local in-addr.arpa {
        kubeconfig %s fork
    }
}`, set.Kubeconfig))
	srv.eventually(t, "forked.demo.svc.clusterset.local", dns.TypeA, answer("forked.demo.svc.clusterset.local. A 10.96.201.1"))
	srv.eventually(t, "forked.demo.svc.clusterset.local", dns.TypeAAAA, answer("forked.demo.svc.clusterset.local. AAAA fd00:10:96::201:1"))
	srv.eventually(t, "_http._tcp.forked.demo.svc.clusterset.local", dns.TypeSRV, answer(
		"_http._tcp.forked.demo.svc.clusterset.local. SRV 0 100 80 forked.demo.svc.clusterset.local."))
	srv.eventually(t, reverse(t, "10.96.201.1"), dns.TypePTR, answer(reverse(t, "10.96.201.1")+" PTR forked.demo.svc.clusterset.local."))

	// The API server goes away: the last answers stay, errors are counted.
	errsBefore := testutil.ToFloat64(watchErrors.WithLabelValues(mcsapi.ServiceImports)) + testutil.ToFloat64(watchErrors.WithLabelValues("endpointslices"))
	stopped := make(chan error, 1)
	go func() { stopped <- fc.Stop() }()
	t.Cleanup(func() {
		if err := <-stopped; err != nil {
			t.Logf("stopping the fork cluster: %v", err)
		}
	})
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(watchErrors.WithLabelValues(mcsapi.ServiceImports))+testutil.ToFloat64(watchErrors.WithLabelValues("endpointslices")) > errsBefore
	}, 30*time.Second, 100*time.Millisecond, "watch errors are reported")
	srv.eventually(t, "forked.demo.svc.clusterset.local", dns.TypeA, answer("forked.demo.svc.clusterset.local. A 10.96.201.1"))
	srv.eventually(t, "nothere.demo.svc.clusterset.local", dns.TypeA, wantNX)

	// A Corefile reload that leaves the stanza as it was, while the API
	// server is down: the new instance takes over the running informers
	// and their answers (new ones could not list: SERVFAIL).
	next, err := srv.inst.Restart(coretest.NewInput(srv.corefile))
	require.NoError(t, err)
	t.Cleanup(func() {
		next.ShutdownCallbacks()
		_ = next.Stop()
	})
	srv.inst = next
	srv.udp, srv.tcp = coretest.CoreDNSServerPorts(next, 0)
	for _, network := range []string{"udp", "tcp"} {
		addr := srv.udp
		if network == "tcp" {
			addr = srv.tcp
		}
		r, err := ask(addr, network, "forked.demo.svc.clusterset.local", dns.TypeA, 1232)
		require.NoError(t, err)
		require.NoError(t, answer("forked.demo.svc.clusterset.local. A 10.96.201.1")(r), network)
	}
}

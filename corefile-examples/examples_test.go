// Package examples_test starts our CoreDNS with every published Corefile and
// queries it, so that no example can rot.
package examples_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
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

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

var (
	blockOpen  = regexp.MustCompile(`(?m)^(\s*)(mcs|kubernetes)\b([^{\n]*)\{[ \t]*$`)
	bareMCS    = regexp.MustCompile(`(?m)^(\s*)mcs([ \t][^{\n]*)?$`)
	fixedPorts = regexp.MustCompile(`:(8080|8181|9153)\b`)
)

// adapt points an example at the test cluster: a kubeconfig line in every
// mcs and kubernetes block, and free ports instead of fixed ones. It
// returns the Corefile and the old->new address of each swapped port.
func adapt(t *testing.T, corefile, kubeconfig, context string) (string, map[string]string) {
	kc := "kubeconfig " + kubeconfig + " " + context
	out := blockOpen.ReplaceAllString(corefile, "$0\n$1    "+kc)
	out = bareMCS.ReplaceAllString(out, "${1}mcs$2 {\n$1    "+kc+"\n$1}")
	ports := map[string]string{}
	out = fixedPorts.ReplaceAllStringFunc(out, func(m string) string {
		addr := "127.0.0.1:" + strconv.Itoa(procs.FreePort(t))
		ports[m] = addr
		return addr
	})
	require.Contains(t, out, kc, "example has no mcs or kubernetes block to point at the cluster")
	return out, ports
}

func read(t *testing.T, name string) string {
	raw, err := os.ReadFile(name)
	require.NoError(t, err)
	return string(raw)
}

type fixture struct {
	set        *cluster.Set
	kubeSvcIP  string
	clusterSet string // ClusterSet VIP of web.demo
}

// setup writes, by hand, what mcs-importer would: a ClusterSetIP import
// with a VIP and a headless import with one endpoint from cluster "east";
// plus a plain Service for the cluster.local zone.
func setup(t *testing.T) *fixture {
	set := cluster.Start(t, cluster.Spec{Name: "east", ClusterID: "east"})
	c := set.Clusters[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	svc, err := c.Kube.CoreV1().Services("demo").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "local"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	f := &fixture{set: set, kubeSvcIP: svc.Spec.ClusterIP, clusterSet: "10.250.0.10"}

	si := c.MCS.MulticlusterV1beta1().ServiceImports("demo")
	_, err = si.Create(ctx, &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{f.clusterSet},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	db, err := si.Create(ctx, &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless,
			Ports: []mcsv1beta1.ServicePort{{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	db.Status.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
	_, err = si.UpdateStatus(ctx, db, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = c.Kube.DiscoveryV1().EndpointSlices("demo").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "db-east", Labels: map[string]string{
			mcsapi.LabelServiceName: "db", mcsapi.LabelSourceCluster: "east", mcsapi.LabelManagedBy: mcsapi.ManagedByImporter}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.5"}, Hostname: ptr.To("db-0"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("pg"), Port: ptr.To[int32](5432), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// A headless service whose answer is too big for one 1232-byte UDP reply.
	big, err := si.Create(ctx, &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "big"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless,
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	big.Status.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
	_, err = si.UpdateStatus(ctx, big, metav1.UpdateOptions{})
	require.NoError(t, err)
	bigSlice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "big-east", Labels: map[string]string{
			mcsapi.LabelServiceName: "big", mcsapi.LabelSourceCluster: "east", mcsapi.LabelManagedBy: mcsapi.ManagedByImporter}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for i := range bigEndpoints {
		bigSlice.Endpoints = append(bigSlice.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.2.%d.%d", i/250, 1+i%250)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	_, err = c.Kube.DiscoveryV1().EndpointSlices("demo").Create(ctx, bigSlice, metav1.CreateOptions{})
	require.NoError(t, err)
	return f
}

// bigEndpoints is the size of the headless service "big": 100 A records
// take about 1,650 bytes.
const bigEndpoints = 100

// eventually queries until check passes (informers sync asynchronously).
// exchange sends q to addr with c, once more after a timeout: a reply
// late or lost on a loaded machine (a wrong one is never asked away).
func exchange(c *dns.Client, q *dns.Msg, addr string) (*dns.Msg, error) {
	r, _, err := c.Exchange(q, addr)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		r, _, err = c.Exchange(q, addr)
	}
	return r, err
}

func eventually(t *testing.T, addr, name string, qtype uint16, check func(*dns.Msg) error) {
	t.Helper()
	procs.AnswerEventually(t, 30*time.Second, procs.Addr(addr), name, qtype, check)
}

func wantA(ip string) func(*dns.Msg) error {
	return func(r *dns.Msg) error {
		if r.Rcode != dns.RcodeSuccess {
			return fmt.Errorf("rcode %s", dns.RcodeToString[r.Rcode])
		}
		for _, rr := range r.Answer {
			if a, ok := rr.(*dns.A); ok && a.A.String() == ip {
				return nil
			}
		}
		return fmt.Errorf("no A %s in %v", ip, r.Answer)
	}
}

func wantPTR(target string) func(*dns.Msg) error {
	return func(r *dns.Msg) error {
		for _, rr := range r.Answer {
			if p, ok := rr.(*dns.PTR); ok && strings.EqualFold(p.Ptr, target) {
				return nil
			}
		}
		return fmt.Errorf("rcode %s, no PTR %s in %v", dns.RcodeToString[r.Rcode], target, r.Answer)
	}
}

func wantRcode(rcode int) func(*dns.Msg) error {
	return func(r *dns.Msg) error {
		if r.Rcode != rcode {
			return fmt.Errorf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[rcode])
		}
		return nil
	}
}

func reverse(t *testing.T, ip string) string {
	name, err := dns.ReverseAddr(ip)
	require.NoError(t, err)
	return name
}

// mcsAnswers checks the clusterset.local answers every example must give.
func mcsAnswers(t *testing.T, addr string, f *fixture) {
	eventually(t, addr, "web.demo.svc.clusterset.local", dns.TypeA, wantA(f.clusterSet))
	eventually(t, addr, "WEB.Demo.svc.clusterset.local", dns.TypeA, wantA(f.clusterSet))
	eventually(t, addr, "db.demo.svc.clusterset.local", dns.TypeA, wantA("10.1.0.5"))
	eventually(t, addr, "db-0.east.db.demo.svc.clusterset.local", dns.TypeA, wantA("10.1.0.5"))
	eventually(t, addr, "nothere.demo.svc.clusterset.local", dns.TypeA, wantRcode(dns.RcodeNameError))
}

func TestStandalone(t *testing.T) {
	bins := procs.Build(t)
	f := setup(t)
	corefile, _ := adapt(t, read(t, "standalone.Corefile"), f.set.Kubeconfig, "east")
	srv := procs.StartCoreDNS(t, bins.CoreDNS, corefile)
	mcsAnswers(t, srv.Addr, f)
}

func TestWithKubernetes(t *testing.T) {
	bins := procs.Build(t)
	f := setup(t)
	corefile, _ := adapt(t, read(t, "with-kubernetes.Corefile"), f.set.Kubeconfig, "east")
	srv := procs.StartCoreDNS(t, bins.CoreDNS, corefile)
	mcsAnswers(t, srv.Addr, f)
	// The cluster's own zone, from the in-tree kubernetes plugin.
	eventually(t, srv.Addr, "local.demo.svc.cluster.local", dns.TypeA, wantA(f.kubeSvcIP))
	// PTR for both: a Service IP (kubernetes) and a ClusterSet VIP and a
	// headless endpoint (mcs, reached through kubernetes' fallthrough).
	eventually(t, srv.Addr, reverse(t, f.kubeSvcIP), dns.TypePTR, wantPTR("local.demo.svc.cluster.local."))
	eventually(t, srv.Addr, reverse(t, f.clusterSet), dns.TypePTR, wantPTR("web.demo.svc.clusterset.local."))
	eventually(t, srv.Addr, reverse(t, "10.1.0.5"), dns.TypePTR, wantPTR("db-0.east.db.demo.svc.clusterset.local."))
}

// answered accepts any answer with records: the name is served.
func answered(r *dns.Msg) error {
	if len(r.Answer) == 0 {
		return fmt.Errorf("no answer yet")
	}
	return nil
}

func TestForwardFromClusterDNS(t *testing.T) {
	bins := procs.Build(t)
	f := setup(t)
	mcsCore, _ := adapt(t, read(t, "standalone.Corefile"), f.set.Kubeconfig, "east")
	backend := procs.StartCoreDNS(t, bins.CoreDNS, mcsCore)
	stanza := read(t, "forward-from-cluster-dns.Corefile")
	require.Contains(t, stanza, "forward . 10.96.0.53")
	// The stanza stands for a block added to the cluster DNS; point its
	// forward at our CoreDNS instead of the Service ClusterIP.
	frontend := procs.StartCoreDNS(t, bins.CoreDNS, strings.Replace(stanza, "10.96.0.53", backend.Addr, 1))
	mcsAnswers(t, frontend.Addr, f)

	// A big headless answer through the forward: over UDP the subset that
	// fits the client's buffer, then over TCP every endpoint (forward asks
	// over the client's transport). A cache in the stanza would return
	// the UDP subset to the TCP client.
	eventually(t, frontend.Addr, "big.demo.svc.clusterset.local", dns.TypeA, answered)
	// With the DO bit: a key of its own in a cache, not warmed above.
	q := new(dns.Msg)
	q.SetQuestion("big.demo.svc.clusterset.local.", dns.TypeA)
	q.SetEdns0(1232, true)
	r, err := exchange(&dns.Client{Net: "udp", UDPSize: 1232, Timeout: 2 * time.Second}, q, frontend.Addr)
	require.NoError(t, err)
	assert.Less(t, len(r.Answer), bigEndpoints, "a subset over UDP")
	r, err = exchange(&dns.Client{Net: "tcp", Timeout: 2 * time.Second}, q, frontend.Addr)
	require.NoError(t, err)
	assert.Len(t, r.Answer, bigEndpoints, "over TCP, right after the UDP subset")
}

func TestProduction(t *testing.T) {
	bins := procs.Build(t)
	f := setup(t)
	corefile, ports := adapt(t, read(t, "production.Corefile"), f.set.Kubeconfig, "east")
	srv := procs.StartCoreDNS(t, bins.CoreDNS, corefile)
	mcsAnswers(t, srv.Addr, f)
	eventually(t, srv.Addr, reverse(t, f.clusterSet), dns.TypePTR, wantPTR("web.demo.svc.clusterset.local."))

	get := func(addr, path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, _ := get(ports[":8080"], "/health")
	require.Equal(t, http.StatusOK, code, "health")
	code, _ = get(ports[":8181"], "/ready")
	require.Equal(t, http.StatusOK, code, "ready")
	code, metrics := get(ports[":9153"], "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, metrics, "coredns_mcs_")

	// UDP answers stay at most 1232 bytes (bufsize), whatever buffer the
	// client offers: no amplifier. A headless answer that does not fit is
	// the largest subset of its endpoints that does, without TC, rotating
	// from query to query; over TCP it comes whole.
	eventually(t, srv.Addr, "big.demo.svc.clusterset.local", dns.TypeA, answered)
	q := new(dns.Msg)
	q.SetQuestion("big.demo.svc.clusterset.local.", dns.TypeA)
	q.SetEdns0(65535, false)
	udp := &dns.Client{Net: "udp", UDPSize: 65535, Timeout: 2 * time.Second}
	r, err := exchange(udp, q, srv.Addr)
	require.NoError(t, err)
	r.Compress = true // as it came: Pack would not compress otherwise
	packed, err := r.Pack()
	require.NoError(t, err)
	assert.False(t, r.Truncated, "a headless subset is sent without TC")
	assert.LessOrEqual(t, len(packed), 1232, "UDP reply size")
	assert.Less(t, len(r.Answer), bigEndpoints, "a subset over UDP")
	assert.NotEmpty(t, r.Answer)
	tcp := &dns.Client{Net: "tcp", Timeout: 2 * time.Second}
	r, err = exchange(tcp, q, srv.Addr)
	require.NoError(t, err)
	assert.Len(t, r.Answer, bigEndpoints, "over TCP")

	// Denials are normal traffic (AAAA of an IPv4-only service, a typo):
	// only errors are logged, not one line per NXDOMAIN or NODATA.
	before := strings.Count(srv.Output(), "\n")
	for i := range 200 {
		_, _ = procs.Query(srv.Addr, "udp", fmt.Sprintf("nope-%d.demo.svc.clusterset.local", i), dns.TypeA)
		_, _ = procs.Query(srv.Addr, "udp", "web.demo.svc.clusterset.local", dns.TypeAAAA)
	}
	time.Sleep(500 * time.Millisecond)
	assert.Less(t, strings.Count(srv.Output(), "\n")-before, 5, "log lines for 400 denials:\n%s", srv.Output())
}

// TestProductionWithCache: the production Corefile with a cache added to
// its server block. cache runs before mcs and keys replies by name and
// type, not transport, and stores no truncated reply: mcs sees it at
// start-up (one log line) and truncates a big headless answer over UDP
// (TC) instead of cutting it to a subset, so that a TCP client asking
// after a UDP one still gets every endpoint. (TestProduction: without the
// cache, the UDP answer is a subset without TC.)
func TestProductionWithCache(t *testing.T) {
	bins := procs.Build(t)
	f := setup(t)
	prod := read(t, "production.Corefile")
	withCache := strings.Replace(prod, "    bufsize 1232\n", "    bufsize 1232\n    cache 30\n", 1)
	require.NotEqual(t, prod, withCache)
	corefile, _ := adapt(t, withCache, f.set.Kubeconfig, "east")
	srv := procs.StartCoreDNS(t, bins.CoreDNS, corefile)
	mcsAnswers(t, srv.Addr, f)
	// Synced with every endpoint of big: the last one's own name (its
	// own cache key), so that big's answer is not cached before.
	eventually(t, srv.Addr, fmt.Sprintf("10-2-0-%d.east.big.demo.svc.clusterset.local", bigEndpoints), dns.TypeA, wantA(fmt.Sprintf("10.2.0.%d", bigEndpoints)))
	assert.Contains(t, srv.Output(), "cache runs before mcs in this server block")

	q := new(dns.Msg)
	q.SetQuestion("big.demo.svc.clusterset.local.", dns.TypeA)
	q.SetEdns0(65535, false)
	udp := &dns.Client{Net: "udp", UDPSize: 65535, Timeout: 2 * time.Second}
	tcp := &dns.Client{Net: "tcp", Timeout: 2 * time.Second}
	for round := range 2 { // the second from the cache
		r, err := exchange(udp, q, srv.Addr)
		require.NoError(t, err)
		assert.True(t, r.Truncated, "round %d: TC over UDP", round)
		r.Compress = true
		packed, err := r.Pack()
		require.NoError(t, err)
		assert.LessOrEqual(t, len(packed), 1232, "UDP reply size")
		r, err = exchange(tcp, q, srv.Addr)
		require.NoError(t, err)
		assert.False(t, r.Truncated)
		assert.Len(t, r.Answer, bigEndpoints, "round %d: over TCP after UDP, every endpoint", round)
	}
}

func TestAdaptBareMCS(t *testing.T) {
	out, _ := adapt(t, "clusterset.local {\n    mcs\n}\n", "/kc", "east")
	require.Contains(t, out, "mcs {\n        kubeconfig /kc east\n    }")
}

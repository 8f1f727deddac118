package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/miekg/dns"
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

// TestBinaryListsMCS: the plugin is registered as dns.mcs (server type
// dns). CoreDNS 1.15's `coredns -plugins` prints names without the "dns."
// prefix (caddy.DescribePlugins drops it), so the binary lists "mcs".
func TestBinaryListsMCS(t *testing.T) {
	require.Contains(t, caddy.ListPlugins()["others"], "dns.mcs")
	bin := procs.CoreDNSBinary(t)
	out, err := exec.Command(bin, "-plugins").CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.Fields(string(out))
	require.Contains(t, lines, "mcs")
	require.Contains(t, lines, "kubernetes")
}

// TestBinaryKubernetesAndMCS runs the built binary with one server block
// that serves cluster.local (the in-tree kubernetes plugin) and
// clusterset.local (mcs), and checks that both answer, PTR included.
func TestBinaryKubernetesAndMCS(t *testing.T) {
	bin := procs.CoreDNSBinary(t)
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
	_, err = c.MCS.MulticlusterV1beta1().ServiceImports("demo").Create(ctx, &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.250.0.10"},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.MCS.MulticlusterV1beta1().ServiceImports("demo").Create(ctx, &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless,
			Ports: []mcsv1beta1.ServicePort{{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Kube.DiscoveryV1().EndpointSlices("demo").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "db-east", Labels: map[string]string{
			mcsapi.LabelServiceName: "db", mcsapi.LabelSourceCluster: "east.eu", mcsapi.LabelManagedBy: mcsapi.ManagedByImporter}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.5"}, Hostname: ptr.To("db-0")}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("pg"), Port: ptr.To[int32](5432), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	corefile := fmt.Sprintf(`. {
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %[1]s east
        fallthrough in-addr.arpa ip6.arpa
    }
    mcs clusterset.local in-addr.arpa ip6.arpa {
        kubeconfig %[1]s east
    }
}
`, set.Kubeconfig)
	srv := procs.StartCoreDNS(t, bin, corefile)

	expect := func(name string, qtype uint16, want string) {
		t.Helper()
		var last string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			ok := true
			for _, network := range []string{"udp", "tcp"} {
				r, err := procs.Query(srv.Addr, network, name, qtype)
				if err != nil {
					last, ok = err.Error(), false
					break
				}
				var got []string
				for _, rr := range r.Answer {
					f := strings.Fields(rr.String())
					got = append(got, strings.Join(f[3:], " "))
				}
				if !slices.Contains(got, want) {
					last, ok = fmt.Sprintf("%s over %s: %s %v", name, network, dns.RcodeToString[r.Rcode], got), false
					break
				}
			}
			if ok {
				return
			}
		}
		t.Fatalf("want %q: %s", want, last)
	}
	rev := func(ip string) string { r, _ := dns.ReverseAddr(ip); return r }

	expect("local.demo.svc.cluster.local", dns.TypeA, "A "+svc.Spec.ClusterIP)
	expect("web.demo.svc.clusterset.local", dns.TypeA, "A 10.250.0.10")
	expect("db-0.east.eu.db.demo.svc.clusterset.local", dns.TypeA, "A 10.1.0.5")
	expect("dns-version.clusterset.local", dns.TypeTXT, `TXT "1.0.0"`)
	expect(rev(svc.Spec.ClusterIP), dns.TypePTR, "PTR local.demo.svc.cluster.local.")
	expect(rev("10.250.0.10"), dns.TypePTR, "PTR web.demo.svc.clusterset.local.")
	// Not checked here: PTR of an imported headless endpoint IP. The
	// kubernetes plugin, first in the chain, indexes every EndpointSlice
	// (imported ones included) and answers PTR for their addresses itself;
	// for a slice without kubernetes.io/service-name it builds the name
	// "db-0..demo.svc.cluster.local.", which cannot be packed, and the
	// client times out. The mcs plugin's own PTR answers are tested in
	// plugin/mcs.
}

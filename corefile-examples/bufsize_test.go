package examples_test

import (
	"context"
	"fmt"
	"net"
	"regexp"
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

	"github.com/mcs-dns/mcs-dns/test/procs"
)

// wideEndpoints is the size of the headless cluster.local Service "wide":
// its A answer is about 1,700 octets.
const wideEndpoints = 100

// mcsBlock is the first line of an mcs block (after adapt).
var mcsBlock = regexp.MustCompile(`(?m)^(\s*)mcs\b[^{\n]*\{[ \t]*$`)

// TestBufsizeCapsOtherPlugins: max_udp_size caps only the mcs plugin's
// replies; the kubernetes and forward plugins answer as large as the
// query's EDNS0 buffer claims, and only the Corefiles' bufsize 1232 keeps
// those servers from being amplifiers. A UDP query with a 65,535-octet
// buffer for a big answer another plugin gives (a headless cluster.local
// Service from kubernetes; a clusterset.local name forward relays from a
// server that does not cap its replies) gets at most 1232 octets, truncated
// (TC) or cut, while TCP gets the whole answer.
func TestBufsizeCapsOtherPlugins(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and CoreDNS")
	}
	bins := procs.Build(t)
	f := setup(t)
	c := f.set.Clusters[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Kube.CoreV1().Services("demo").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "wide"},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "wide-1", Labels: map[string]string{
			discoveryv1.LabelServiceName: "wide", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for i := range wideEndpoints {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.3.%d.%d", i/250, 1+i%250)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	_, err = c.Kube.DiscoveryV1().EndpointSlices("demo").Create(ctx, slice, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Run("with-kubernetes", func(t *testing.T) {
		corefile, _ := adapt(t, read(t, "with-kubernetes.Corefile"), f.set.Kubeconfig, "east")
		srv := procs.StartCoreDNS(t, bins.CoreDNS, corefile)
		name := "wide.demo.svc.cluster.local."
		waitTCP(t, srv.Addr, name, wideEndpoints)
		size, r := udpReply(t, srv.Addr, name)
		assert.LessOrEqual(t, size, maxUDPReply, "UDP reply for %s", name)
		assert.True(t, r.Truncated, "UDP reply for %s (%d answers) without TC", name, len(r.Answer))
		tcp := tcpReply(t, srv.Addr, name)
		assert.Len(t, tcp.Answer, wideEndpoints, "TCP")
	})

	t.Run("forward-from-cluster-dns", func(t *testing.T) {
		// The server forwarded to answers as large as the buffer it is
		// sent claims.
		backCore, _ := adapt(t, read(t, "standalone.Corefile"), f.set.Kubeconfig, "east")
		backCore = mcsBlock.ReplaceAllString(backCore, "$0\n$1    max_udp_size 65535")
		require.Contains(t, backCore, "max_udp_size 65535")
		back := procs.StartCoreDNS(t, bins.CoreDNS, backCore)
		name := "big.demo.svc.clusterset.local."
		waitTCP(t, back.Addr, name, bigEndpoints)
		size, _ := udpReply(t, back.Addr, name)
		require.Greater(t, size, maxUDPReply, "the server forwarded to must not cap its replies")

		srv := procs.StartCoreDNS(t, bins.CoreDNS, strings.Replace(read(t, "forward-from-cluster-dns.Corefile"), "10.96.0.53", back.Addr, 1))
		waitTCP(t, srv.Addr, name, bigEndpoints)
		size, r := udpReply(t, srv.Addr, name)
		assert.LessOrEqual(t, size, maxUDPReply, "UDP reply for %s", name)
		assert.True(t, r.Truncated || len(r.Answer) < bigEndpoints, "UDP reply for %s: all %d answers, no TC", name, len(r.Answer))
		tcp := tcpReply(t, srv.Addr, name)
		assert.Len(t, tcp.Answer, bigEndpoints, "TCP")
	})
}

// waitTCP waits until name has n A records over TCP.
func waitTCP(t *testing.T, addr, name string, n int) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := procs.Query(addr, "tcp", name, dns.TypeA)
		if assert.NoError(c, err) {
			assert.Len(c, r.Answer, n)
		}
	}, 30*time.Second, 100*time.Millisecond, "%s over TCP", name)
}

// udpReply sends an A query for name with a 65,535-octet EDNS0 buffer over
// UDP and returns the reply's size in octets, as sent, and the reply.
func udpReply(t *testing.T, addr, name string) (int, *dns.Msg) {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	q.SetEdns0(dns.MaxMsgSize, false)
	conn, err := net.Dial("udp", addr)
	require.NoError(t, err)
	defer conn.Close()
	buf := make([]byte, dns.MaxMsgSize)
	for attempt := 0; ; attempt++ {
		q.Id = dns.Id()
		_, err = conn.Write(mustPack(q))
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(2*time.Second)))
		n, err := conn.Read(buf)
		if ne, ok := err.(net.Error); ok && ne.Timeout() && attempt < 2 {
			continue // lost on a loaded machine
		}
		require.NoError(t, err)
		r := new(dns.Msg)
		require.NoError(t, r.Unpack(buf[:n]))
		require.Equal(t, q.Id, r.Id)
		require.Equal(t, dns.RcodeSuccess, r.Rcode, "UDP reply for %s", name)
		return n, r
	}
}

// tcpReply asks for name's A records over TCP.
func tcpReply(t *testing.T, addr, name string) *dns.Msg {
	t.Helper()
	r, err := procs.Query(addr, "tcp", name, dns.TypeA)
	require.NoError(t, err)
	require.Equal(t, dns.RcodeSuccess, r.Rcode)
	return r
}

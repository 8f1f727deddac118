package importer_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

// forgeSlice writes a source EndpointSlice of Service svc that the
// endpointslice controller did not make (manager "" or another), as
// anyone who may create EndpointSlices in the namespace can.
func forgeSlice(t *testing.T, c *cluster.Cluster, ns, svc, name, manager, ip string) {
	t.Helper()
	labels := map[string]string{discoveryv1.LabelServiceName: svc}
	if manager != "" {
		labels[discoveryv1.LabelManagedBy] = manager
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints:   endpoints([]ep{{ip: ip, ready: true, hostname: "web-0"}}),
	}
	cl := c.Kube.DiscoveryV1().EndpointSlices(ns)
	if cur, err := cl.Get(bg(), name, metav1.GetOptions{}); err == nil {
		s.ResourceVersion = cur.ResourceVersion
		_, err = cl.Update(bg(), s, metav1.UpdateOptions{})
		require.NoError(t, err)
		return
	}
	_, err := cl.Create(bg(), s, metav1.CreateOptions{})
	require.NoError(t, err)
}

// holdsAddress says which EndpointSlice of namespace ns in c, whatever
// its labels, has an endpoint at one of addrs ("" when none has).
func holdsAddress(c *cluster.Cluster, ns string, addrs ...string) (string, error) {
	l, err := c.Kube.DiscoveryV1().EndpointSlices(ns).List(bg(), metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, s := range l.Items {
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				if slices.Contains(addrs, a) {
					return fmt.Sprintf("%s (%s)", s.Name, a), nil
				}
			}
		}
	}
	return "", nil
}

// served checks what the CoreDNS at addr answers for the headless
// Service web in ns: the A records want, over UDP and TCP, and NXDOMAIN
// for the forged per-endpoint name and for the PTRs of the forged
// addresses.
func served(t *testing.T, addr, ns string, want []string, forged ...string) {
	t.Helper()
	name := "web." + ns + ".svc.clusterset.local."
	procs.AnswerEventually(t, waitFor, procs.Addr(addr), name, dns.TypeA, func(r *dns.Msg) error {
		var got []string
		for _, rr := range r.Answer {
			if a, ok := rr.(*dns.A); ok {
				got = append(got, a.A.String())
			}
		}
		slices.Sort(got)
		if r.Rcode != dns.RcodeSuccess || !slices.Equal(got, want) {
			return fmt.Errorf("rcode %s, A %v, want %v", dns.RcodeToString[r.Rcode], got, want)
		}
		return nil
	})
	names := []string{"web-0.west." + name}
	for _, a := range forged {
		rev, err := dns.ReverseAddr(a)
		require.NoError(t, err)
		names = append(names, rev)
	}
	for _, n := range names {
		for _, network := range []string{"udp", "tcp"} {
			qtype := dns.TypeA
			if n != names[0] {
				qtype = dns.TypePTR
			}
			r, err := procs.Query(addr, network, n, qtype)
			require.NoError(t, err)
			assert.Equal(t, dns.RcodeToString[dns.RcodeNameError], dns.RcodeToString[r.Rcode], "%s over %s: %v", n, network, r.Answer)
		}
	}
}

// Source EndpointSlices that no trusted manager wrote are never mirrored:
// an address someone forged next to an exported Service's real endpoints
// reaches no other member: no EndpointSlice there holds it, and the
// members' CoreDNS (the production rule, endpointslice_managers
// mcs-importer.mcs-dns.io) answers neither it nor its hostname nor its
// PTR. Each version of such a slice is counted once;
// --endpointslice-managers trusts more managers.
func TestForgedSourceSlicesIgnored(t *testing.T) {
	w := newTestbed(t)
	const ns = "trust"
	forged := []string{"10.71.0.66", "10.71.0.67", "10.71.0.68"}
	mkNamespace(t, ns, w.all...)
	mkService(t, w.west, ns, "web", true, tcpPort("http", 8080))
	putSlice(t, w.west, ns, "web", "web-real", ep{ip: "10.71.0.1", ready: true})
	forgeSlice(t, w.west, ns, "web", "web-nomanager", "", "10.71.0.66")
	forgeSlice(t, w.west, ns, "web", "web-evil", "evil.example.com", "10.71.0.67")
	mkExport(t, w.west, ns, "web")

	r := startImporter(t, baseOptions(w.kubeconfig, w.contexts...))
	want := map[string][]string{"west": {"10.71.0.1"}}
	for _, c := range []*cluster.Cluster{w.east, w.north, w.west} {
		require.Eventually(t, func() bool {
			got, err := endpointsBySource(c, ns, "web")
			return err == nil && assert.ObjectsAreEqual(want, got)
		}, waitFor, tick, "%s: only the endpointslice controller's endpoints", c.Name)
	}
	bin := procs.CoreDNSBinary(t)
	dnsIn := map[string]string{}
	for _, name := range []string{"east", "north"} {
		dnsIn[name] = procs.StartCoreDNS(t, bin, fmt.Sprintf(
			"clusterset.local in-addr.arpa {\n    mcs clusterset.local in-addr.arpa {\n        kubeconfig %s %s\n        endpointslice_managers mcs-importer.mcs-dns.io\n    }\n}\n",
			w.kubeconfig, name)).Addr
	}
	notElsewhere := func() {
		t.Helper()
		for _, c := range []*cluster.Cluster{w.east, w.north} {
			held, err := holdsAddress(c, ns, forged...)
			require.NoError(t, err)
			assert.Empty(t, held, "%s: a forged address", c.Name)
		}
	}
	for _, name := range []string{"east", "north"} {
		served(t, dnsIn[name], ns, []string{"10.71.0.1"}, forged...)
	}
	notElsewhere()
	ignored := func() map[string]float64 { return r.counters(t, "mcs_importer_ignored_objects_total") }
	require.Eventually(t, func() bool {
		return ignored()["west/EndpointSlice/no_manager"] == 1 && ignored()["west/EndpointSlice/untrusted_manager"] == 1
	}, waitFor, tick, "counted: %v", ignored())

	// A new version is counted once more, however often the key is
	// reconciled (resync every second here); the real endpoints follow.
	forgeSlice(t, w.west, ns, "web", "web-evil", "evil.example.com", "10.71.0.68")
	putSlice(t, w.west, ns, "web", "web-real", ep{ip: "10.71.0.2", ready: true})
	want = map[string][]string{"west": {"10.71.0.2"}}
	require.Eventually(t, func() bool {
		got, err := endpointsBySource(w.east, ns, "web")
		return err == nil && assert.ObjectsAreEqual(want, got)
	}, waitFor, tick)
	time.Sleep(3 * time.Second)
	assert.Equal(t, 2.0, ignored()["west/EndpointSlice/untrusted_manager"], "counted: %v", ignored())
	assert.Equal(t, 1.0, ignored()["west/EndpointSlice/no_manager"], "counted: %v", ignored())
	got, err := endpointsBySource(w.east, ns, "web")
	require.NoError(t, err)
	assert.Equal(t, want, got, "never mirrored")
	for _, name := range []string{"east", "north"} {
		served(t, dnsIn[name], ns, []string{"10.71.0.2"}, forged...)
	}
	notElsewhere()
	r.stop()

	// Trusted by flag: its endpoints are mirrored too.
	o := baseOptions(w.kubeconfig, w.contexts...)
	o.EndpointSliceManagers = []string{"endpointslice-controller.k8s.io", "evil.example.com"}
	startImporter(t, o)
	want = map[string][]string{"west": {"10.71.0.2", "10.71.0.68"}}
	require.Eventually(t, func() bool {
		got, err := endpointsBySource(w.east, ns, "web")
		return err == nil && assert.ObjectsAreEqual(want, got)
	}, waitFor, tick)
	// ... and answered: the checks above would have seen a forged one.
	procs.AnswerEventually(t, waitFor, procs.Addr(dnsIn["north"]), "web-0.west.web."+ns+".svc.clusterset.local.", dns.TypeA, func(r *dns.Msg) error {
		if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.71.0.68" {
			return fmt.Errorf("A %v", r.Answer)
		}
		return nil
	})
	procs.AnswerEventually(t, waitFor, procs.Addr(dnsIn["north"]), "68.0.71.10.in-addr.arpa.", dns.TypePTR, func(r *dns.Msg) error {
		if len(r.Answer) != 1 || r.Answer[0].(*dns.PTR).Ptr != "web-0.west.web."+ns+".svc.clusterset.local." {
			return fmt.Errorf("PTR %v", r.Answer)
		}
		return nil
	})
}

// Package e2e runs the whole system as a user does: our real binaries as
// processes (mcs-importer and one CoreDNS per cluster) against three real
// member clusters, checked over real DNS (UDP and TCP).
package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
	"github.com/mcs-dns/mcs-dns/test/stack"
)

var clusterNames = []string{"east", "west", "north"}

type system struct {
	t        *testing.T // the running (sub)test, for assertions
	root     *testing.T // the top-level test, which owns the processes
	st       *stack.Stack
	set      *cluster.Set
	importer *procs.Process
	dns      map[string]*stack.CoreDNS
}

func start(t *testing.T) *system {
	specs := make([]cluster.Spec, len(clusterNames))
	for i, n := range clusterNames {
		specs[i] = cluster.Spec{Name: n, ClusterID: n + ".clusters.example"} // multi-label IDs
	}
	st := stack.StartT(t, stack.Config{Members: specs})
	s := &system{t: t, root: t, st: st, set: st.Set, dns: map[string]*stack.CoreDNS{}}
	s.startImporter()
	for _, n := range clusterNames {
		s.startCoreDNS(n)
	}
	return s
}

func (s *system) startImporter() {
	metrics, err := stack.FreeAddr()
	require.NoError(s.root, err)
	s.importer, err = s.st.StartImporter(s.st.ImporterArgs(metrics))
	require.NoError(s.root, err)
}

func (s *system) startCoreDNS(name string) {
	c, err := s.st.StartCoreDNS(name, stack.CoreDNSOptions{PortFlag: true, Ready: stack.Answering(50*time.Millisecond, 60*time.Second)})
	if err != nil && c != nil {
		s.root.Fatalf("%v\n%s", err, c.Output())
	}
	require.NoError(s.root, err)
	s.dns[name] = c
}

func (s *system) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	s.t.Cleanup(cancel)
	return ctx
}

type pod struct {
	host, ip string
	ready    bool
}

// export creates namespace ns (if needed), a Service with one EndpointSlice
// of pods, and its ServiceExport, in cluster c.
func (s *system) export(c, ns, name string, headless bool, pods ...pod) {
	cl := s.set.Get(c)
	ctx := s.ctx()
	// Namespace sameness: the namespace exists in every member cluster
	// (the importer creates imports only where it does).
	for _, other := range s.set.Clusters {
		_, _ = other.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	}
	spec := corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
		{Name: "metrics", Port: 9090, Protocol: corev1.ProtocolTCP},
	}}
	if headless {
		spec.ClusterIP = corev1.ClusterIPNone
	}
	_, err := cl.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	require.NoError(s.t, err)
	s.setPods(c, ns, name, pods...)
	_, err = cl.MCS.MulticlusterV1beta1().ServiceExports(ns).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(s.t, err)
}

// setPods creates or replaces the service's one EndpointSlice in cluster c.
func (s *system) setPods(c, ns, name string, pods ...pod) {
	cl := s.set.Get(c)
	ctx := s.ctx()
	slice := &discoveryv1.EndpointSlice{
		// As the endpointslice controller would make it: the importer
		// mirrors only the managers it trusts.
		ObjectMeta: metav1.ObjectMeta{Name: name + "-slice", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Port: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolTCP)},
			{Name: ptr.To("metrics"), Port: ptr.To[int32](9090), Protocol: ptr.To(corev1.ProtocolTCP)},
		},
	}
	for _, p := range pods {
		ep := discoveryv1.Endpoint{Addresses: []string{p.ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(p.ready)}}
		if p.host != "" {
			ep.Hostname = ptr.To(p.host)
		}
		slice.Endpoints = append(slice.Endpoints, ep)
	}
	api := cl.Kube.DiscoveryV1().EndpointSlices(ns)
	existing, err := api.Get(ctx, slice.Name, metav1.GetOptions{})
	if err == nil {
		slice.ResourceVersion = existing.ResourceVersion
		_, err = api.Update(ctx, slice, metav1.UpdateOptions{})
	} else {
		_, err = api.Create(ctx, slice, metav1.CreateOptions{})
	}
	require.NoError(s.t, err)
}

// answers returns the rcode and the sorted answer records (as strings
// without owner and TTL) of one query.
// render gives a reply's answers as sorted "TYPE rdata" lines.
func render(r *dns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		if srv, ok := rr.(*dns.SRV); ok {
			// Priority and weight are the plugin's choice; port and target are the spec's.
			out = append(out, fmt.Sprintf("SRV %d %s", srv.Port, strings.ToLower(srv.Target)))
			continue
		}
		f := strings.SplitN(rr.String(), "\t", 5)
		out = append(out, dns.TypeToString[rr.Header().Rrtype]+" "+strings.ToLower(f[len(f)-1]))
	}
	sort.Strings(out)
	return out
}

// expect waits until every cluster's CoreDNS gives rcode and exactly want
// over both UDP and TCP.
func (s *system) expect(name string, qtype uint16, rcode int, want ...string) {
	s.t.Helper()
	s.expectIn("", name, qtype, rcode, want...)
}

// expectIn is expect for one cluster's CoreDNS ("" = every cluster's).
func (s *system) expectIn(only, name string, qtype uint16, rcode int, want ...string) {
	s.t.Helper()
	sort.Strings(want)
	for _, c := range clusterNames {
		if only != "" && c != only {
			continue
		}
		procs.AnswerEventually(s.t, 60*time.Second, procs.Addr(s.dns[c].Addr), name, qtype, func(r *dns.Msg) error {
			got := render(r)
			if r.Rcode != rcode || !slices.Equal(got, want) {
				return fmt.Errorf("%s's CoreDNS: rcode=%s answers=%v; want rcode=%s answers=%v",
					c, dns.RcodeToString[r.Rcode], got, dns.RcodeToString[rcode], want)
			}
			return nil
		})
	}
}

// run runs f as a subtest whose failures belong to that subtest.
func (s *system) run(name string, f func()) {
	parent := s.t
	parent.Run(name, func(t *testing.T) {
		s.t = t
		defer func() { s.t = parent }()
		f()
	})
}

func waitUntil(timeout time.Duration, f func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if f() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return f()
}

const zone = ".svc.clusterset.local."

func TestEndToEnd(t *testing.T) {
	s := start(t)
	s.export("east", "shop", "db", true, pod{"db-0", "10.1.0.1", true}, pod{"db-1", "10.1.0.2", true})
	s.export("west", "shop", "db", true, pod{"db-0", "10.2.0.1", true}, pod{"", "10.2.0.9", false})
	s.export("east", "shop", "web", false, pod{"", "10.1.1.1", true})

	const east, west = "east.clusters.example", "west.clusters.example"
	s.run("headless", func() {
		s.expect("db.shop"+zone, dns.TypeA, dns.RcodeSuccess, "A 10.1.0.1", "A 10.1.0.2", "A 10.2.0.1")
		s.expect("db-1."+east+".db.shop"+zone, dns.TypeA, dns.RcodeSuccess, "A 10.1.0.2")
		s.expect("db-0."+west+".db.shop"+zone, dns.TypeA, dns.RcodeSuccess, "A 10.2.0.1")
		s.expect("_http._tcp.db.shop"+zone, dns.TypeSRV, dns.RcodeSuccess,
			"SRV 80 db-0."+east+".db.shop"+zone, "SRV 80 db-1."+east+".db.shop"+zone,
			"SRV 80 db-0."+west+".db.shop"+zone)
		s.expect("1.0.1.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, "PTR db-0."+east+".db.shop"+zone)
		// An unready endpoint is not served, by any name.
		s.expect("10-2-0-9."+west+".db.shop"+zone, dns.TypeA, dns.RcodeNameError)
		// <clusterid>.<svc>... never carries records; here it is an empty non-terminal.
		s.expect(east+".db.shop"+zone, dns.TypeA, dns.RcodeSuccess)
	})
	s.run("clustersetip", func() {
		// --vip-mode=derived-service (the default): each cluster answers
		// with the ClusterIP of its own derived Service.
		for _, c := range clusterNames {
			svc, err := s.set.Get(c).Kube.CoreV1().Services("shop").Get(s.ctx(), vip.DerivedName("shop", "web"), metav1.GetOptions{})
			if !waitUntil(60*time.Second, func() bool {
				svc, err = s.set.Get(c).Kube.CoreV1().Services("shop").Get(s.ctx(), vip.DerivedName("shop", "web"), metav1.GetOptions{})
				return err == nil
			}) {
				s.t.Fatalf("%s: no derived Service: %v", c, err)
			}
			s.expectIn(c, "web.shop"+zone, dns.TypeA, dns.RcodeSuccess, "A "+svc.Spec.ClusterIP)
			s.expectIn(c, "_http._tcp.web.shop"+zone, dns.TypeSRV, dns.RcodeSuccess, "SRV 80 web.shop"+zone)
			rev, _ := dns.ReverseAddr(svc.Spec.ClusterIP)
			s.expectIn(c, rev, dns.TypePTR, dns.RcodeSuccess, "PTR web.shop"+zone)
		}
		// No per-endpoint names for ClusterSetIP services; other types NODATA.
		s.expect("10-1-1-1."+east+".web.shop"+zone, dns.TypeA, dns.RcodeNameError)
		s.expect("web.shop"+zone, dns.TypeMX, dns.RcodeSuccess)
	})
	s.run("negative", func() {
		s.expect("nope.shop"+zone, dns.TypeA, dns.RcodeNameError)
		s.expect("dns-version.clusterset.local.", dns.TypeTXT, dns.RcodeSuccess, `TXT "1.0.0"`)
	})

	s.run("endpoint changes", func() {
		s.setPods("west", "shop", "db", pod{"db-0", "10.2.0.1", false}, pod{"", "10.2.0.9", true})
		s.expect("db.shop"+zone, dns.TypeA, dns.RcodeSuccess, "A 10.1.0.1", "A 10.1.0.2", "A 10.2.0.9")
		s.expect("10-2-0-9."+west+".db.shop"+zone, dns.TypeA, dns.RcodeSuccess, "A 10.2.0.9")
	})
	s.run("unexport one cluster", func() {
		require.NoError(s.t, s.set.Get("west").MCS.MulticlusterV1beta1().ServiceExports("shop").Delete(s.ctx(), "db", metav1.DeleteOptions{}))
		s.expect("db.shop"+zone, dns.TypeA, dns.RcodeSuccess, "A 10.1.0.1", "A 10.1.0.2")
	})
	s.run("importer restart", func() {
		require.NoError(s.t, s.importer.Stop())
		s.setPods("east", "shop", "db", pod{"db-0", "10.1.0.1", true})
		s.startImporter()
		s.expect("db.shop"+zone, dns.TypeA, dns.RcodeSuccess, "A 10.1.0.1")
	})
	s.run("coredns restart", func() {
		require.NoError(s.t, s.dns["north"].Stop())
		s.startCoreDNS("north")
		s.expect("db.shop"+zone, dns.TypeA, dns.RcodeSuccess, "A 10.1.0.1")
	})
	s.run("namespace deleted in one cluster", func() {
		s.export("east", "gone", "cart", true, pod{"c-0", "10.1.5.1", true})
		s.expect("cart.gone"+zone, dns.TypeA, dns.RcodeSuccess, "A 10.1.5.1")
		require.NoError(s.t, s.set.Get("north").Kube.CoreV1().Namespaces().Delete(s.ctx(), "gone", metav1.DeleteOptions{}))
		// The import leaves north (no namespace, no import); the others keep it.
		s.expectIn("north", "cart.gone"+zone, dns.TypeA, dns.RcodeNameError)
		s.expectIn("west", "cart.gone"+zone, dns.TypeA, dns.RcodeSuccess, "A 10.1.5.1")
	})
	s.run("unexport everywhere", func() {
		require.NoError(s.t, s.set.Get("east").MCS.MulticlusterV1beta1().ServiceExports("shop").Delete(s.ctx(), "db", metav1.DeleteOptions{}))
		s.expect("db.shop"+zone, dns.TypeA, dns.RcodeNameError)
	})
}

// TestPropagation measures how long a change in one cluster takes to reach
// another cluster's DNS answers, over 50 changes. It logs p50/p99; targets
// are reported by `make bench`, never asserted here.
func TestPropagation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real API servers")
	}
	s := start(t)
	s.export("east", "prop", "svc", true, pod{"p", "10.9.0.1", true})
	s.expect("svc.prop"+zone, dns.TypeA, dns.RcodeSuccess, "A 10.9.0.1")
	north := s.dns["north"].Addr
	var took []time.Duration
	for i := range 50 {
		ip := fmt.Sprintf("10.9.%d.%d", 1+i/200, 2+i%200)
		start := time.Now()
		s.setPods("east", "prop", "svc", pod{"p", ip, true})
		ok := waitUntil(30*time.Second, func() bool {
			r, err := procs.Query(north, "udp", "svc.prop"+zone, dns.TypeA)
			return err == nil && slices.Equal(render(r), []string{"A " + ip})
		})
		require.True(t, ok, "change %d (%s) never reached north", i, ip)
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	p := func(q float64) time.Duration { return took[int(q*float64(len(took)-1))] }
	t.Logf("propagation east -> north over %d changes: p50=%s p99=%s max=%s", len(took), p(0.5), p(0.99), took[len(took)-1])
}

package soak

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
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

	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

// Sizes of the hostile objects.
const (
	hugePorts     = 1000
	hugeSlices    = 50
	hugePerSlice  = 100 // 5,000 ready endpoints
	hugeChurnRate = 10  // rewrites of one of big's slices per second
)

// TestHugeObjects serves, from a real API server, an import with 1,000
// ports, a headless import with 5,000 ready endpoints in 50 slices
// (hostnames of 63 characters, duplicate addresses across slices) and
// slices a conforming writer could not produce (cluster IDs that are no
// DNS names, an endpoint without addresses); churns the big import while
// a small unrelated one changes, and measures how long each change of the
// small one takes to be served (reported, not asserted: behaviour is
// asserted, timing is measured).
func TestHugeObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and CoreDNS")
	}
	bin := procs.CoreDNSBinary(t)
	set := cluster.Start(t, cluster.Spec{Name: "east", ClusterID: "east"})
	c := set.Clusters[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	si := c.MCS.MulticlusterV1beta1().ServiceImports(ns)
	eps := c.Kube.DiscoveryV1().EndpointSlices(ns)

	var ports []mcsv1beta1.ServicePort
	for i := range hugePorts {
		ports = append(ports, mcsv1beta1.ServicePort{Name: fmt.Sprintf("p%d", i), Protocol: corev1.ProtocolTCP, Port: int32(1000 + i)})
	}
	_, err = si.Create(ctx, &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "ports"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.250.1.1"}, Ports: ports}}, metav1.CreateOptions{})
	require.NoError(t, err)

	mkHeadless := func(name string) {
		imp, err := si.Create(ctx, &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}},
			metav1.CreateOptions{})
		require.NoError(t, err)
		imp.Status.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
		_, err = si.UpdateStatus(ctx, imp, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	mkHeadless("big")
	mkHeadless("probe")
	host := func(i int) string { return fmt.Sprintf("%s%05d", strings.Repeat("h", 58), i) } // 63 characters
	bigSlice := func(s, version int) *discoveryv1.EndpointSlice {
		sl := slice(fmt.Sprintf("big-%d", s), "big", "east", nil, false)
		for j := range hugePerSlice {
			i := s*hugePerSlice + j
			ip := fmt.Sprintf("10.%d.%d.%d", 20+version%10, i/250, 1+i%250)
			if j == 0 && s > 0 {
				ip = fmt.Sprintf("10.%d.0.1", 20+version%10) // the same address as big-0's first endpoint
			}
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Hostname: ptr.To(host(i)),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
		return sl
	}
	for s := range hugeSlices {
		_, err := eps.Create(ctx, bigSlice(s, 0), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// Cluster IDs no conforming writer produces: a valid label value that
	// is no DNS name (the API takes it; the plugin skips the slice and
	// counts it) and one the API refuses.
	// (For probe, whose answer is checked to be its one good address.)
	_, err = eps.Create(ctx, slice("probe-bad-id", "probe", "Not_A_DNS_Name", []string{"10.66.0.1"}, false), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = eps.Create(ctx, slice("big-bad-dash", "big", "-leading-dash", []string{"10.66.0.2"}, false), metav1.CreateOptions{})
	require.Error(t, err, "the API takes a label value with a leading dash")
	_, err = eps.Create(ctx, slice("probe-east", "probe", "east", []string{"10.77.0.1"}, false), metav1.CreateOptions{})
	require.NoError(t, err)

	metricsAddr := "127.0.0.1:" + strconv.Itoa(procs.FreePort(t))
	srv := procs.StartCoreDNS(t, bin, fmt.Sprintf(`clusterset.local {
    prometheus %s
    mcs {
        kubeconfig %s east
    }
}
`, metricsAddr, set.Kubeconfig))
	procs.AnswerEventually(t, 60*time.Second, procs.Addr(srv.Addr), "probe."+ns+".svc.clusterset.local", dns.TypeA, func(r *dns.Msg) error {
		if len(r.Answer) != 1 {
			return fmt.Errorf("rcode %s, %d answers", dns.RcodeToString[r.Rcode], len(r.Answer))
		}
		return nil
	})

	// Correct answers from the big objects.
	bigName := "big." + ns + ".svc.clusterset.local."
	tcp := &dns.Client{Net: "tcp", Timeout: 10 * time.Second}
	q := new(dns.Msg)
	q.SetQuestion(bigName, dns.TypeA)
	r, _, err := tcp.Exchange(q, srv.Addr)
	require.NoError(t, err)
	require.Equal(t, dns.RcodeSuccess, r.Rcode)
	t.Logf("big A over TCP: %d records (%d distinct ready addresses exist), truncated %v", len(r.Answer), hugeSlices*hugePerSlice-(hugeSlices-1), r.Truncated)
	assert.NotEmpty(t, r.Answer)
	q.SetQuestion(host(4321)+".east."+bigName, dns.TypeA)
	r, _, err = tcp.Exchange(q, srv.Addr)
	require.NoError(t, err)
	assert.Len(t, r.Answer, 1, "a 63-character hostname's per-endpoint name")
	q.SetQuestion("_p999._tcp.ports."+ns+".svc.clusterset.local.", dns.TypeSRV)
	r, _, err = tcp.Exchange(q, srv.Addr)
	require.NoError(t, err)
	if assert.Len(t, r.Answer, 1, "the 1,000th port's SRV") {
		assert.Equal(t, uint16(1999), r.Answer[0].(*dns.SRV).Port)
	}
	q.SetQuestion("ports."+ns+".svc.clusterset.local.", dns.TypeSRV)
	r, _, err = tcp.Exchange(q, srv.Addr)
	require.NoError(t, err)
	assert.Equal(t, dns.RcodeSuccess, r.Rcode)
	t.Logf("ports SRV over TCP: %d records, truncated %v", len(r.Answer), r.Truncated)
	rejected := metricLines(scrape(t, metricsAddr), `coredns_mcs_rejected_objects_total{kind="endpointslice"}`)
	t.Logf("rejected: %v", rejected)
	assert.Equal(t, []string{`coredns_mcs_rejected_objects_total{kind="endpointslice"} 1`}, rejected, "the slice whose cluster ID is no DNS name")

	// Churn big while probe changes; time each probe change.
	stop := make(chan struct{})
	churned := make(chan int)
	go func() {
		n := 0
		defer func() { churned <- n }()
		tick := time.NewTicker(time.Second / hugeChurnRate)
		defer tick.Stop()
		for v := 1; ; v++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := eps.Update(ctx, bigSlice(v%hugeSlices, v), metav1.UpdateOptions{}); err == nil {
				n++
			}
		}
	}()
	var lat []time.Duration
	udp := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	for i := 1; i <= 20; i++ {
		want := fmt.Sprintf("10.77.%d.%d", i/250, 1+i%250)
		written := time.Now()
		_, err := eps.Update(ctx, slice("probe-east", "probe", "east", []string{want}, false), metav1.UpdateOptions{})
		require.NoError(t, err)
		q := new(dns.Msg)
		q.SetQuestion("probe."+ns+".svc.clusterset.local.", dns.TypeA)
		for {
			r, _, err := udp.Exchange(q, srv.Addr)
			if err == nil && len(r.Answer) == 1 && r.Answer[0].(*dns.A).A.String() == want {
				lat = append(lat, time.Since(written))
				break
			}
			require.Less(t, time.Since(written), 30*time.Second, "probe change %d not served", i)
			time.Sleep(2 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	n := <-churned
	slices.Sort(lat)
	t.Logf("while %d rewrites of big's 100-endpoint slices were applied, an unrelated import's change was served after: p50 %v, p90 %v, max %v (%d changes)",
		n, lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*9/10].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), len(lat))
	t.Logf("programming latency histogram: %v", append(metricLines(scrape(t, metricsAddr), "coredns_mcs_programming_duration_seconds_sum"), metricLines(scrape(t, metricsAddr), "coredns_mcs_programming_duration_seconds_count")...))
	require.False(t, srv.Exited(), srv.Output())
}

func scrape(t *testing.T, addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// metricLines returns the sample lines of all that start with prefix.
func metricLines(all, prefix string) []string {
	var out []string
	for _, l := range strings.Split(all, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

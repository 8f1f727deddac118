package importer_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/netcut"
)

const (
	waitFor = 60 * time.Second
	tick    = 100 * time.Millisecond
)

func testLogger() *slog.Logger {
	if os.Getenv("MCS_IMPORTER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// running is an in-process importer.
type running struct {
	reg  *prometheus.Registry
	addr string
	stop func()
}

// startImporter runs importer.Run in-process until stop (or the test's
// end) and waits until its caches have synced.
func startImporter(t *testing.T, o importer.Options) *running {
	t.Helper()
	o.Log = testLogger()
	r := &running{reg: prometheus.NewRegistry()}
	o.Registry = r.reg
	ready := make(chan string, 1)
	o.OnReady = func(addr string) { ready <- addr }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- importer.Run(ctx, o) }()
	select {
	case r.addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("importer did not start: %v", err)
	case <-time.After(waitFor):
		cancel()
		t.Fatal("importer did not become ready")
	}
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				assert.NoError(t, err, "Run returns nil on a clean shutdown")
			case <-time.After(30 * time.Second):
				t.Error("importer did not stop within 30s of its context being cancelled")
			}
		})
	}
	t.Cleanup(r.stop)
	return r
}

func baseOptions(kubeconfig string, contexts ...string) importer.Options {
	o := importer.DefaultOptions()
	o.Kubeconfig = kubeconfig
	o.Contexts = contexts
	o.MetricsAddr = "127.0.0.1:0"
	o.Resync = time.Second
	o.ProbeInterval = 200 * time.Millisecond
	o.EndpointGracePeriod = 3 * time.Second
	// The import mechanics are tested without VIPs; vip_test.go tests the
	// VIP models (derived-service is the default).
	o.VIPMode = importer.VIPModeNone
	return o
}

// writes returns mcs_importer_writes_total by "cluster/kind/verb".
func (r *running) writes(t *testing.T) map[string]float64 {
	t.Helper()
	return r.counters(t, "mcs_importer_writes_total")
}

// conflicts returns mcs_importer_write_conflicts_total by "cluster/kind".
func (r *running) conflicts(t *testing.T) map[string]float64 {
	t.Helper()
	return r.counters(t, "mcs_importer_write_conflicts_total")
}

// counters returns the counter family name, keyed by its label values
// joined with "/".
func (r *running) counters(t *testing.T, name string) map[string]float64 {
	t.Helper()
	return r.family(t, name, func(m *dto.Metric) float64 { return m.GetCounter().GetValue() })
}

// histogramCounts returns the sample counts of histogram family name,
// keyed as counters keys them.
func (r *running) histogramCounts(t *testing.T, name string) map[string]float64 {
	t.Helper()
	return r.family(t, name, func(m *dto.Metric) float64 { return float64(m.GetHistogram().GetSampleCount()) })
}

// family returns value of each metric of family name, keyed by its label
// values joined with "/".
func (r *running) family(t *testing.T, name string, value func(*dto.Metric) float64) map[string]float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var l []string
			for _, lp := range m.GetLabel() {
				l = append(l, lp.GetValue())
			}
			out[strings.Join(l, "/")] = value(m)
		}
	}
	return out
}

func total(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

func diff(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// quiesce waits until the importer has made no write for a while (at
// least two resyncs), and returns its write counts.
func (r *running) quiesce(t *testing.T, quiet time.Duration) map[string]float64 {
	t.Helper()
	last := r.writes(t)
	since := time.Now()
	deadline := time.Now().Add(waitFor)
	for time.Now().Before(deadline) {
		time.Sleep(tick)
		now := r.writes(t)
		if total(now) != total(last) {
			last, since = now, time.Now()
			continue
		}
		if time.Since(since) >= quiet {
			return now
		}
	}
	t.Fatalf("importer kept writing: %v", last)
	return nil
}

// proxy is a TCP proxy in front of a member's API server (test/netcut), so
// a test can make the API unreachable and bring it back at the same address.
type proxy struct{ *netcut.Proxy }

func startProxy(t *testing.T, target string) *proxy {
	p, err := netcut.Start(target)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return &proxy{p}
}

// pause closes the listener and every connection: the API is unreachable.
func (p *proxy) pause() { p.Cut() }

// resume listens again at the same address. It may be called from any
// goroutine, so it reports failure with t.Error.
func (p *proxy) resume(t *testing.T) {
	if err := p.Resume(); err != nil {
		t.Error(err)
	}
}

// kubeconfigVia writes a copy of set's kubeconfig where the named
// clusters are reached through the given proxies, plus extra contexts
// (name -> existing context whose cluster and user they reuse).
func kubeconfigVia(t *testing.T, set *cluster.Set, proxies map[string]*proxy, extra map[string]string) string {
	kc, err := clientcmd.LoadFromFile(set.Kubeconfig)
	require.NoError(t, err)
	for name, p := range proxies {
		kc.Clusters[name].Server = "https://" + p.Addr()
	}
	for name, base := range extra {
		c := *kc.Contexts[base]
		kc.Contexts[name] = &c
	}
	path := t.TempDir() + "/kubeconfig"
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path
}

// --- objects ---

func bg() context.Context { return context.Background() }

func mkNamespace(t *testing.T, ns string, cs ...*cluster.Cluster) {
	t.Helper()
	for _, c := range cs {
		_, err := c.Kube.CoreV1().Namespaces().Create(bg(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
}

func tcpPort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, Protocol: corev1.ProtocolTCP}
}

func mkService(t *testing.T, c *cluster.Cluster, ns, name string, headless bool, ports ...corev1.ServicePort) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: ports, Selector: map[string]string{"app": name}},
	}
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	out, err := c.Kube.CoreV1().Services(ns).Create(bg(), svc, metav1.CreateOptions{})
	require.NoError(t, err)
	return out
}

// ep is a test endpoint: an IPv4 address, its readiness, its hostname.
type ep struct {
	ip       string
	ready    bool
	hostname string
}

func endpoints(eps []ep) []discoveryv1.Endpoint {
	out := []discoveryv1.Endpoint{}
	for _, e := range eps {
		x := discoveryv1.Endpoint{
			Addresses:  []string{e.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(e.ready), Serving: ptr.To(e.ready), Terminating: ptr.To(false)},
			NodeName:   ptr.To("node-1"),
		}
		if e.hostname != "" {
			x.Hostname = ptr.To(e.hostname)
		}
		out = append(out, x)
	}
	return out
}

// putSlice creates or replaces a source EndpointSlice of Service svc.
func putSlice(t *testing.T, c *cluster.Cluster, ns, svc, name string, eps ...ep) {
	t.Helper()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   endpoints(eps),
	}
	cl := c.Kube.DiscoveryV1().EndpointSlices(ns)
	cur, err := cl.Get(bg(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cl.Create(bg(), s, metav1.CreateOptions{})
		require.NoError(t, err)
		return
	}
	require.NoError(t, err)
	s.ResourceVersion = cur.ResourceVersion
	_, err = cl.Update(bg(), s, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func mkExport(t *testing.T, c *cluster.Cluster, ns, name string, mutate ...func(*mcsv1beta1.ServiceExport)) {
	t.Helper()
	e := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, f := range mutate {
		f(e)
	}
	_, err := c.MCS.MulticlusterV1beta1().ServiceExports(ns).Create(bg(), e, metav1.CreateOptions{})
	require.NoError(t, err)
}

func rmExport(t *testing.T, c *cluster.Cluster, ns, name string) {
	t.Helper()
	require.NoError(t, c.MCS.MulticlusterV1beta1().ServiceExports(ns).Delete(bg(), name, metav1.DeleteOptions{}))
}

func getImport(c *cluster.Cluster, ns, name string) (*mcsv1beta1.ServiceImport, error) {
	return c.MCS.MulticlusterV1beta1().ServiceImports(ns).Get(bg(), name, metav1.GetOptions{})
}

func getExport(c *cluster.Cluster, ns, name string) (*mcsv1beta1.ServiceExport, error) {
	return c.MCS.MulticlusterV1beta1().ServiceExports(ns).Get(bg(), name, metav1.GetOptions{})
}

// mirrored lists the MCS EndpointSlices of svc in c (what the DNS plugin reads).
func mirrored(c *cluster.Cluster, ns, svc string) ([]discoveryv1.EndpointSlice, error) {
	l, err := c.Kube.DiscoveryV1().EndpointSlices(ns).List(bg(), metav1.ListOptions{LabelSelector: mcsapi.LabelServiceName + "=" + svc})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// endpointsBySource returns "sourceCluster -> sorted ready/unready IPs" of
// the mirrored slices of svc in c, e.g. {"east": ["10.0.0.1", "10.0.0.2(unready)"]}.
func endpointsBySource(c *cluster.Cluster, ns, svc string) (map[string][]string, error) {
	items, err := mirrored(c, ns, svc)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, s := range items {
		src := s.Labels[mcsapi.LabelSourceCluster]
		if _, ok := out[src]; !ok {
			out[src] = []string{}
		}
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				if e.Conditions.Ready == nil || !*e.Conditions.Ready {
					a += "(unready)"
				}
				out[src] = append(out[src], a)
			}
		}
		sort.Strings(out[src])
	}
	return out, nil
}

func condition(conds []metav1.Condition, typ string) string {
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s/%s", c.Status, c.Reason)
}

func exportConditions(c *cluster.Cluster, ns, name string) (valid, ready, conflict string, err error) {
	e, err := getExport(c, ns, name)
	if err != nil {
		return "", "", "", err
	}
	return condition(e.Status.Conditions, "Valid"), condition(e.Status.Conditions, "Ready"), condition(e.Status.Conditions, "Conflict"), nil
}

func ips(n int, base string) []ep {
	out := make([]ep, n)
	for i := range out {
		out[i] = ep{ip: fmt.Sprintf("%s.%d", base, i+1), ready: true}
	}
	return out
}

func clusterIDs(si *mcsv1beta1.ServiceImport) []string {
	var out []string
	for _, c := range si.Status.Clusters {
		out = append(out, c.Cluster)
	}
	return out
}

// Package monitoring_test proves deploy/monitoring: the alerting and
// recording rules parse and validate with Prometheus's own rule parser,
// every alert has a runbook, and every metric the rules and the Grafana
// dashboard query is exported by our real binaries (mcs-importer and our
// CoreDNS with the mcs and prometheus plugins, against real API servers).
package monitoring_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

var promql = parser.NewParser(parser.Options{})

func loadRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.ParseFile("rules.yaml", false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	require.Empty(t, errs, "rules.yaml")
	require.NotEmpty(t, groups.Groups)
	return groups
}

// synthesized are the series Prometheus itself writes for every scrape
// target, which no program exports: the only names allowed in queries
// without being exported. A selector of one must name its scrape job.
var synthesized = map[string]bool{"up": true}

// metricNames returns the metric names expr selects.
func metricNames(t *testing.T, expr string) []string {
	t.Helper()
	e, err := promql.ParseExpr(expr)
	require.NoError(t, err, "%s", expr)
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		require.NotEmpty(t, name, "a selector without a metric name in %s", expr)
		if synthesized[name] {
			require.True(t, slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool {
				return m.Name == model.JobLabel && m.Type == labels.MatchEqual && m.Value != ""
			}), "%s is every scrape target's: select one job in %s", name, expr)
		}
		names = append(names, name)
		return nil
	})
	require.NotEmpty(t, names, "%s selects nothing", expr)
	return names
}

// grafanaVars are the dashboard's interval variables, replaced by a
// duration so that its expressions parse as PromQL.
var grafanaVars = regexp.MustCompile(`\$__(rate_interval|interval|range)\b`)

// dashboardExprs returns every target expression of the dashboard's panels
// (and of panels nested in rows), by panel title.
func dashboardExprs(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile("dashboard.json")
	require.NoError(t, err)
	type panel struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dash struct {
		Panels []json.RawMessage `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	out := map[string][]string{}
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, r := range ps {
			var p panel
			require.NoError(t, json.Unmarshal(r, &p))
			if p.Type != "row" {
				require.NotEmpty(t, p.Targets, "panel %q queries nothing", p.Title)
			}
			for _, tg := range p.Targets {
				require.NotEmpty(t, tg.Expr, "panel %q", p.Title)
				out[p.Title] = append(out[p.Title], grafanaVars.ReplaceAllString(tg.Expr, "5m"))
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	require.NotEmpty(t, out)
	return out
}

// Every alert has a runbook: a heading of its name in README.md, which its
// runbook_url points at.
func TestRunbooks(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	headings := map[string]bool{}
	for line := range strings.SplitSeq(string(readme), "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			headings[strings.TrimSpace(h)] = true
		}
	}
	n := 0
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			assert.True(t, headings[r.Alert], "alert %s has no runbook (### %s in README.md)", r.Alert, r.Alert)
			assert.Equal(t, "deploy/monitoring/README.md#"+strings.ToLower(r.Alert), r.Annotations["runbook_url"], "alert %s", r.Alert)
			assert.NotEmpty(t, r.Labels["severity"], "alert %s", r.Alert)
			assert.NotEmpty(t, r.Annotations["summary"], "alert %s", r.Alert)
		}
	}
	assert.Positive(t, n)
}

// scrape returns the names of the samples the /metrics at addr exports
// (histograms as their _bucket, _sum and _count series) and their values.
func scrape(addr string) (map[string][]*dto.Metric, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("%s: %s: %s", addr, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string][]*dto.Metric{}
	for name, f := range fams {
		if len(f.Metric) == 0 {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[name+s] = f.Metric
			}
		case dto.MetricType_SUMMARY:
			for _, s := range []string{"", "_sum", "_count"} {
				out[name+s] = f.Metric
			}
		default:
			out[name] = f.Metric
		}
	}
	return out, nil
}

// value is the value of the metric with the given labels (0 if none).
func value(ms []*dto.Metric, lbls ...string) float64 {
	for _, m := range ms {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(lbls); i += 2 {
			match = match && have[lbls[i]] == lbls[i+1]
		}
		if match {
			return m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return 0
}

// Every metric the rules and the dashboard query is one the running
// programs export. The test drives the events that give each metric
// vector its first sample (client_golang exports a vector only once it
// has one): two members export one Service with conflicting ports, an
// admission policy fails the importer's writes of one name, a malformed
// ServiceImport and a foreign EndpointSlice reach CoreDNS, and at last one
// member's API server stops, so that it is withdrawn and CoreDNS's watches
// fail.
func TestMetricsExported(t *testing.T) {
	want := map[string][]string{} // metric -> where it is queried
	records := map[string]bool{}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				records[r.Record] = true
			}
			for _, n := range metricNames(t, r.Expr) {
				want[n] = append(want[n], "rule "+r.Alert+r.Record)
			}
		}
	}
	for title, exprs := range dashboardExprs(t) {
		for _, e := range exprs {
			for _, n := range metricNames(t, e) {
				want[n] = append(want[n], "panel "+strconv.Quote(title))
			}
		}
	}

	bins := procs.Build(t)
	set := cluster.Start(t, cluster.Spec{Name: "east", ClusterID: "east"}, cluster.Spec{Name: "west", ClusterID: "west"})
	east, west := set.Clusters[0], set.Clusters[1]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	for _, c := range set.Clusters {
		_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// east refuses ServiceImports named "denied": the importer's writes of
	// that import there fail.
	_, err := east.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-imports"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{mcsv1beta1.GroupName}, APIVersions: []string{"*"}, Resources: []string{"serviceimports"}},
				},
			}}},
			Validations: []admissionv1.Validation{{Expression: `object.metadata.name != "denied"`}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = east.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-imports"},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "deny-imports",
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		probe := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "denied"},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
		_, err := east.MCS.MulticlusterV1beta1().ServiceImports("shop").Create(ctx, probe, metav1.CreateOptions{})
		if err == nil {
			_ = east.MCS.MulticlusterV1beta1().ServiceImports("shop").Delete(ctx, "denied", metav1.DeleteOptions{})
		}
		return err != nil
	}, time.Minute, 200*time.Millisecond, "the admission policy never acted")

	export := func(c *cluster.Cluster, name string, port int32) {
		t.Helper()
		_, err := c.Kube.CoreV1().Services("shop").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: port, Protocol: corev1.ProtocolTCP}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = c.MCS.MulticlusterV1beta1().ServiceExports("shop").Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	export(east, "cart", 80)
	export(west, "cart", 8080) // a PortConflict
	export(west, "denied", 80)
	// What CoreDNS skips: a ServiceImport with a malformed VIP, and a slice
	// of an import that no trusted manager wrote.
	_, err = west.MCS.MulticlusterV1beta1().ServiceImports("shop").Create(ctx, &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "bogus"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"not-an-ip"},
			Ports: []mcsv1beta1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = west.Kube.DiscoveryV1().EndpointSlices("shop").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "cart-foreign", Labels: map[string]string{
			mcsapi.LabelServiceName: "cart", mcsapi.LabelSourceCluster: "west", discoveryv1.LabelManagedBy: "someone-else"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.2.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	importerAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(procs.FreePort(t)))
	imp := procs.Start(t, "mcs-importer", bins.Importer, "--kubeconfig", set.Kubeconfig, "--contexts", "east,west",
		"--metrics-addr", importerAddr, "--health-probe-interval", "200ms", "--endpoint-grace-period", "3s",
		"--leader-elect", "--leader-elect-namespace", "default")
	corednsMetrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(procs.FreePort(t)))
	srv := procs.StartCoreDNS(t, bins.CoreDNS, fmt.Sprintf(`clusterset.local {
    prometheus %s
    mcs {
        kubeconfig %s west
        endpointslice_managers mcs-importer.mcs-dns.io
    }
}
`, corednsMetrics, set.Kubeconfig))

	exported := map[string]bool{}
	var importer, coredns map[string][]*dto.Metric
	collect := func() error {
		var err error
		if importer, err = scrape(importerAddr); err != nil {
			return err
		}
		if coredns, err = scrape(corednsMetrics); err != nil {
			return err
		}
		for n := range importer {
			exported[n] = true
		}
		for n := range coredns {
			exported[n] = true
		}
		return nil
	}

	// The import answers; the conflict, the refused write and the skipped
	// objects are counted.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := procs.Query(srv.Addr, "udp", "cart.shop.svc.clusterset.local.", dns.TypeA)
		if !assert.NoError(c, err) || !assert.Len(c, r.Answer, 1) || !assert.NoError(c, collect()) {
			return
		}
		assert.Equal(c, 1.0, value(importer["mcs_importer_leader"]), "leader")
		assert.Equal(c, 1.0, value(importer["mcs_importer_conflicts"]), "conflicts")
		assert.Positive(c, value(importer["mcs_importer_errors_total"], "cluster", "east", "operation", "create ServiceImport"), "errors")
		assert.Equal(c, 1.0, value(importer["mcs_importer_member_state"], "cluster", "west", "state", "up"), "west up")
		assert.Positive(c, value(coredns["coredns_mcs_rejected_objects_total"]), "rejected")
		assert.Positive(c, value(coredns["coredns_mcs_ignored_objects_total"], "reason", "untrusted_manager"), "ignored")
	}, 2*time.Minute, 250*time.Millisecond, "importer:\n%s\ncoredns:\n%s", imp.Output(), srv.Output())

	// west goes away: the importer withdraws it after the grace period, and
	// CoreDNS, which reads west, fails its watches and says how stale it is.
	require.NoError(t, west.StopAPIServer())
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		if !assert.NoError(c, collect()) {
			return
		}
		assert.Positive(c, value(importer["mcs_importer_member_withdrawals_total"], "cluster", "west"), "withdrawals")
		assert.Equal(c, 1.0, value(importer["mcs_importer_member_state"], "cluster", "west", "state", "down"), "west down")
		assert.Positive(c, value(coredns["coredns_mcs_watch_errors_total"]), "watch errors")
		assert.Positive(c, value(coredns["coredns_mcs_last_sync_age_seconds"]), "sync age")
	}, 2*time.Minute, 250*time.Millisecond, "importer:\n%s\ncoredns:\n%s", imp.Output(), srv.Output())
	require.NoError(t, west.StartAPIServer(ctx))

	var missing []string
	for n, where := range want {
		if !exported[n] && !records[n] && !synthesized[n] {
			slices.Sort(where)
			missing = append(missing, fmt.Sprintf("%s (%s)", n, strings.Join(slices.Compact(where), ", ")))
		}
	}
	slices.Sort(missing)
	require.Empty(t, missing, "queried but exported by neither program (nor synthesized by Prometheus)")
	t.Logf("%d metrics queried, all exported; %d exported in all", len(want), len(exported))
}

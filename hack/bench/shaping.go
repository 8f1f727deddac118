package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// The shaping phase: a (options off) against a+ (the answer-shaping
// options on), same binary and data, back to back in every round; and the
// cost of big headless answers (the largest subset that fits) on a.

// BigSizes are the ready endpoints of the three big headless imports.
var BigSizes = []int{50, 500, 5000}

// bigNS holds the big imports only, so that they can be removed after the
// phase and the later phases see the fixture alone.
const bigNS = "bench-big"

func bigName(n int) string            { return fmt.Sprintf("big-%d", n) }
func bigFQDN(n int) string            { return bigName(n) + "." + bigNS + ".svc." + Zone }
func bigHostname(n, k int) string     { return fmt.Sprintf("big%d-%d", n, k) }
func bigEPFQDN(n, k int) string       { return bigHostname(n, k) + "." + clusterID(0) + "." + bigFQDN(n) }
func bigSliceName(n, part int) string { return fmt.Sprintf("%s-%s-%d", bigName(n), clusterID(0), part) }

// bigIP is endpoint k of big import i (its index in BigSizes): a /16 each,
// out of the fixture's 10.64.0.0/10.
func bigIP(i, k int) netip.Addr {
	return addrAdd(netip.MustParseAddr("10.200.0.0"), uint32(i)<<16+uint32(k+1))
}

// bigKind names the dnsperf runs of big import n's A query.
func bigKind(n int, edns bool) Kind {
	if edns {
		return Kind(fmt.Sprintf("%s-A", bigName(n)))
	}
	return Kind(fmt.Sprintf("%s-A-noedns", bigName(n)))
}

// ShapingResult is what the shaping phase measured.
type ShapingResult struct {
	NotDone string    `json:"not_done,omitempty"`
	Perf    []PerfRun `json:"perf_runs"`
	// Ratios: "a+/a <kind>" and "big-5000/big-50 A[ noedns]" -> per-round QPS ratios.
	Ratios  map[string]*RatioSum `json:"ratios"`
	Answers []BigAnswer          `json:"big_answers"`
}

// BigAnswer is one UDP answer of a big import's A query on a.
type BigAnswer struct {
	Endpoints int  `json:"endpoints"`
	EDNS      bool `json:"edns_4096"`
	Answers   int  `json:"answers"`
	Size      int  `json:"size"`
	TC        bool `json:"tc"`
}

// loadBig creates the big imports (one source cluster, SliceMax endpoints
// per slice at most, labelled as the fixture's) and returns the names whose
// answers show that every slice is served: the last endpoint of each.
func (l *Loader) loadBig(ctx context.Context, sliceMax int) ([]Query, error) {
	_, err := l.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bigNS}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	var jobs []func(context.Context) error
	var probes []Query
	for i, n := range BigSizes {
		imp := &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Name: bigName(n), Namespace: bigNS},
			Spec: mcsv1beta1.ServiceImportSpec{
				Type:  mcsv1beta1.Headless,
				Ports: []mcsv1beta1.ServicePort{{Name: portName, Protocol: corev1.ProtocolTCP, Port: hlPort}},
			},
		}
		jobs = append(jobs, func(ctx context.Context) error {
			_, err := l.MCS.MulticlusterV1beta1().ServiceImports(bigNS).Create(ctx, imp, metav1.CreateOptions{})
			return err
		})
		for part, start := 0, 0; start < n; part, start = part+1, start+sliceMax {
			end := min(start+sliceMax, n)
			sl := &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{
					Name:      bigSliceName(n, part),
					Namespace: bigNS,
					Labels: map[string]string{
						mcsapi.LabelServiceName:   bigName(n),
						mcsapi.LabelSourceCluster: clusterID(0),
						mcsapi.LabelManagedBy:     managedByMe,
					},
				},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports: []discoveryv1.EndpointPort{{
					Name: ptr.To(portName), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](hlPort),
				}},
			}
			for k := start; k < end; k++ {
				sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
					Addresses:  []string{bigIP(i, k).String()},
					Hostname:   ptr.To(bigHostname(n, k)),
					Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
				})
			}
			jobs = append(jobs, func(ctx context.Context) error {
				_, err := l.Kube.DiscoveryV1().EndpointSlices(bigNS).Create(ctx, sl, metav1.CreateOptions{})
				return err
			})
			probes = append(probes, Query{KindEPA, bigEPFQDN(n, end-1), dns.TypeA, dns.RcodeSuccess, []string{"A " + bigIP(i, end-1).String()}})
		}
	}
	return probes, runParallel(ctx, l.Workers, jobs)
}

// deleteBig removes the big imports and their slices (the namespace stays:
// without a namespace controller its deletion would never finish).
func (l *Loader) deleteBig(ctx context.Context) error {
	var errs []string
	for _, n := range BigSizes {
		if err := l.MCS.MulticlusterV1beta1().ServiceImports(bigNS).Delete(ctx, bigName(n), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err.Error())
		}
		sel := metav1.ListOptions{LabelSelector: mcsapi.LabelServiceName + "=" + bigName(n)}
		if err := l.Kube.DiscoveryV1().EndpointSlices(bigNS).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("removing the big imports: %s", strings.Join(errs, "; "))
	}
	return nil
}

// shapingPhase loads the big imports, starts a and a+, and in every round
// runs the mix, headless-A and headless-SRV on a and a+ back to back (who
// goes first alternates), then the A query of each big import on a, with
// and without EDNS0. The big imports are removed at the end.
func (b *Bench) shapingPhase(ctx context.Context, loader *Loader, s Sizes) (err error) {
	o := b.Opt
	sr := &ShapingResult{}
	b.Results.Shaping = sr
	defer func() {
		if err != nil {
			sr.NotDone = err.Error()
		}
	}()
	t0 := time.Now()
	probes, err := loader.loadBig(ctx, s.SliceMax)
	defer func() {
		if derr := loader.deleteBig(context.WithoutCancel(ctx)); derr != nil {
			b.note("%v", derr)
		}
	}()
	if err != nil {
		return fmt.Errorf("loading the big imports: %w", err)
	}
	logf("shaping: big headless imports of %v endpoints loaded in %s", BigSizes, time.Since(t0).Round(time.Millisecond))

	qdir := filepath.Join(b.Out, "run")
	files, err := WriteQueryFiles(qdir, s, o.MixLines)
	if err != nil {
		return err
	}
	bigFiles := map[int]string{}
	for _, n := range BigSizes {
		path := filepath.Join(qdir, "queries."+bigName(n)+".txt")
		if err := os.WriteFile(path, []byte(bigFQDN(n)+" A\n"), 0o644); err != nil {
			return err
		}
		bigFiles[n] = path
	}

	servers := map[string]*Server{}
	defer func() {
		for _, srv := range servers {
			b.StopServer(srv)
		}
	}()
	sample := s.Sample(10, 1)
	for _, id := range []string{"a", "a+"} {
		srv, err := b.StartServer(id, "shaping")
		if err != nil {
			return err
		}
		servers[id] = srv
		want := sample
		if id == "a" {
			want = append(slices.Clone(sample), probes...)
		}
		d, err := b.WaitAnswering(ctx, srv, want, o.StartupTimeout)
		if err != nil {
			return fmt.Errorf("server %s (%s): %w", id, srv.Label, err)
		}
		logf("shaping: server %s (%s) answering on %s after %s", id, srv.Label, srv.Addr(), d.Round(time.Millisecond))
	}

	// The size of each big answer, as a client gets it over UDP.
	for _, n := range BigSizes {
		for _, edns := range []bool{true, false} {
			m := new(dns.Msg)
			m.SetQuestion(bigFQDN(n), dns.TypeA)
			c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
			if edns {
				m.SetEdns0(4096, false)
				c.UDPSize = 4096
			}
			r, _, err := c.ExchangeContext(ctx, m, servers["a"].Addr())
			if err != nil {
				return fmt.Errorf("%s A: %w", bigFQDN(n), err)
			}
			ba := BigAnswer{Endpoints: n, EDNS: edns, Answers: len(r.Answer), TC: r.Truncated}
			r.Compress = true
			if packed, err := r.Pack(); err == nil {
				ba.Size = len(packed)
			}
			sr.Answers = append(sr.Answers, ba)
		}
	}

	// Answers of 4 KB overrun dnsperf's default socket buffer at the start
	// of a run: the queries lost then hold slots of its window of
	// outstanding queries until they time out (-t 1). A bigger buffer keeps
	// the window, so that big and small answers are driven alike.
	extra := strings.Fields(o.DNSPerfArgs)
	if !slices.Contains(extra, "-b") {
		extra = append(extra, "-b", strconv.Itoa(shapingSocketKB))
	}
	run := func(r int, id string, k Kind, file string, edns bool) {
		pr, err := runDNSPerf(ctx, qdir, strconv.Itoa(servers[id].Port), file, o.Duration, edns, extra)
		if err != nil {
			b.note("shaping: dnsperf %s on %s round %d: %v", k, id, r, err)
			return
		}
		pr.Server, pr.Kind, pr.Round = id, k, r
		sr.Perf = append(sr.Perf, pr)
		logf("shaping round %d %-17s %-2s: %8.0f qps  mean %.3f ms  p99 %.3f ms  lost %d  %v", r, k, id, pr.QPS, pr.MeanMs, pr.P99Ms, pr.Lost, pr.Rcodes)
	}
	for r := 1; r <= o.Rounds; r++ {
		for _, k := range ShapedKinds {
			ids := []string{"a", "a+"}
			if r%2 == 0 {
				ids = []string{"a+", "a"}
			}
			for _, id := range ids {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				run(r, id, k, files[k], true)
			}
		}
		for _, edns := range []bool{true, false} {
			for _, n := range BigSizes {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				run(r, "a", bigKind(n, edns), bigFiles[n], edns)
			}
		}
	}
	return nil
}

// shapingSocketKB is dnsperf's socket buffer (-b, KiB) in the shaping
// phase, unless -dnsperf-args sets one.
const shapingSocketKB = 2048

// ShapedKinds are the kinds run on a and a+.
var ShapedKinds = []Kind{KindMix, KindHLA, KindHLSRV}

// summarize computes the per-round ratios of the shaping phase.
func (sr *ShapingResult) summarize(rounds int) {
	byRound := map[string]map[int]float64{}
	for _, p := range sr.Perf {
		k := p.Server + " " + string(p.Kind)
		if byRound[k] == nil {
			byRound[k] = map[int]float64{}
		}
		byRound[k][p.Round] = p.QPS
	}
	ratio := func(x, y map[int]float64) *RatioSum {
		var rs []float64
		for round := 1; round <= rounds; round++ {
			if x[round] > 0 && y[round] > 0 {
				rs = append(rs, x[round]/y[round])
			}
		}
		if len(rs) == 0 {
			return nil
		}
		return &RatioSum{Median: median(rs), Min: slices.Min(rs), Max: slices.Max(rs), Rounds: rs}
	}
	sr.Ratios = map[string]*RatioSum{}
	for _, k := range ShapedKinds {
		if x := ratio(byRound["a+ "+string(k)], byRound["a "+string(k)]); x != nil {
			sr.Ratios["a+/a "+string(k)] = x
		}
	}
	small, big := BigSizes[0], BigSizes[len(BigSizes)-1]
	for _, edns := range []bool{true, false} {
		if x := ratio(byRound["a "+string(bigKind(big, edns))], byRound["a "+string(bigKind(small, edns))]); x != nil {
			sr.Ratios[bigRatioName(edns)] = x
		}
	}
}

func bigRatioName(edns bool) string {
	return fmt.Sprintf("%s/%s", bigKind(BigSizes[len(BigSizes)-1], edns), bigKind(BigSizes[0], edns))
}

// qps is the median QPS of server id for kind k.
func (sr *ShapingResult) qps(id string, k Kind) (float64, bool) {
	var v []float64
	for _, p := range sr.Perf {
		if p.Server == id && p.Kind == k {
			v = append(v, p.QPS)
		}
	}
	return median(v), len(v) > 0
}

// shapingTargets are the shaping phase's targets.
func (r *Results) shapingTargets(add func(what, target, measured string, ok *bool)) {
	sr := r.Shaping
	what := "mix QPS a+/a (shaping options on / off)"
	if x := sr.ratio("a+/a " + string(KindMix)); x != nil {
		add(what, ">= 0.95", x.String(), ptr.To(x.Median >= 0.95))
	} else {
		add(what, ">= 0.95", "-", nil)
	}
	what = fmt.Sprintf("headless-A QPS %d / %d endpoints (a, EDNS0 4096)", BigSizes[len(BigSizes)-1], BigSizes[0])
	if x := sr.ratio(bigRatioName(true)); x != nil {
		add(what, ">= 0.8", x.String(), ptr.To(x.Median >= 0.8))
	} else {
		add(what, ">= 0.8", "-", nil)
	}
}

func (sr *ShapingResult) ratio(name string) *RatioSum {
	if sr == nil {
		return nil
	}
	return sr.Ratios[name]
}

// shapingMarkdown is the shaping phase's section of results.md.
func (r *Results) shapingMarkdown(p func(string, ...any)) {
	sr := r.Shaping
	if sr == nil {
		return
	}
	p("\n## Shaped answers (a = `mcs clusterset.local`; a+ = the same with `%s`)\n\n", shapedOptions)
	if sr.NotDone != "" {
		p("Not done: %s\n", sr.NotDone)
	}
	rt := func(name string) string {
		if x := sr.ratio(name); x != nil {
			return x.String()
		}
		return "-"
	}
	q := func(id string, k Kind) string {
		if v, ok := sr.qps(id, k); ok {
			return fmt.Sprintf("%.0f", v)
		}
		return "-"
	}
	p("| kind | a QPS | a+ QPS | a+/a |\n|---|---:|---:|---:|\n")
	for _, k := range ShapedKinds {
		p("| %s | %s | %s | %s |\n", k, q("a", k), q("a+", k), rt("a+/a "+string(k)))
	}
	p("\nBig headless imports on a (one source cluster; the A query of the service name; a UDP answer is the largest subset of the endpoints that fits):\n\n")
	p("| endpoints | EDNS0: QPS | answers / octets (EDNS0 4096) | dnsperf's mean response, octets | no EDNS: QPS | answers / octets | dnsperf's mean response, octets |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	ans := func(n int, edns bool) string {
		for _, a := range sr.Answers {
			if a.Endpoints == n && a.EDNS == edns {
				tc := ""
				if a.TC {
					tc = " TC"
				}
				return fmt.Sprintf("%d / %d%s", a.Answers, a.Size, tc)
			}
		}
		return "-"
	}
	size := func(k Kind) string {
		var v []float64
		for _, p := range sr.Perf {
			if p.Server == "a" && p.Kind == k && p.RespSize > 0 {
				v = append(v, float64(p.RespSize))
			}
		}
		if len(v) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f", median(v))
	}
	for _, n := range BigSizes {
		p("| %d | %s | %s | %s | %s | %s | %s |\n", n, q("a", bigKind(n, true)), ans(n, true), size(bigKind(n, true)), q("a", bigKind(n, false)), ans(n, false), size(bigKind(n, false)))
	}
	p("| %d / %d | %s | | | %s | | |\n", BigSizes[len(BigSizes)-1], BigSizes[0], rt(bigRatioName(true)), rt(bigRatioName(false)))
	p("\ndnsperf here adds `-b %d` (a %d KiB socket buffer) unless `-dnsperf-args` sets `-b`: with the default buffer, 4 KB answers overrun it at the start of a run and the lost queries hold slots of dnsperf's window of outstanding queries until they time out. ", shapingSocketKB, shapingSocketKB)
	p("In every round each kind runs on a and a+ back to back (who goes first alternates), then each big import's query on a with and without EDNS0; ratios are the median of the per-round ratios. The big imports exist only during this phase.\n")
}

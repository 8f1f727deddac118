// Package soak runs our CoreDNS under steady query load while a churn
// generator rewrites EndpointSlices and creates and deletes ServiceImports
// on a real API server, and checks that every answer is one the API held
// moments before, that no query gets SERVFAIL, and that memory and
// goroutines stay flat. `make soak` runs it for a minute with dnsperf as
// the load; `make test` runs a 10 s version against a -race build.
package soak

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

// The fixture: static ClusterSetIP imports, headless imports whose "east"
// slice the churn rewrites (their "west" slice stays), and ephemeral
// ClusterSetIP imports the churn creates and deletes.
const (
	ns             = "soak"
	staticImports  = 20
	headless       = 10
	ephemeralSlots = 8
	// sliceWritesPerSec and importOpsPerSec are the churn rates.
	sliceWritesPerSec = 20
	importOpsPerSec   = 2
	// staleness is how old a state an answer should reflect at most:
	// measured and reported (a loaded machine can exceed it), while an
	// answer that matches no state ever held fails the test.
	staleness = 2 * time.Second
)

type soakConfig struct {
	duration time.Duration
	qps      int
	race     bool
}

func config(t *testing.T) soakConfig {
	c := soakConfig{duration: 10 * time.Second, qps: 2000, race: true}
	if s := os.Getenv("MCS_DNS_SOAK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "MCS_DNS_SOAK_DURATION")
		c.duration = d
	}
	if s := os.Getenv("MCS_DNS_SOAK_QPS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "MCS_DNS_SOAK_QPS")
		c.qps = n
	}
	if s := os.Getenv("MCS_DNS_SOAK_RACE"); s != "" {
		c.race = s != "0"
	}
	return c
}

func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and CoreDNS")
	}
	cfg := config(t)
	t.Logf("duration %s, load %d qps, race build %v", cfg.duration, cfg.qps, cfg.race)
	bin := coreDNS(t, cfg.race)
	set := cluster.Start(t, cluster.Spec{Name: "east", ClusterID: "east"})
	c := set.Clusters[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	h := newHistory()
	fx := createFixture(t, ctx, c, h)

	metricsAddr := "127.0.0.1:" + strconv.Itoa(procs.FreePort(t))
	srv := procs.StartCoreDNS(t, bin, fmt.Sprintf(`clusterset.local {
    prometheus %s
    mcs {
        kubeconfig %s east
    }
}
`, metricsAddr, set.Kubeconfig))
	// Synced: the last object written answers.
	procs.AnswerEventually(t, 60*time.Second, procs.Addr(srv.Addr), fx.headless[headless-1]+".", dns.TypeA, func(r *dns.Msg) error {
		if len(r.Answer) == 0 {
			return fmt.Errorf("rcode %s, %d answers", dns.RcodeToString[r.Rcode], len(r.Answer))
		}
		return nil
	})

	var wg sync.WaitGroup
	run := func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }
	stop := make(chan struct{})
	deadline := time.Now().Add(cfg.duration)

	var churnErrs atomic.Int64
	run(func() { churnSlices(ctx, t, c, fx, h, stop, &churnErrs) })
	run(func() { churnImports(ctx, t, c, fx, h, stop, &churnErrs) })

	var load loadStats
	var dnsperf *dnsperfRun
	if path, err := exec.LookPath("dnsperf"); err == nil && os.Getenv("MCS_DNS_SOAK_GO_LOAD") == "" {
		dnsperf = startDNSPerf(t, path, srv.Addr, fx, cfg)
	} else {
		run(func() { load.steady(srv.Addr, fx.mix(), cfg.qps, stop) })
	}
	var sample sampleStats
	run(func() { sample.run(t, srv.Addr, fx, h, stop) })
	var usage []usagePoint
	run(func() { usage = watchUsage(t, srv.Cmd.Process.Pid, metricsAddr, stop) })

	time.Sleep(time.Until(deadline))
	close(stop)
	wg.Wait()
	if dnsperf != nil {
		load = dnsperf.wait(t)
	}
	sample.judge(h)
	require.False(t, srv.Exited(), "CoreDNS exited:\n%s", srv.Output())

	t.Logf("load: %s", load)
	t.Logf("samples: %d checked, %d wrong (no state ever held, or the query failed), %d older than %s (oldest %s)",
		sample.checked, len(sample.wrong), len(sample.stale), staleness, sample.maxAge.Round(time.Millisecond))
	t.Logf("churn: %d slice writes, %d import creates/deletes, %d API errors", h.sliceWrites.Load(), h.importOps.Load(), churnErrs.Load())
	for _, u := range usage {
		t.Logf("t=%5.1fs RSS %6d KiB goroutines %d", u.at.Seconds(), u.rssKiB, u.goroutines)
	}

	assert.Zero(t, load.servfail, "SERVFAIL under churn")
	assert.Greater(t, load.replies, int64(0), "no load was answered")
	assert.Empty(t, sample.wrong, "answers that match no state the API ever held, or failed queries")
	assert.Greater(t, sample.checked, 10, "too few answers sampled")
	// The writes are sent one after another; a quarter of the rate still
	// churns every headless service several times over.
	assert.Greater(t, h.sliceWrites.Load(), int64(sliceWritesPerSec*cfg.duration.Seconds()/4), "the churn fell behind")
	flat(t, usage)

	require.NoError(t, srv.Stop(), "CoreDNS did not stop cleanly:\n%s", srv.Output())
	assert.NotContains(t, srv.Output(), "DATA RACE", "the race detector found a race")
	assert.NotContains(t, srv.Output(), "panic", "CoreDNS panicked")
}

// coreDNS builds our CoreDNS, with the race detector when race is set.
func coreDNS(t *testing.T, race bool) string {
	if !race {
		return procs.CoreDNSBinary(t)
	}
	out := filepath.Join(t.TempDir(), "coredns-race")
	cmd := exec.Command("go", "build", "-race", "-o", out, "./cmd/coredns")
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	require.NoError(t, err)
	cmd.Dir = strings.TrimSpace(string(root))
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build -race: %s", msg)
	return out
}

// history holds, for every name the sampler checks, every state the API
// was given: the answer it implies and when the write began and returned.
type history struct {
	mu          sync.Mutex
	states      map[string][]state
	sliceWrites atomic.Int64
	importOps   atomic.Int64
}

// nxdomain stands for "no such name" among answers.
var nxdomain = []string{"NXDOMAIN"}

// state is what a name answers from the moment the write that made it
// began (from) until the next write for the name returned (until, zero
// while current). ips nil means NXDOMAIN.
type state struct {
	ips         []string
	from, until time.Time
	wrote       time.Time
}

func newHistory() *history { return &history{states: map[string][]state{}} }

// record notes that the write begun at began and done at done made name
// answer ips (nil: NXDOMAIN).
func (h *history) record(name string, ips []string, began, done time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.states[name]
	if len(s) > 0 {
		s[len(s)-1].until = done
	}
	if ips == nil {
		ips = nxdomain
	}
	h.states[name] = append(s, state{ips: slices.Sorted(slices.Values(ips)), from: began, wrote: done})
}

// age reports how stale an answer of ips for name, asked at sent and
// received at got, is: 0 when name held ips at some moment of [sent, got],
// else how long before sent the last such state ended; ok is false when
// name never held ips before got (an answer no write produced).
func (h *history) age(name string, ips []string, sent, got time.Time) (age time.Duration, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.states[name] {
		if s.from.After(got) || !slices.Equal(s.ips, ips) {
			continue
		}
		a := time.Duration(0)
		if !s.until.IsZero() && s.until.Before(sent) {
			a = sent.Sub(s.until)
		}
		if !ok || a < age {
			age, ok = a, true
		}
	}
	return age, ok
}

type fixture struct {
	static, headless, ephemeral []string // FQDNs without the final dot
	perEndpoint                 []string
	westIPs                     map[string][]string // headless name -> west slice IPs
}

func (f *fixture) mix() []dns.Question {
	var qs []dns.Question
	add := func(names []string, qtype uint16, weight int) {
		for range weight {
			for _, n := range names {
				qs = append(qs, dns.Question{Name: n + ".", Qtype: qtype, Qclass: dns.ClassINET})
			}
		}
	}
	add(f.static, dns.TypeA, 3)
	add(f.headless, dns.TypeA, 3)
	add(f.headless, dns.TypeSRV, 1)
	add(f.perEndpoint, dns.TypeA, 1)
	add(f.ephemeral, dns.TypeA, 1)
	add(f.static, dns.TypeAAAA, 1)
	return qs
}

func eastIPs(svc, version int) []string {
	n := 2 + version%3 // 2 to 4 endpoints: A sets differ in size too
	ips := make([]string, n)
	for i := range ips {
		ips[i] = fmt.Sprintf("10.%d.%d.%d", 10+svc, version%250, i+1)
	}
	return ips
}

func slice(name, svc, clusterID string, ips []string, hostnames bool) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			mcsapi.LabelServiceName: svc, mcsapi.LabelSourceCluster: clusterID, mcsapi.LabelManagedBy: mcsapi.ManagedByImporter}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for i, ip := range ips {
		ep := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
		if hostnames {
			ep.Hostname = ptr.To(fmt.Sprintf("%s-%d", clusterID, i))
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

func createFixture(t *testing.T, ctx context.Context, c *cluster.Cluster, h *history) *fixture {
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	si := c.MCS.MulticlusterV1beta1().ServiceImports(ns)
	eps := c.Kube.DiscoveryV1().EndpointSlices(ns)
	ports := []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}
	fx := &fixture{westIPs: map[string][]string{}}
	for i := range staticImports {
		name := fmt.Sprintf("static-%d", i)
		_, err := si.Create(ctx, &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{fmt.Sprintf("10.250.0.%d", i+1)}, Ports: ports}}, metav1.CreateOptions{})
		require.NoError(t, err)
		fx.static = append(fx.static, name+"."+ns+".svc.clusterset.local")
	}
	for i := range headless {
		name := fmt.Sprintf("hl-%d", i)
		imp, err := si.Create(ctx, &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: ports}}, metav1.CreateOptions{})
		require.NoError(t, err)
		imp.Status.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
		_, err = si.UpdateStatus(ctx, imp, metav1.UpdateOptions{})
		require.NoError(t, err)
		west := []string{fmt.Sprintf("10.9.%d.1", i), fmt.Sprintf("10.9.%d.2", i)}
		fqdn := name + "." + ns + ".svc.clusterset.local"
		began := time.Now()
		_, err = eps.Create(ctx, slice(name+"-west", name, "west", west, true), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = eps.Create(ctx, slice(name+"-east", name, "east", eastIPs(i, 0), false), metav1.CreateOptions{})
		require.NoError(t, err)
		h.record(fqdn, append(slices.Clone(west), eastIPs(i, 0)...), began, time.Now())
		fx.headless = append(fx.headless, fqdn)
		fx.westIPs[fqdn] = west
		fx.perEndpoint = append(fx.perEndpoint, "west-0.west."+fqdn)
	}
	for i := range ephemeralSlots {
		fqdn := fmt.Sprintf("eph-%d.%s.svc.clusterset.local", i, ns)
		h.record(fqdn, nil, time.Now(), time.Now())
		fx.ephemeral = append(fx.ephemeral, fqdn)
	}
	return fx
}

// churnSlices rewrites one headless service's east slice
// sliceWritesPerSec times a second, round robin.
func churnSlices(ctx context.Context, t *testing.T, c *cluster.Cluster, fx *fixture, h *history, stop <-chan struct{}, errs *atomic.Int64) {
	eps := c.Kube.DiscoveryV1().EndpointSlices(ns)
	tick := time.NewTicker(time.Second / sliceWritesPerSec)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		svc := n % headless
		version := n/headless + 1
		name := fmt.Sprintf("hl-%d", svc)
		ips := eastIPs(svc, version)
		began := time.Now()
		if _, err := eps.Update(ctx, slice(name+"-east", name, "east", ips, false), metav1.UpdateOptions{}); err != nil {
			errs.Add(1)
			t.Logf("slice write: %v", err)
			continue
		}
		h.record(fx.headless[svc], append(slices.Clone(fx.westIPs[fx.headless[svc]]), ips...), began, time.Now())
		h.sliceWrites.Add(1)
	}
}

// churnImports creates or deletes one ephemeral ClusterSetIP import
// importOpsPerSec times a second.
func churnImports(ctx context.Context, t *testing.T, c *cluster.Cluster, fx *fixture, h *history, stop <-chan struct{}, errs *atomic.Int64) {
	si := c.MCS.MulticlusterV1beta1().ServiceImports(ns)
	tick := time.NewTicker(time.Second / importOpsPerSec)
	defer tick.Stop()
	present := make([]bool, ephemeralSlots)
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		i := n % ephemeralSlots
		name := fmt.Sprintf("eph-%d", i)
		vip := fmt.Sprintf("10.251.%d.%d", i, 1+(n/ephemeralSlots)%250)
		began := time.Now()
		var err error
		var ips []string
		if present[i] {
			err = si.Delete(ctx, name, metav1.DeleteOptions{})
		} else {
			ips = []string{vip}
			_, err = si.Create(ctx, &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: ips,
					Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}, metav1.CreateOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) {
			errs.Add(1)
			t.Logf("import write: %v", err)
			continue
		}
		present[i] = !present[i]
		h.record(fx.ephemeral[i], ips, began, time.Now())
		h.importOps.Add(1)
	}
}

// loadStats counts what the load drew.
type loadStats struct {
	sent, replies, servfail, nxdomain, lost int64
}

func (l loadStats) String() string {
	return fmt.Sprintf("%d sent, %d answered, %d SERVFAIL, %d NXDOMAIN, %d unanswered", l.sent, l.replies, l.servfail, l.nxdomain, l.lost)
}

// steady sends the mix at qps over UDP from four sockets, one send every
// millisecond per socket, and counts replies by rcode.
func (l *loadStats) steady(addr string, mix []dns.Question, qps int, stop <-chan struct{}) {
	const sockets = 4
	perTick := max(1, qps/sockets/1000)
	var sent, replies, servfail, nxdomain atomic.Int64
	var wg sync.WaitGroup
	for s := range sockets {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			continue
		}
		wg.Add(2)
		done := make(chan struct{})
		go func() {
			defer wg.Done()
			buf := make([]byte, 65535)
			for {
				n, err := conn.Read(buf)
				if err != nil {
					return
				}
				var m dns.Msg
				if m.Unpack(buf[:n]) != nil {
					continue
				}
				replies.Add(1)
				switch m.Rcode {
				case dns.RcodeServerFailure:
					servfail.Add(1)
				case dns.RcodeNameError:
					nxdomain.Add(1)
				}
			}
		}()
		go func() {
			defer wg.Done()
			defer close(done)
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			m := new(dns.Msg)
			m.SetEdns0(4096, false)
			i := s
			for {
				select {
				case <-stop:
					time.Sleep(500 * time.Millisecond) // the last replies
					conn.Close()
					return
				case <-tick.C:
				}
				for range perTick {
					m.Id = uint16(i)
					m.Question = []dns.Question{mix[i%len(mix)]}
					if b, err := m.Pack(); err == nil {
						if _, err := conn.Write(b); err == nil {
							sent.Add(1)
						}
					}
					i += sockets
				}
			}
		}()
	}
	wg.Wait()
	l.sent, l.replies, l.servfail, l.nxdomain = sent.Load(), replies.Load(), servfail.Load(), nxdomain.Load()
	l.lost = l.sent - l.replies
}

// dnsperfRun is dnsperf sending the mix at a steady rate.
type dnsperfRun struct {
	cmd *exec.Cmd
	out strings.Builder
}

func startDNSPerf(t *testing.T, path, addr string, fx *fixture, cfg soakConfig) *dnsperfRun {
	var data strings.Builder
	for _, q := range fx.mix() {
		fmt.Fprintf(&data, "%s %s\n", q.Name, dns.TypeToString[q.Qtype])
	}
	file := filepath.Join(t.TempDir(), "queries")
	require.NoError(t, os.WriteFile(file, []byte(data.String()), 0o644))
	host, port, _ := net.SplitHostPort(addr)
	r := &dnsperfRun{}
	r.cmd = exec.Command(path, "-s", host, "-p", port, "-d", file, "-l", strconv.Itoa(int(cfg.duration.Seconds())),
		"-Q", strconv.Itoa(cfg.qps), "-c", "4", "-e", "-t", "2")
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
	require.NoError(t, r.cmd.Start())
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait()
		}
	})
	return r
}

var (
	perfSent    = regexp.MustCompile(`Queries sent:\s+(\d+)`)
	perfDone    = regexp.MustCompile(`Queries completed:\s+(\d+)`)
	perfLost    = regexp.MustCompile(`Queries lost:\s+(\d+)`)
	perfRcode   = regexp.MustCompile(`(?m)^\s+Response codes:\s+(.*)$`)
	perfOneCode = regexp.MustCompile(`([A-Z]+) (\d+)`)
)

func (r *dnsperfRun) wait(t *testing.T) loadStats {
	require.NoError(t, r.cmd.Wait(), "dnsperf:\n%s", r.out.String())
	out := r.out.String()
	num := func(re *regexp.Regexp) int64 {
		m := re.FindStringSubmatch(out)
		require.NotNil(t, m, "dnsperf output without %s:\n%s", re, out)
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n
	}
	l := loadStats{sent: num(perfSent), replies: num(perfDone), lost: num(perfLost)}
	if m := perfRcode.FindStringSubmatch(out); m != nil {
		for _, c := range perfOneCode.FindAllStringSubmatch(m[1], -1) {
			n, _ := strconv.ParseInt(c[2], 10, 64)
			switch c[1] {
			case "SERVFAIL":
				l.servfail = n
			case "NXDOMAIN":
				l.nxdomain = n
			}
		}
	}
	return l
}

// sampled is one answer the sampler got: name answered ips (nxdomain for
// NXDOMAIN) to a query sent at sent, received at got.
type sampled struct {
	name      string
	ips       []string
	sent, got time.Time
}

// sampleStats are the answers the sampler compared with the history.
type sampleStats struct {
	answers []sampled
	checked int
	// wrong are answers no state ever held, and failed queries.
	wrong []string
	// stale are the ages of answers older than staleness.
	stale  []time.Duration
	maxAge time.Duration
}

// run queries a random churned name every 10 ms and checks that its
// answer is a state the API held, and how long before the query that state
// ended (0 when it held it while the query ran).
func (s *sampleStats) run(t *testing.T, addr string, fx *fixture, h *history, stop <-chan struct{}) {
	names := append(slices.Clone(fx.headless), fx.ephemeral...)
	r := rand.New(rand.NewPCG(3, 4))
	client := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	for {
		select {
		case <-stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
		name := names[r.IntN(len(names))]
		q := new(dns.Msg)
		q.SetQuestion(name+".", dns.TypeA)
		q.SetEdns0(4096, false)
		sent := time.Now()
		reply, _, err := client.Exchange(q, addr)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			// A datagram lost on a saturated machine: ask once more (a
			// wrong answer is never retried away).
			sent = time.Now()
			reply, _, err = client.Exchange(q, addr)
		}
		got := time.Now()
		if err != nil {
			s.wrong = append(s.wrong, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		var ips []string
		switch reply.Rcode {
		case dns.RcodeNameError:
			ips = nxdomain
		case dns.RcodeSuccess:
			ips = []string{}
			for _, rr := range reply.Answer {
				if a, ok := rr.(*dns.A); ok {
					ips = append(ips, a.A.String())
				}
			}
			slices.Sort(ips)
		default:
			s.wrong = append(s.wrong, fmt.Sprintf("%s: rcode %s", name, dns.RcodeToString[reply.Rcode]))
			continue
		}
		s.answers = append(s.answers, sampled{name: name, ips: ips, sent: sent, got: got})
	}
}

// judge compares every sampled answer with the history, once the churn has
// stopped: a write can be served before the client that made it hears
// back, so only the finished history says what the API held.
func (s *sampleStats) judge(h *history) {
	for _, a := range s.answers {
		s.checked++
		age, ok := h.age(a.name, a.ips, a.sent, a.got)
		switch {
		case !ok:
			s.wrong = append(s.wrong, fmt.Sprintf("%s at %s: %v, never held", a.name, a.sent.Format("15:04:05.000"), a.ips))
		case age > staleness:
			s.stale = append(s.stale, age)
		}
		s.maxAge = max(s.maxAge, age)
	}
}

type usagePoint struct {
	at         time.Duration
	rssKiB     int
	goroutines int
}

// watchUsage samples CoreDNS's RSS and goroutines (its go_goroutines
// metric) once a second.
func watchUsage(t *testing.T, pid int, metricsAddr string, stop <-chan struct{}) []usagePoint {
	start := time.Now()
	var out []usagePoint
	for {
		select {
		case <-stop:
			return out
		case <-time.After(time.Second):
		}
		p := usagePoint{at: time.Since(start), rssKiB: rss(pid), goroutines: goroutines(metricsAddr)}
		out = append(out, p)
	}
}

func rss(pid int) int {
	b, _, err := procs.RSS(pid)
	if err != nil {
		return 0
	}
	return int(b / 1024)
}

func goroutines(addr string) int {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(rest))
			return n
		}
	}
	return 0
}

// flat checks that the last third of the run does not sit above what
// the warm-up (the first third) reached: generous bounds, against leaks
// rather than GC timing or queries in flight.
func flat(t *testing.T, usage []usagePoint) {
	if len(usage) < 3 {
		t.Logf("too few usage samples (%d) to judge flatness", len(usage))
		return
	}
	warm := usage[:len(usage)/3]
	last := usage[len(usage)*2/3:]
	var warmRSS, warmG int
	for _, u := range warm {
		warmRSS, warmG = max(warmRSS, u.rssKiB), max(warmG, u.goroutines)
	}
	// A leak keeps the floor rising; queries in flight only make peaks.
	lastRSS, lastG := last[0].rssKiB, last[0].goroutines
	for _, u := range last {
		lastRSS, lastG = min(lastRSS, u.rssKiB), min(lastG, u.goroutines)
	}
	t.Logf("warm-up peak RSS %d KiB, %d goroutines; last third's floor: RSS %d KiB, %d goroutines", warmRSS, warmG, lastRSS, lastG)
	assert.Less(t, lastRSS, warmRSS*3/2+32*1024, "RSS kept growing")
	assert.LessOrEqual(t, lastG, warmG+20, "goroutines kept growing")
}

package mcs

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metrics"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	cedns "github.com/coredns/coredns/plugin/pkg/edns"
	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcs-dns/mcs-dns/internal/answers"
)

// wire is the server's own writer as far as the plugin can tell: it
// keeps what was written, as bytes (Write) or as a message (WriteMsg).
type wire struct {
	test.ResponseWriter
	raw []byte
	msg *dns.Msg
}

func (w *wire) Write(b []byte) (int, error) { w.raw = append([]byte(nil), b...); return len(b), nil }
func (w *wire) WriteMsg(m *dns.Msg) error   { w.msg = m; return nil }

// reply returns what the client would get: the bytes written, or the
// message packed, and whether the packed fast path wrote it.
func (w *wire) reply(t *testing.T) (*dns.Msg, int, bool) {
	t.Helper()
	if w.raw != nil {
		require.Nil(t, w.msg, "written twice")
		m := new(dns.Msg)
		require.NoError(t, m.Unpack(w.raw), "the packed reply must parse")
		return m, len(w.raw), true
	}
	require.NotNil(t, w.msg, "nothing written")
	b, err := w.msg.Pack()
	require.NoError(t, err)
	return w.msg, len(b), false
}

// serve sends r through the server's ScrubWriter (wrapped as the given
// plugins before ours would) and returns the reply.
func serve(t *testing.T, p *MCS, r *dns.Msg, tcp bool, wrap func(dns.ResponseWriter) dns.ResponseWriter) (*dns.Msg, int, bool) {
	t.Helper()
	inner := &wire{}
	inner.TCP = tcp
	var w dns.ResponseWriter = request.NewScrubWriter(r, inner)
	if wrap != nil {
		w = wrap(w)
	}
	_, err := p.ServeDNS(context.Background(), w, r)
	require.NoError(t, err)
	return inner.reply(t)
}

func asWritten(rr []dns.RR) []string {
	out := make([]string, len(rr))
	for i, r := range rr {
		out[i] = strings.ToLower(r.String())
	}
	return out
}

// TestPackedMatchesMsgPath: for every name of the fixture, every type
// and every kind of query (case, EDNS0 size, DO, RD, CD, UDP and TCP,
// the prometheus recorder in front), the packed fast path sends what the
// dns.Msg path sends, and it is the one that sends it when it can.
func TestPackedMatchesMsgPath(t *testing.T) {
	p := newTestMCS(t)
	var names []string
	for _, f := range fixture() {
		set := p.index.Service(f.svc.Key())
		if set == nil {
			continue
		}
		for _, rel := range set.Names(0) {
			name := f.svc.Name + "." + f.svc.Namespace + ".svc.clusterset.local."
			if rel != "" {
				name = rel + "." + name
			}
			names = append(names, name)
		}
	}
	require.Greater(t, len(names), 20)
	// Reverse names: every address's PTR records.
	seen := map[string]bool{}
	for _, f := range fixture() {
		if set := p.index.Service(f.svc.Key()); set != nil {
			for _, ptr := range set.PTRs() {
				if !seen[ptr.Reverse] {
					seen[ptr.Reverse] = true
					names = append(names, ptr.Reverse)
				}
			}
		}
	}
	require.Greater(t, len(seen), 10)
	// Negative answers: NXDOMAIN, and NODATA for names that exist.
	names = append(names, "nothere.demo.svc.clusterset.local.", "x.y.nothere.demo.svc.clusterset.local.",
		"demo.svc.clusterset.local.", "clusterset.local.", "dns-version.clusterset.local.",
		"9.9.9.9.in-addr.arpa.", "10.0.96.10.in-addr.arpa.", "nope.clusterset.local.")

	type variant struct {
		name           string
		tcp, rd, cd    bool
		ednsSize       uint16 // 0: no OPT
		do, upper      bool
		metricsWrapped bool
		cookie         bool
	}
	variants := []variant{
		{name: "plain"},
		{name: "rd-cd-upper", rd: true, cd: true, upper: true},
		{name: "edns1232-do", ednsSize: 1232, do: true},
		{name: "edns4096-metrics", ednsSize: 4096, metricsWrapped: true},
		{name: "edns512", ednsSize: 512},
		{name: "tcp", tcp: true},
		{name: "tcp-edns-upper", tcp: true, ednsSize: 1232, upper: true},
		{name: "edns1232-cookie", ednsSize: 1232, cookie: true},
	}
	fast := 0
	for _, name := range names {
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeTXT, dns.TypePTR} {
			for _, v := range variants {
				t.Run(fmt.Sprintf("%s/%s/%s", name, dns.TypeToString[qtype], v.name), func(t *testing.T) {
					qname := name
					if v.upper {
						qname = mixCase(name)
					}
					mk := func() *dns.Msg {
						r := new(dns.Msg)
						r.SetQuestion(qname, qtype)
						r.Id = 0xbeef
						r.RecursionDesired = v.rd
						r.CheckingDisabled = v.cd
						if v.ednsSize > 0 {
							r.SetEdns0(v.ednsSize, v.do)
						}
						if v.cookie {
							o := r.IsEdns0()
							o.Option = append(o.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0123456789abcdef"})
						}
						return r
					}
					var wrap func(dns.ResponseWriter) dns.ResponseWriter
					if v.metricsWrapped {
						wrap = func(w dns.ResponseWriter) dns.ResponseWriter { return metrics.NewRecorder(w) }
					}
					got, size, wasFast := serve(t, p, mk(), v.tcp, wrap)
					// The dns.Msg path, forced by a writer that needs the message.
					want, _, slow := serve(t, p, mk(), v.tcp, func(w dns.ResponseWriter) dns.ResponseWriter { return dnstest.NewRecorder(w) })
					require.False(t, slow)

					limit := 512
					if v.tcp {
						limit = dns.MaxMsgSize
					} else if v.ednsSize > 512 {
						limit = int(v.ednsSize)
					}
					assert.LessOrEqual(t, size, limit)
					if wasFast {
						fast++
						assert.False(t, got.Truncated, "the fast path never truncates")
						if want.Truncated {
							// The dns.Msg path compresses names only against
							// names of the same case: with a mixed-case
							// question it may not fit what the template fits.
							require.True(t, v.upper, "only case changes what fits")
							assert.Greater(t, len(got.Answer), len(want.Answer))
							assert.Equal(t, asWritten(want.Answer), asWritten(got.Answer[:len(want.Answer)]))
							return
						}
					}
					assert.Equal(t, want.MsgHdr, got.MsgHdr)
					assert.Equal(t, want.Question, got.Question, "question echoed as asked")
					assert.Equal(t, asWritten(want.Answer), asWritten(got.Answer))
					assert.Equal(t, asWritten(want.Ns), asWritten(got.Ns))
					assert.Equal(t, asWritten(want.Extra), asWritten(got.Extra))
				})
			}
		}
	}
	assert.Greater(t, fast, len(names), "the fast path answered most positive queries")
}

// TestNegativeRcodeCounted: the prometheus recorder sees the rcode of a
// negative reply written as bytes.
func TestNegativeRcodeCounted(t *testing.T) {
	p := newTestMCS(t)
	r := new(dns.Msg)
	r.SetQuestion("nothere.demo.svc.clusterset.local.", dns.TypeA)
	var rec *metrics.Recorder
	got, _, fast := serve(t, p, r, false, func(w dns.ResponseWriter) dns.ResponseWriter {
		rec = metrics.NewRecorder(w)
		return rec
	})
	require.True(t, fast)
	assert.Equal(t, dns.RcodeNameError, got.Rcode)
	assert.Equal(t, dns.RcodeNameError, rec.Rcode)
	assert.Positive(t, rec.Len)
}

func mixCase(s string) string {
	b := []byte(s)
	for i := range b {
		if i%2 == 0 && b[i] >= 'a' && b[i] <= 'z' {
			b[i] -= 'a' - 'A'
		}
	}
	return string(b)
}

// TestPackedFallsBack: what the template cannot express goes the dns.Msg
// way.
func TestPackedFallsBack(t *testing.T) {
	p := newTestMCS(t)
	const name = "db.demo.svc.clusterset.local."
	r := new(dns.Msg)
	r.SetQuestion(name, dns.TypeA)
	_, _, fast := serve(t, p, r, false, nil)
	require.True(t, fast, "baseline")

	// An option no plugin registered (a client cookie) is not echoed by
	// either path; one that some plugin registered is, by the dns.Msg path.
	r = new(dns.Msg)
	r.SetQuestion(name, dns.TypeA)
	o := r.SetEdns0(1232, false).IsEdns0()
	o.Option = append(o.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0123456789abcdef"})
	got, _, fast := serve(t, p, r, false, nil)
	assert.True(t, fast, "unregistered options")
	require.NotNil(t, got.IsEdns0())
	assert.Empty(t, got.IsEdns0().Option)

	const registered = 65001 // local/experimental use
	cedns.SetSupportedOption(registered)
	r = new(dns.Msg)
	r.SetQuestion(name, dns.TypeA)
	o = r.SetEdns0(1232, false).IsEdns0()
	o.Option = append(o.Option, &dns.EDNS0_LOCAL{Code: registered, Data: []byte{1}})
	got, _, fast = serve(t, p, r, false, nil)
	assert.False(t, fast, "registered options")
	require.NotNil(t, got.IsEdns0())
	assert.Len(t, got.IsEdns0().Option, 1, "echoed by the dns.Msg path")

	r = new(dns.Msg)
	r.SetQuestion(name, dns.TypeA)
	r.Question[0].Qclass = dns.ClassANY
	_, _, fast = serve(t, p, r, false, nil)
	assert.False(t, fast, "class ANY")

	r = new(dns.Msg)
	r.SetQuestion(`\100b.demo.svc.clusterset.local.`, dns.TypeA) // "db" with an escape
	_, _, _ = serve(t, p, r, false, nil)                         // must not panic; either path is fine

	// 500 A records: neither template fits 512 octets; the headless
	// name's ring sends the largest subset that does, as bytes, without TC.
	r = new(dns.Msg)
	r.SetQuestion("big.demo.svc.clusterset.local.", dns.TypeA)
	got, n, fast := serve(t, p, r, false, nil)
	assert.True(t, fast)
	assert.False(t, got.Truncated)
	assert.LessOrEqual(t, n, 512)
	assert.Len(t, got.Answer, (512-12-34)/16)
}

// TestPackedShortTemplate: when the additional section does not fit, the
// answer-only template goes out, without TC.
func TestPackedShortTemplate(t *testing.T) {
	p := newTestMCS(t)
	const name = "_http._tcp.long.demo.svc.clusterset.local."
	r := new(dns.Msg)
	r.SetQuestion(name, dns.TypeSRV)
	got, size, fast := serve(t, p, r, false, nil)
	require.True(t, fast)
	assert.False(t, got.Truncated)
	assert.Len(t, got.Answer, 4)
	assert.Empty(t, got.Extra)
	assert.LessOrEqual(t, size, 512)

	r.SetEdns0(4096, true)
	got, _, fast = serve(t, p, r, false, nil)
	require.True(t, fast)
	assert.Len(t, got.Extra, 5, "4 addresses and OPT")
	require.NotNil(t, got.IsEdns0())
	assert.True(t, got.IsEdns0().Do())
	assert.Equal(t, uint16(4096), got.IsEdns0().UDPSize())
}

// front is a plugin before mcs that passes queries on the way every
// CoreDNS plugin does (plugin.NextOrFailure wraps the writer).
type front struct{ next plugin.Handler }

func (f front) Name() string { return "front" }
func (f front) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	return plugin.NextOrFailure(f.Name(), f.next, ctx, w, r)
}

// promLike records as the prometheus plugin does, then passes on.
type promLike struct {
	next plugin.Handler
	rec  *metrics.Recorder
}

func (p *promLike) Name() string { return "prometheus" }
func (p *promLike) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	p.rec = metrics.NewRecorder(w)
	return plugin.NextOrFailure(p.Name(), p.next, ctx, p.rec, r)
}

// TestPackedThroughPluginChain: behind other plugins (prometheus, then
// one more, as in every shipped Corefile) replies are still written as
// bytes, and the prometheus recorder counts them right.
func TestPackedThroughPluginChain(t *testing.T) {
	p := newTestMCS(t)
	prom := &promLike{next: front{next: p}}
	for _, c := range []struct {
		name  string
		rcode int
	}{
		{"db.demo.svc.clusterset.local.", dns.RcodeSuccess},
		{"nothere.demo.svc.clusterset.local.", dns.RcodeNameError},
	} {
		r := new(dns.Msg)
		r.SetQuestion(c.name, dns.TypeA)
		w := &wire{}
		_, err := prom.ServeDNS(context.Background(), request.NewScrubWriter(r, w), r)
		require.NoError(t, err)
		require.NotNil(t, w.raw, "%s: written as bytes", c.name)
		got := new(dns.Msg)
		require.NoError(t, got.Unpack(w.raw))
		assert.Equal(t, c.rcode, got.Rcode)
		assert.Equal(t, c.rcode, prom.rec.Rcode, "the recorder has the rcode")
		assert.Equal(t, len(w.raw), prom.rec.Len, "and the length")
	}
}

// TestPackedNotOverQUIC: DNS over QUIC ends a stream only in WriteMsg.
func TestPackedNotOverQUIC(t *testing.T) {
	r := new(dns.Msg)
	r.SetQuestion("db.demo.svc.clusterset.local.", dns.TypeA)
	assert.False(t, rawWriter(request.NewScrubWriter(r, &dnsserver.DoQWriter{})))
	assert.True(t, rawWriter(front{}.wrap(request.NewScrubWriter(r, &wire{}))))
}

// wrap returns w as plugin.NextOrFailure passes it on.
func (front) wrap(w dns.ResponseWriter) dns.ResponseWriter {
	var got dns.ResponseWriter
	_, _ = plugin.NextOrFailure("front", plugin.HandlerFunc(func(_ context.Context, w dns.ResponseWriter, _ *dns.Msg) (int, error) {
		got = w
		return 0, nil
	}), context.Background(), w, nil)
	return got
}

// TestPTRPacked: PTR answers go out as bytes when they fit the client's
// buffer (an address several services share has several records) and
// take the dns.Msg path, truncated, when they do not.
func TestPTRPacked(t *testing.T) {
	p := newMCS(&config{zones: []string{"clusterset.local.", "in-addr.arpa."}, ttl: 5}, nil)
	acfg := answers.Config{Zones: p.cfg.forwardZones(), TTL: 5}
	for i := range 12 {
		svc := &answers.Service{Namespace: "demo", Name: fmt.Sprintf("shared-%02d-%s", i, strings.Repeat("x", 30)), Type: answers.Headless}
		p.index.Put(svc.Key(), answers.Build(svc, []*answers.Slice{{ClusterID: "east", Endpoints: []answers.Endpoint{readyEP("pod", "10.9.0.1")}}}, acfg))
	}
	mk := func(size uint16) *dns.Msg {
		r := new(dns.Msg)
		r.SetQuestion("1.0.9.10.IN-ADDR.arpa.", dns.TypePTR)
		r.Id = 0x1234
		if size > 0 {
			r.SetEdns0(size, false)
		}
		return r
	}
	got, n, fast := serve(t, p, mk(4096), false, nil)
	require.True(t, fast)
	assert.Greater(t, n, 512)
	require.Len(t, got.Answer, 12)
	want, _, slow := serve(t, p, mk(4096), false, func(w dns.ResponseWriter) dns.ResponseWriter { return dnstest.NewRecorder(w) })
	require.False(t, slow)
	assert.Equal(t, want.MsgHdr, got.MsgHdr)
	assert.Equal(t, want.Question, got.Question)
	assert.Equal(t, asWritten(want.Answer), asWritten(got.Answer))
	assert.Equal(t, asWritten(want.Extra), asWritten(got.Extra))
	for _, rr := range got.Answer {
		assert.Equal(t, "1.0.9.10.IN-ADDR.arpa.", rr.Header().Name, "owner points at the question")
		assert.Equal(t, uint32(5), rr.Header().Ttl)
	}

	got, n, fast = serve(t, p, mk(0), false, nil)
	assert.False(t, fast, "does not fit 512 octets")
	assert.True(t, got.Truncated)
	assert.LessOrEqual(t, n, 512)

	got, _, fast = serve(t, p, mk(0), true, nil)
	assert.True(t, fast, "TCP")
	assert.Len(t, got.Answer, 12)
}

// TestServeDNSCapsUDPReplies: by default no UDP reply is larger than
// DefaultMaxUDPSize, whatever buffer the query advertises, on the packed
// path and the dns.Msg path alike (a big headless name's A, ANY and SRV
// answers: subsets without TC); over TCP the whole answer; max_udp_size
// raises the cap.
func TestServeDNSCapsUDPReplies(t *testing.T) {
	mk := func(name string, qtype uint16) *dns.Msg {
		r := new(dns.Msg)
		r.SetQuestion(name, qtype)
		r.SetEdns0(65000, false)
		return r
	}
	msgPath := func(w dns.ResponseWriter) dns.ResponseWriter { return dnstest.NewRecorder(w) }
	for _, c := range []struct {
		name  string
		qtype uint16
	}{
		{"big.demo.svc.clusterset.local.", dns.TypeA},
		{"big.demo.svc.clusterset.local.", dns.TypeANY},
		{"_http._tcp.big.demo.svc.clusterset.local.", dns.TypeSRV},
	} {
		def := newTestMCSWith(t, &config{ttl: 5})
		for _, path := range []struct {
			name string
			wrap func(dns.ResponseWriter) dns.ResponseWriter
		}{{"packed", nil}, {"msg", msgPath}} {
			what := c.name + " " + dns.TypeToString[c.qtype] + " " + path.name
			got, n, _ := serve(t, def, mk(c.name, c.qtype), false, path.wrap)
			assert.LessOrEqual(t, n, DefaultMaxUDPSize, what)
			assert.Greater(t, n, DefaultMaxUDPSize-200, "%s: fills the cap", what)
			assert.False(t, got.Truncated, "%s: a subset, without TC", what)
			full, tn, _ := serve(t, def, mk(c.name, c.qtype), true, path.wrap)
			assert.False(t, full.Truncated, what)
			assert.Greater(t, tn, 4*DefaultMaxUDPSize, "%s: TCP is not capped", what)

			raised := newTestMCSWith(t, &config{ttl: 5, maxUDP: 4096})
			_, rn, _ := serve(t, raised, mk(c.name, c.qtype), false, path.wrap)
			assert.LessOrEqual(t, rn, 4096, what)
			assert.Greater(t, rn, 4096-200, "%s: max_udp_size 4096", what)
		}
	}
}

package mcs

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcs-dns/mcs-dns/internal/answers"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func readyEP(host string, ips ...string) answers.Endpoint {
	return answers.Endpoint{Hostname: host, Addresses: addrs(ips...)}
}

// fixture is what the unit tests and benchmarks query: the answers the
// informers would publish, put into the index directly.
func fixture() []struct {
	svc    *answers.Service
	slices []*answers.Slice
} {
	var big []answers.Endpoint
	for i := range 500 {
		big = append(big, readyEP("", fmt.Sprintf("10.3.%d.%d", i/250, i%250+1)))
	}
	var longNames []answers.Endpoint
	for i := range 4 {
		longNames = append(longNames, readyEP(fmt.Sprintf("%s%d", strings.Repeat("h", 50), i), fmt.Sprintf("10.4.0.%d", i+1)))
	}
	http := []answers.Port{{Name: "http", Protocol: "tcp", Port: 80}}
	return []struct {
		svc    *answers.Service
		slices []*answers.Slice
	}{
		{&answers.Service{Namespace: "demo", Name: "web", Type: answers.ClusterSetIP, IPs: addrs("10.96.0.10"), Ports: http},
			[]*answers.Slice{{ClusterID: "east", Endpoints: []answers.Endpoint{readyEP("web-0", "10.1.0.1")}}}},
		{&answers.Service{Namespace: "demo", Name: "dual", Type: answers.ClusterSetIP, IPs: addrs("10.96.0.11", "fd00:10:96::b")}, nil},
		{&answers.Service{Namespace: "demo", Name: "dns", Type: answers.ClusterSetIP, IPs: addrs("10.96.0.53"),
			Ports: []answers.Port{{Name: "dns", Protocol: "udp", Port: 42}, {Name: "dns-tcp", Protocol: "tcp", Port: 42}}}, nil},
		{&answers.Service{Namespace: "demo", Name: "db", Type: answers.Headless,
			Ports: []answers.Port{{Name: "pg", Protocol: "tcp", Port: 5432}, {Name: "metrics", Protocol: "tcp", Port: 9187}}},
			[]*answers.Slice{
				// db-1 (10.1.0.6) is not ready: the transform leaves it out.
				{Name: "a", ClusterID: "east", Endpoints: []answers.Endpoint{readyEP("db-0", "10.1.0.5")}},
				{Name: "b", ClusterID: "west.eu", Endpoints: []answers.Endpoint{readyEP("", "fd00::7")}},
			}},
		{&answers.Service{Namespace: "demo", Name: "big", Type: answers.Headless, Ports: http},
			[]*answers.Slice{{ClusterID: "east", Endpoints: big}}},
		{&answers.Service{Namespace: "demo", Name: "long", Type: answers.Headless, Ports: http},
			[]*answers.Slice{{ClusterID: "east", Endpoints: longNames}}},
		{&answers.Service{Namespace: "demo", Name: "gone", Type: answers.Headless, Ports: http},
			[]*answers.Slice{{ClusterID: "east"}}}, // its one endpoint is not ready
	}
}

// newTestMCS serves the fixture in zones (by default the forward zone and
// both reverse ones), with UDP replies as large as the client's buffer
// (max_udp_size 65535), so that the tests can ask for any size;
// TestServeDNSCapsUDPReplies checks the default cap.
func newTestMCS(t testing.TB, zones ...string) *MCS {
	t.Helper()
	return newTestMCSWith(t, &config{zones: zones, ttl: 5, maxUDP: dns.MaxMsgSize})
}

// newTestMCSWith serves the fixture with cfg (the zones as newTestMCS).
func newTestMCSWith(t testing.TB, cfg *config) *MCS {
	t.Helper()
	if len(cfg.zones) == 0 {
		cfg.zones = []string{"clusterset.local.", "in-addr.arpa.", "ip6.arpa."}
	}
	p := newMCS(cfg, nil)
	p.setNSAddrs([]net.IP{net.ParseIP("192.0.2.53"), net.ParseIP("2001:db8::53")})
	acfg := answers.Config{Zones: p.cfg.forwardZones(), TTL: 5}
	for _, f := range fixture() {
		p.index.Put(f.svc.Key(), answers.Build(f.svc, f.slices, acfg))
	}
	return p
}

type queryOpt func(*dns.Msg, *test.ResponseWriter)

func edns(size uint16) queryOpt {
	return func(m *dns.Msg, _ *test.ResponseWriter) { m.SetEdns0(size, false) }
}

var overTCP queryOpt = func(_ *dns.Msg, w *test.ResponseWriter) { w.TCP = true }

func query(t testing.TB, p *MCS, name string, qtype uint16, opts ...queryOpt) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	w := &test.ResponseWriter{}
	for _, o := range opts {
		o(m, w)
	}
	rec := dnstest.NewRecorder(w)
	rc, err := p.ServeDNS(context.Background(), rec, m)
	require.NoError(t, err)
	if rec.Msg == nil {
		// not written: the server would answer rc
		return &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: rc}}
	}
	return rec.Msg
}

// rrs renders records without TTL and class, sorted as given.
func rrs(section []dns.RR) []string {
	var out []string
	for _, rr := range section {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		f := strings.Fields(rr.String())
		out = append(out, f[0]+" "+strings.Join(f[3:], " "))
	}
	return out
}

func TestServeDNS(t *testing.T) {
	p := newTestMCS(t)
	const soa = "clusterset.local. SOA"
	tests := []struct {
		name   string
		qtype  uint16
		rcode  int
		answer []string
		extra  []string
		// ns is the expected authority section, by prefix.
		ns string
	}{
		// 1. dns-version, apex, case
		{"dns-version.clusterset.local.", dns.TypeTXT, dns.RcodeSuccess, []string{`dns-version.clusterset.local. TXT "1.0.0"`}, nil, ""},
		{"DNS-Version.ClusterSet.Local.", dns.TypeTXT, dns.RcodeSuccess, []string{`dns-version.clusterset.local. TXT "1.0.0"`}, nil, ""},
		{"dns-version.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, nil, soa},
		{"clusterset.local.", dns.TypeNS, dns.RcodeSuccess, []string{"clusterset.local. NS ns.dns.clusterset.local."},
			[]string{"ns.dns.clusterset.local. A 192.0.2.53", "ns.dns.clusterset.local. AAAA 2001:db8::53"}, ""},
		{"ns.dns.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"ns.dns.clusterset.local. A 192.0.2.53"}, nil, ""},
		{"dns.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, nil, soa},
		{"clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, nil, soa},
		// 2. ClusterSetIP
		{"web.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"web.demo.svc.clusterset.local. A 10.96.0.10"}, nil, ""},
		{"WEB.Demo.SVC.clusterset.LOCAL.", dns.TypeA, dns.RcodeSuccess, []string{"web.demo.svc.clusterset.local. A 10.96.0.10"}, nil, ""},
		{"web.demo.svc.clusterset.local.", dns.TypeAAAA, dns.RcodeSuccess, nil, nil, soa},
		{"web.demo.svc.clusterset.local.", dns.TypeMX, dns.RcodeSuccess, nil, nil, soa},
		{"dual.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"dual.demo.svc.clusterset.local. A 10.96.0.11"}, nil, ""},
		{"dual.demo.svc.clusterset.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{"dual.demo.svc.clusterset.local. AAAA fd00:10:96::b"}, nil, ""},
		{"_http._tcp.web.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"_http._tcp.web.demo.svc.clusterset.local. SRV 0 100 80 web.demo.svc.clusterset.local."},
			[]string{"web.demo.svc.clusterset.local. A 10.96.0.10"}, ""},
		{"web.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"web.demo.svc.clusterset.local. SRV 0 100 80 web.demo.svc.clusterset.local."},
			[]string{"web.demo.svc.clusterset.local. A 10.96.0.10"}, ""},
		{"dns.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"dns.demo.svc.clusterset.local. SRV 0 100 42 dns.demo.svc.clusterset.local."},
			[]string{"dns.demo.svc.clusterset.local. A 10.96.0.53"}, ""},
		{"_https._tcp.web.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeNameError, nil, nil, soa},
		{"web-0.east.web.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, nil, soa},
		// 3. headless
		{"db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"db.demo.svc.clusterset.local. A 10.1.0.5"}, nil, ""},
		{"db.demo.svc.clusterset.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{"db.demo.svc.clusterset.local. AAAA fd00::7"}, nil, ""},
		{"db-0.east.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"db-0.east.db.demo.svc.clusterset.local. A 10.1.0.5"}, nil, ""},
		{"fd00--7.west.eu.db.demo.svc.clusterset.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{"fd00--7.west.eu.db.demo.svc.clusterset.local. AAAA fd00::7"}, nil, ""},
		{"db-1.east.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, nil, soa},
		{"_pg._tcp.db.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess, []string{
			"_pg._tcp.db.demo.svc.clusterset.local. SRV 0 50 5432 db-0.east.db.demo.svc.clusterset.local.",
			"_pg._tcp.db.demo.svc.clusterset.local. SRV 0 50 5432 fd00--7.west.eu.db.demo.svc.clusterset.local.",
		}, []string{"db-0.east.db.demo.svc.clusterset.local. A 10.1.0.5", "fd00--7.west.eu.db.demo.svc.clusterset.local. AAAA fd00::7"}, ""},
		{"gone.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, nil, soa},
		// 4. PTR
		{"10.0.96.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"10.0.96.10.in-addr.arpa. PTR web.demo.svc.clusterset.local."}, nil, ""},
		{"5.0.1.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"5.0.1.10.in-addr.arpa. PTR db-0.east.db.demo.svc.clusterset.local."}, nil, ""},
		{"7.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", dns.TypePTR, dns.RcodeSuccess,
			[]string{"7.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa. PTR fd00--7.west.eu.db.demo.svc.clusterset.local."}, nil, ""},
		{"6.0.1.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, nil, nil, "in-addr.arpa. SOA"},
		{"10.0.96.10.in-addr.arpa.", dns.TypeA, dns.RcodeSuccess, nil, nil, "in-addr.arpa. SOA"},
		// 5. <clusterid>.<svc>
		{"east.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, nil, soa},
		{"west.eu.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, nil, soa},
		{"eu.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, nil, soa},
		{"east.web.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, nil, soa},
		{"north.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, nil, soa},
		// 6. negative answers and non-terminals
		{"nothere.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, nil, soa},
		{"svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, nil, soa},
		{"demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, nil, soa},
		{"nons.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, nil, soa},
		{"foo.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, nil, soa},
		{"_tcp.db.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess, nil, nil, soa},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+dns.TypeToString[tt.qtype], func(t *testing.T) {
			r := query(t, p, tt.name, tt.qtype)
			assert.Equal(t, dns.RcodeToString[tt.rcode], dns.RcodeToString[r.Rcode])
			assert.True(t, r.Authoritative)
			assert.Equal(t, tt.answer, rrs(r.Answer))
			assert.Equal(t, tt.extra, rrs(r.Extra))
			if tt.ns == "" {
				assert.Empty(t, r.Ns)
			} else {
				require.Len(t, r.Ns, 1)
				assert.True(t, strings.HasPrefix(rrs(r.Ns)[0], tt.ns), rrs(r.Ns)[0])
				assert.Equal(t, uint32(5), r.Ns[0].(*dns.SOA).Minttl)
			}
			for _, rr := range r.Answer {
				assert.Equal(t, uint32(5), rr.Header().Ttl)
			}
		})
	}
}

func TestApexSOA(t *testing.T) {
	p := newTestMCS(t)
	for zone, mname := range map[string]string{"clusterset.local.": "ns.dns.clusterset.local.", "in-addr.arpa.": "ns.dns.clusterset.local."} {
		r := query(t, p, zone, dns.TypeSOA)
		require.Len(t, r.Answer, 1, zone)
		soa := r.Answer[0].(*dns.SOA)
		assert.Equal(t, zone, soa.Hdr.Name)
		assert.Equal(t, mname, soa.Ns)
		assert.Equal(t, "hostmaster.clusterset.local.", soa.Mbox)
		assert.Equal(t, p.index.Serial(), soa.Serial)
		assert.Equal(t, uint32(5), soa.Minttl)
	}
}

func TestServeDNSNotOurZone(t *testing.T) {
	p := newTestMCS(t)
	p.Next = test.NextHandler(dns.RcodeRefused, nil)
	r := query(t, p, "example.org.", dns.TypeA)
	assert.Equal(t, dns.RcodeRefused, r.Rcode)
}

func TestServeDNSFallthrough(t *testing.T) {
	p := newTestMCS(t)
	p.cfg.fall = fall.F{Zones: []string{"clusterset.local."}}
	p.Next = test.NextHandler(dns.RcodeRefused, nil)
	assert.Equal(t, dns.RcodeRefused, query(t, p, "nothere.demo.svc.clusterset.local.", dns.TypeA).Rcode, "NXDOMAIN falls through")
	assert.Equal(t, dns.RcodeSuccess, query(t, p, "web.demo.svc.clusterset.local.", dns.TypeAAAA).Rcode, "NODATA does not")
	assert.Equal(t, dns.RcodeNameError, query(t, p, "6.0.1.10.in-addr.arpa.", dns.TypePTR).Rcode, "other zones do not")
}

func TestServeDNSBeforeSync(t *testing.T) {
	p := newTestMCS(t)
	p.ctl = &controller{} // not synced
	assert.Equal(t, dns.RcodeServerFailure, query(t, p, "nothere.demo.svc.clusterset.local.", dns.TypeA).Rcode)
	assert.Equal(t, dns.RcodeSuccess, query(t, p, "web.demo.svc.clusterset.local.", dns.TypeA).Rcode)
	assert.False(t, p.Ready())
	p.ctl.synced.Store(true)
	assert.True(t, p.Ready())
	assert.Equal(t, dns.RcodeNameError, query(t, p, "nothere.demo.svc.clusterset.local.", dns.TypeA).Rcode)
}

func TestServeDNSTransfersRefused(t *testing.T) {
	p := newTestMCS(t)
	assert.Equal(t, dns.RcodeRefused, query(t, p, "clusterset.local.", dns.TypeAXFR).Rcode)
}

// TestServeDNSOtherClasses: the zones exist in class IN only; a query of
// another class for a name in them is refused, not passed on (a forward
// after mcs would send it upstream), unless fallthrough covers the name.
func TestServeDNSOtherClasses(t *testing.T) {
	p := newTestMCS(t)
	p.Next = test.NextHandler(dns.RcodeServerFailure, nil)
	p.cfg.fall = fall.F{Zones: []string{"in-addr.arpa."}}
	class := func(c uint16) queryOpt {
		return func(m *dns.Msg, _ *test.ResponseWriter) { m.Question[0].Qclass = c }
	}
	for _, c := range []uint16{dns.ClassCHAOS, dns.ClassHESIOD, dns.ClassNONE, 0, 4242} {
		assert.Equal(t, dns.RcodeRefused, query(t, p, "web.demo.svc.clusterset.local.", dns.TypeA, class(c)).Rcode, "class %d", c)
		assert.Equal(t, dns.RcodeServerFailure, query(t, p, "version.bind.", dns.TypeTXT, class(c)).Rcode, "class %d outside the zones: passed on", c)
		assert.Equal(t, dns.RcodeServerFailure, query(t, p, "10.0.96.10.in-addr.arpa.", dns.TypePTR, class(c)).Rcode, "class %d under fallthrough: passed on", c)
	}
	assert.Equal(t, dns.RcodeSuccess, query(t, p, "web.demo.svc.clusterset.local.", dns.TypeA, class(dns.ClassANY)).Rcode, "class ANY is answered")
}

// TestServeDNSOtherOpcodes: NOTIFY, UPDATE and the like are not queries;
// the server replies NOTIMP instead of an answer.
func TestServeDNSOtherOpcodes(t *testing.T) {
	p := newTestMCS(t)
	for _, op := range []int{dns.OpcodeNotify, dns.OpcodeUpdate, dns.OpcodeStatus} {
		m := query(t, p, "web.demo.svc.clusterset.local.", dns.TypeA, func(m *dns.Msg, _ *test.ResponseWriter) { m.Opcode = op })
		assert.Equal(t, dns.RcodeNotImplemented, m.Rcode, dns.OpcodeToString[op])
		assert.Empty(t, m.Answer)
	}
}

// TestServeDNSTypeANY: RFC 8482, one RRset of the name rather than an
// empty answer (which a cache would keep as "no records").
func TestServeDNSTypeANY(t *testing.T) {
	p := newTestMCS(t)
	for name, want := range map[string][]string{
		"web.demo.svc.clusterset.local.":            {"web.demo.svc.clusterset.local. A 10.96.0.10"},
		"db.demo.svc.clusterset.local.":             {"db.demo.svc.clusterset.local. A 10.1.0.5"},
		"_http._tcp.web.demo.svc.clusterset.local.": {"_http._tcp.web.demo.svc.clusterset.local. SRV 0 100 80 web.demo.svc.clusterset.local."},
		"10.0.96.10.in-addr.arpa.":                  {"10.0.96.10.in-addr.arpa. PTR web.demo.svc.clusterset.local."},
		"dns-version.clusterset.local.":             {`dns-version.clusterset.local. TXT "1.0.0"`},
	} {
		m := query(t, p, name, dns.TypeANY)
		assert.Equal(t, dns.RcodeSuccess, m.Rcode, name)
		assert.Equal(t, want, rrs(m.Answer), name)
		require.Len(t, m.Question, 1)
		assert.Equal(t, dns.TypeANY, m.Question[0].Qtype)
	}
	m := query(t, p, "clusterset.local.", dns.TypeANY)
	require.Len(t, m.Answer, 1)
	assert.Equal(t, dns.TypeSOA, m.Answer[0].Header().Rrtype)

	m = query(t, p, "demo.svc.clusterset.local.", dns.TypeANY)
	assert.Equal(t, dns.RcodeSuccess, m.Rcode, "an empty non-terminal has no RRset: NODATA")
	assert.Empty(t, m.Answer)
	require.Len(t, m.Ns, 1)

	m = query(t, p, "nothere.demo.svc.clusterset.local.", dns.TypeANY)
	assert.Equal(t, dns.RcodeNameError, m.Rcode)
}

// TestServeDNSTypeANYBigHeadless: an ANY query of a headless name whose
// A answer does not fit gets what the A query gets: the largest subset
// that fits, without TC; over TCP every endpoint.
func TestServeDNSTypeANYBigHeadless(t *testing.T) {
	p := newTestMCS(t)
	const name = "big.demo.svc.clusterset.local."
	for limit, opts := range map[int][]queryOpt{512: nil, 1232: {edns(1232)}, 4096: {edns(4096)}} {
		a := query(t, p, name, dns.TypeA, opts...)
		m := query(t, p, name, dns.TypeANY, opts...)
		assert.Equal(t, dns.RcodeSuccess, m.Rcode)
		assert.False(t, m.Truncated, "%d: a subset, without TC", limit)
		assert.Equal(t, rrs(a.Answer), rrs(m.Answer), "%d: the A query's subset", limit)
		assert.Less(t, len(m.Answer), 500, "%d", limit)
		assert.Greater(t, len(m.Answer), (limit-100)/16, "%d", limit)
		require.Len(t, m.Question, 1)
		assert.Equal(t, dns.TypeANY, m.Question[0].Qtype)
		b, err := m.Pack()
		require.NoError(t, err)
		assert.LessOrEqual(t, len(b), limit)
	}
	m := query(t, p, name, dns.TypeANY, overTCP)
	assert.False(t, m.Truncated)
	assert.Len(t, m.Answer, 500, "over TCP, whole")
}

// TestReverseEmptyNonTerminals: a partial reverse name above an address
// with PTR records exists (NOERROR, no records, SOA), so that RFC 8020
// resolvers walking down to the PTR name do not stop at NXDOMAIN.
func TestReverseEmptyNonTerminals(t *testing.T) {
	p := newTestMCS(t)
	for name, want := range map[string]int{
		"0.96.10.in-addr.arpa.":    dns.RcodeSuccess,
		"96.10.in-addr.arpa.":      dns.RcodeSuccess,
		"10.in-addr.arpa.":         dns.RcodeSuccess,
		"1.96.10.in-addr.arpa.":    dns.RcodeNameError,
		"9.in-addr.arpa.":          dns.RcodeNameError,
		"d.f.ip6.arpa.":            dns.RcodeSuccess,
		"e.f.ip6.arpa.":            dns.RcodeNameError,
		"99.0.96.10.in-addr.arpa.": dns.RcodeNameError,
	} {
		for _, qtype := range []uint16{dns.TypePTR, dns.TypeNS, dns.TypeA} {
			m := query(t, p, name, qtype)
			assert.Equal(t, want, m.Rcode, "%s %s", name, dns.TypeToString[qtype])
			assert.Empty(t, m.Answer, name)
			require.Len(t, m.Ns, 1, name)
			assert.Equal(t, dns.TypeSOA, m.Ns[0].Header().Rrtype)
		}
	}
}

func packed(t *testing.T, m *dns.Msg) int {
	t.Helper()
	b, err := m.Pack()
	require.NoError(t, err)
	return len(b)
}

func TestTruncation(t *testing.T) {
	p := newTestMCS(t)
	const big = "big.demo.svc.clusterset.local."

	// A headless answer that does not fit is the largest subset that
	// does, without TC (the MCS DNS specification allows a subset of
	// the ready endpoints).
	r := query(t, p, big, dns.TypeA)
	assert.False(t, r.Truncated, "a subset, not truncated")
	assert.Len(t, r.Answer, (512-12-34)/16, "as many as fit 512 octets")
	assert.LessOrEqual(t, packed(t, r), 512)

	r = query(t, p, big, dns.TypeA, edns(1232))
	assert.False(t, r.Truncated)
	assert.LessOrEqual(t, packed(t, r), 1232)
	assert.Len(t, r.Answer, (1232-12-34-11)/16, "the EDNS0 buffer is used")
	require.NotNil(t, r.IsEdns0(), "OPT kept")

	r = query(t, p, big, dns.TypeA, overTCP)
	assert.False(t, r.Truncated)
	assert.Len(t, r.Answer, 500, "TCP carries the full answer")

	r = query(t, p, big, dns.TypeSRV, overTCP, edns(4096))
	assert.False(t, r.Truncated)
	assert.Len(t, r.Answer, 500)

	// A ClusterSetIP or per-endpoint answer is never cut: TC as before.
	p = newMCS(&config{zones: []string{"clusterset.local."}, ttl: 5}, nil)
	var many []string
	for i := range 100 {
		many = append(many, fmt.Sprintf("10.97.0.%d", i+1))
	}
	svc := &answers.Service{Namespace: "demo", Name: "vips", Type: answers.ClusterSetIP, IPs: addrs(many...)}
	p.index.Put(svc.Key(), answers.Build(svc, nil, answers.Config{Zones: []string{"clusterset.local."}, TTL: 5}))
	r = query(t, p, "vips.demo.svc.clusterset.local.", dns.TypeA)
	assert.True(t, r.Truncated)
}

// TestTruncationDropsExtraFirst: when only the additional section does
// not fit, it goes and TC stays clear (the answer is complete).
func TestTruncationDropsExtraFirst(t *testing.T) {
	p := newTestMCS(t)
	const name = "_http._tcp.long.demo.svc.clusterset.local."
	full := query(t, p, name, dns.TypeSRV, edns(4096))
	require.Len(t, full.Answer, 4)
	require.Len(t, rrs(full.Extra), 4)
	require.Greater(t, packed(t, full), 512, "fixture must overflow 512 octets")

	r := query(t, p, name, dns.TypeSRV)
	assert.False(t, r.Truncated)
	assert.Len(t, r.Answer, 4)
	assert.Empty(t, r.Extra)
	assert.LessOrEqual(t, packed(t, r), 512)

	r = query(t, p, name, dns.TypeSRV, edns(512))
	assert.False(t, r.Truncated)
	assert.Len(t, r.Answer, 4)
	assert.Equal(t, []dns.RR{r.IsEdns0()}, r.Extra, "only OPT left")
}

// TestSharedRecordsUntouched: writing a reply (truncated ones included)
// must never change the published answers.
func TestSharedRecordsUntouched(t *testing.T) {
	p := newTestMCS(t)
	set := p.index.Service("big.demo")
	node := set.Lookup(0, "")
	before, _ := node.Records(dns.TypeA)
	_ = query(t, p, "big.demo.svc.clusterset.local.", dns.TypeA)
	_ = query(t, p, "big.demo.svc.clusterset.local.", dns.TypeA, edns(1232))
	after, _ := node.Records(dns.TypeA)
	assert.Equal(t, rrs(before), rrs(after))
	assert.Len(t, after, 500)
	assert.Equal(t, "big.demo.svc.clusterset.local.", after[0].Header().Name)
}

func TestNamespacesOptionZones(t *testing.T) {
	// two forward zones answer the same services
	p := newTestMCS(t, "clusterset.local.", "mcs.example.")
	r := query(t, p, "web.demo.svc.mcs.example.", dns.TypeA)
	assert.Equal(t, []string{"web.demo.svc.mcs.example. A 10.96.0.10"}, rrs(r.Answer))
	r = query(t, p, "dns-version.mcs.example.", dns.TypeTXT)
	assert.Len(t, r.Answer, 1)
}

// TestConcurrentQueriesAndUpdates: queries run while services are rebuilt
// and republished; with -race this proves the query path needs no locks
// and every reply is whole (one version of a service, never a mix).
func TestConcurrentQueriesAndUpdates(t *testing.T) {
	p := newTestMCS(t)
	acfg := answers.Config{Zones: p.cfg.forwardZones(), TTL: 5}
	done := make(chan struct{})
	var writers sync.WaitGroup
	writers.Go(func() {
		for i := range 300 {
			var eps []answers.Endpoint
			n := 1 + i%20
			for j := range n {
				eps = append(eps, readyEP("", fmt.Sprintf("10.9.%d.%d", i%200, j+1)))
			}
			svc := &answers.Service{Namespace: "demo", Name: "churn", Type: answers.Headless,
				Ports: []answers.Port{{Name: "http", Protocol: "tcp", Port: 80}}}
			set := answers.Build(svc, []*answers.Slice{{ClusterID: "east", Endpoints: eps}}, acfg)
			if i%10 == 9 {
				set = nil
			}
			p.index.Put(svc.Key(), set)
		}
	})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				r := query(t, p, "churn.demo.svc.clusterset.local.", dns.TypeA, overTCP)
				if r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0 {
					// all records of one reply come from one version
					prefix := r.Answer[0].(*dns.A).A.To4()[2]
					for _, rr := range r.Answer {
						if rr.(*dns.A).A.To4()[2] != prefix {
							t.Errorf("reply mixes versions: %v", r.Answer)
							return
						}
					}
				}
				_ = query(t, p, "_http._tcp.churn.demo.svc.clusterset.local.", dns.TypeSRV)
				_ = query(t, p, "web.demo.svc.clusterset.local.", dns.TypeA)
				_ = query(t, p, "9.10.in-addr.arpa.", dns.TypePTR) // the reverse ENT snapshot
				_ = query(t, p, "1.1.9.10.in-addr.arpa.", dns.TypePTR)
			}
		})
	}
	writers.Wait()
	close(done)
	readers.Wait()
}

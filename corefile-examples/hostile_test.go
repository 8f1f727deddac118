package examples_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcs-dns/mcs-dns/test/procs"
)

// TestHostileQueries sends every shipped Corefile's server, over real UDP
// and TCP, the queries nobody should send: every class but IN, every
// opcode, ANY and unknown types, EDNS version 1, malformed EDNS, names of
// 255 bytes and labels of 63, compression loops, random bytes and
// truncated packets, hostileCount of each. The server must keep answering
// (no panic, no exit), never SERVFAIL a well-formed query for our zones,
// never send a UDP reply bigger than the buffer it may use, write a
// bounded number of log lines (not one per packet), and keep its memory
// flat. The numbers it sees are logged (go test -v).
func TestHostileQueries(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and CoreDNS")
	}
	bins := procs.Build(t)
	f := setup(t)
	for _, tc := range []struct {
		file string
		// frontOf: the Corefile forwards to a server running this one.
		frontOf string
	}{
		{file: "standalone.Corefile"},
		{file: "with-kubernetes.Corefile"},
		{file: "production.Corefile"},
		{file: "forward-from-cluster-dns.Corefile", frontOf: "standalone.Corefile"},
	} {
		t.Run(strings.TrimSuffix(tc.file, ".Corefile"), func(t *testing.T) {
			var srv *procs.CoreDNS
			if tc.frontOf != "" {
				backCore, _ := adapt(t, read(t, tc.frontOf), f.set.Kubeconfig, "east")
				back := procs.StartCoreDNS(t, bins.CoreDNS, backCore)
				mcsAnswers(t, back.Addr, f)
				srv = procs.StartCoreDNS(t, bins.CoreDNS, strings.Replace(read(t, tc.file), "10.96.0.53", back.Addr, 1))
			} else {
				corefile, _ := adapt(t, read(t, tc.file), f.set.Kubeconfig, "east")
				srv = procs.StartCoreDNS(t, bins.CoreDNS, corefile)
			}
			mcsAnswers(t, srv.Addr, f)
			hostileMatrix(t, srv, f, maxUDPReply)
		})
	}
}

// maxUDPReply is the largest UDP reply any shipped Corefile may send,
// whatever buffer the query claims: a spoofed query is never answered
// with more than about 20 times its size.
const maxUDPReply = 1232

// hostileCount is how many packets of each kind are sent over UDP (a
// tenth of that over TCP, where each garbage packet costs a connection);
// MCS_DNS_HOSTILE_COUNT overrides it.
const hostileCount = 10_000

// hostileKind is one kind of query: pkt makes the i-th packet (its first
// two bytes are overwritten with a fresh ID when it has them); wellFormed
// kinds are valid queries for our zones, which must all be answered and
// never with SERVFAIL.
type hostileKind struct {
	name       string
	wellFormed bool
	// only, when set, is the one rcode every reply must carry.
	only int
	pkt  func(r *rand.Rand, i int) []byte
}

// inZone are names of every form the zone serves, and some it does not.
var inZone = []string{
	"web.demo.svc.clusterset.local.", "db.demo.svc.clusterset.local.",
	"db-0.east.db.demo.svc.clusterset.local.", "_http._tcp.web.demo.svc.clusterset.local.",
	"nothere.demo.svc.clusterset.local.", "demo.svc.clusterset.local.", "clusterset.local.",
	"x.y.z.db.demo.svc.clusterset.local.", "WeB.DeMo.SvC.ClUsTeRsEt.LoCaL.",
}

func query(name string, qtype, qclass uint16, edns int) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Question[0].Qclass = qclass
	if edns > 0 {
		m.SetEdns0(uint16(edns), false)
	}
	return m
}

func mustPack(m *dns.Msg) []byte {
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	return b
}

// longName is a name in clusterset.local of exactly n wire bytes, made of
// labels of at most 63 bytes.
func longName(n int) string {
	const suffix = "demo.svc.clusterset.local."
	left := n - (len(suffix) + 1) // wire length of suffix is len+1
	var b strings.Builder
	for left > 0 {
		l := min(63, left-1)
		if left-1-l == 1 { // a 0-byte label is not possible: shorten this one
			l--
		}
		b.WriteString(strings.Repeat("a", l) + ".")
		left -= l + 1
	}
	return b.String() + suffix
}

func hostileKinds() []hostileKind {
	classes := []uint16{dns.ClassCHAOS, dns.ClassHESIOD, dns.ClassNONE, 0, 2, 5, 254, 4096, 65535}
	return []hostileKind{
		{name: "valid", wellFormed: true, pkt: func(r *rand.Rand, i int) []byte {
			types := []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeTXT, dns.TypeMX, dns.TypeNS, dns.TypeSOA}
			return mustPack(query(inZone[i%len(inZone)], types[r.IntN(len(types))], dns.ClassINET, []int{0, 512, 1232, 4096, 65535}[r.IntN(5)]))
		}},
		// A spoofed query for the biggest answer there is, claiming the
		// largest buffer: the amplifier an off-path attacker looks for.
		{name: "big-65535", wellFormed: true, pkt: func(r *rand.Rand, i int) []byte {
			names := []string{"big.demo.svc.clusterset.local.", "_http._tcp.big.demo.svc.clusterset.local."}
			types := []uint16{dns.TypeA, dns.TypeANY, dns.TypeSRV}
			return mustPack(query(names[i%len(names)], types[r.IntN(len(types))], dns.ClassINET, 65535))
		}},
		{name: "class-not-IN", only: dns.RcodeRefused, pkt: func(r *rand.Rand, i int) []byte {
			return mustPack(query(inZone[i%len(inZone)], dns.TypeA, classes[r.IntN(len(classes))], 1232))
		}},
		{name: "opcode", only: dns.RcodeNotImplemented, pkt: func(r *rand.Rand, i int) []byte {
			m := query(inZone[i%len(inZone)], dns.TypeA, dns.ClassINET, 1232)
			m.Opcode = 1 + i%15
			return mustPack(m)
		}},
		{name: "ANY", wellFormed: true, pkt: func(_ *rand.Rand, i int) []byte {
			return mustPack(query(inZone[i%len(inZone)], dns.TypeANY, dns.ClassINET, 1232))
		}},
		{name: "unknown-type", wellFormed: true, pkt: func(r *rand.Rand, i int) []byte {
			return mustPack(query(inZone[i%len(inZone)], uint16(r.IntN(65536)), dns.ClassINET, 1232))
		}},
		{name: "edns-version-1", only: dns.RcodeBadVers, pkt: func(_ *rand.Rand, i int) []byte {
			m := query(inZone[i%len(inZone)], dns.TypeA, dns.ClassINET, 1232)
			m.IsEdns0().SetVersion(1)
			return mustPack(m)
		}},
		{name: "edns-malformed", pkt: func(r *rand.Rand, i int) []byte {
			m := query(inZone[i%len(inZone)], dns.TypeA, dns.ClassINET, 4096)
			switch i % 4 {
			case 0: // an option whose length runs past the end
				m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_LOCAL{Code: 65001, Data: []byte{1, 2, 3, 4}})
				b := mustPack(m)
				binary.BigEndian.PutUint16(b[len(b)-6:], uint16(1000+r.IntN(1000)))
				return b
			case 1: // two OPT records
				m.Extra = append(m.Extra, m.Extra[0])
				return mustPack(m)
			case 2: // OPT with an owner name other than the root
				m.IsEdns0().Hdr.Name = "evil.clusterset.local."
				return mustPack(m)
			default: // a client subnet option with a nonsense family and prefix
				m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: []byte{0, 9, 200, 200, 1}})
				return mustPack(m)
			}
		}},
		{name: "long-names", wellFormed: true, only: dns.RcodeNameError, pkt: func(r *rand.Rand, i int) []byte {
			var name string
			if i%2 == 0 {
				name = longName(255 - r.IntN(4))
			} else {
				name = strings.Repeat("b", 63) + "." + inZone[i%len(inZone)]
			}
			return mustPack(query(name, dns.TypeA, dns.ClassINET, 1232))
		}},
		{name: "name-over-255", only: dns.RcodeFormatError, pkt: func(_ *rand.Rand, i int) []byte {
			// Labels of 63 until the name is 256+ bytes; miekg/dns will not
			// pack it, so it is written by hand.
			b := []byte{0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}
			for range 4 + i%3 {
				b = append(b, 63)
				b = append(b, strings.Repeat("c", 63)...)
			}
			b = append(b, 10)
			b = append(b, "clusterset"...)
			b = append(b, 5)
			b = append(b, "local"...)
			return append(b, 0, 0, 1, 0, 1)
		}},
		{name: "compression-loop", pkt: func(_ *rand.Rand, i int) []byte {
			// The question name is a pointer to itself (or to the header).
			return []byte{0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, byte(12 - 12*(i%2)), 0, 1, 0, 1}
		}},
		{name: "truncated", pkt: func(r *rand.Rand, i int) []byte {
			b := mustPack(query(inZone[i%len(inZone)], dns.TypeA, dns.ClassINET, 4096))
			return b[:r.IntN(len(b))]
		}},
		{name: "garbage", pkt: func(r *rand.Rand, _ int) []byte {
			b := make([]byte, r.IntN(600))
			for j := range b {
				b[j] = byte(r.IntN(256))
			}
			return b
		}},
		{name: "response-bit", pkt: func(_ *rand.Rand, i int) []byte {
			m := query(inZone[i%len(inZone)], dns.TypeA, dns.ClassINET, 1232)
			m.Response = true
			return mustPack(m)
		}},
	}
}

// hostileStats is what one kind drew from the server.
type hostileStats struct {
	sent, replies, unparsable, servfail int
	rcodes                              map[int]int
	biggest                             int
}

func (s hostileStats) String() string {
	var rc []string
	for code, n := range s.rcodes {
		rc = append(rc, fmt.Sprintf("%s=%d", rcodeName(code), n))
	}
	return fmt.Sprintf("sent %d, replies %d (%s), unparsable %d, biggest %d B", s.sent, s.replies, strings.Join(rc, " "), s.unparsable, s.biggest)
}

func rcodeName(code int) string {
	if code == dns.RcodeBadVers { // shares 16 with BADSIG (TSIG)
		return "BADVERS"
	}
	if s, ok := dns.RcodeToString[code]; ok {
		return s
	}
	return strconv.Itoa(code)
}

func (s *hostileStats) reply(b []byte) {
	s.replies++
	s.biggest = max(s.biggest, len(b))
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		s.unparsable++
		return
	}
	if s.rcodes == nil {
		s.rcodes = map[int]int{}
	}
	s.rcodes[m.Rcode]++
	if m.Rcode == dns.RcodeServerFailure {
		s.servfail++
	}
}

// blastUDP sends n packets from one socket in bursts of 32 and collects
// whatever comes back.
func blastUDP(t *testing.T, addr string, n int, k hostileKind, r *rand.Rand) hostileStats {
	t.Helper()
	conn, err := net.Dial("udp", addr)
	require.NoError(t, err)
	defer conn.Close()
	var st hostileStats
	buf := make([]byte, 65535)
	drain := func(quiet time.Duration) {
		for {
			_ = conn.SetReadDeadline(time.Now().Add(quiet))
			m, err := conn.Read(buf)
			if err != nil {
				return
			}
			st.reply(buf[:m])
		}
	}
	for i := range n {
		b := k.pkt(r, i)
		if len(b) >= 2 {
			binary.BigEndian.PutUint16(b, uint16(i))
		}
		if _, err := conn.Write(b); err == nil {
			st.sent++
		}
		if i%32 == 31 {
			drain(20 * time.Millisecond)
		}
	}
	drain(500 * time.Millisecond)
	return st
}

// blastTCP sends n packets: well-formed ones pipelined on one connection
// (every reply read back), the rest each on its own connection.
func blastTCP(t *testing.T, addr string, n int, k hostileKind, r *rand.Rand) hostileStats {
	t.Helper()
	var st hostileStats
	if k.wellFormed {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		for i := 0; i < n; i += 64 {
			batch := min(64, n-i)
			for j := range batch {
				b := k.pkt(r, i+j)
				binary.BigEndian.PutUint16(b, uint16(i+j))
				frame := binary.BigEndian.AppendUint16(nil, uint16(len(b)))
				_, err := conn.Write(append(frame, b...))
				require.NoError(t, err)
				st.sent++
			}
			for range batch {
				_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				var l [2]byte
				_, err := io.ReadFull(conn, l[:])
				require.NoError(t, err, "reading a TCP reply")
				b := make([]byte, binary.BigEndian.Uint16(l[:]))
				_, err = io.ReadFull(conn, b)
				require.NoError(t, err)
				st.reply(b)
			}
		}
		return st
	}
	for i := range n {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		b := k.pkt(r, i)
		if len(b) >= 2 {
			binary.BigEndian.PutUint16(b, uint16(i))
		}
		frame := binary.BigEndian.AppendUint16(nil, uint16(len(b)))
		if i%2 == 1 { // a length prefix that promises more than comes
			binary.BigEndian.PutUint16(frame, uint16(len(b)+100))
		}
		if _, err := conn.Write(append(frame, b...)); err == nil {
			st.sent++
		}
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Millisecond))
		var l [2]byte
		if _, err := io.ReadFull(conn, l[:]); err == nil {
			b := make([]byte, binary.BigEndian.Uint16(l[:]))
			if _, err := io.ReadFull(conn, b); err == nil {
				st.reply(b)
			}
		}
		conn.Close()
	}
	return st
}

// rssKiB reads the resident set size of process pid.
func rssKiB(t *testing.T, pid int) int {
	rss, _, err := procs.RSS(pid)
	require.NoError(t, err)
	return int(rss / 1024)
}

// maxHostileLogLines bounds what a server may log for the whole matrix
// (about 250,000 packets): start-up and the odd error, not a line each.
const maxHostileLogLines = 50

func hostileMatrix(t *testing.T, srv *procs.CoreDNS, f *fixture, udpCap int) {
	r := rand.New(rand.NewPCG(1, 2))
	logBefore := strings.Count(srv.Output(), "\n")
	var rssWarm int
	count := hostileCount
	if s := os.Getenv("MCS_DNS_HOSTILE_COUNT"); s != "" {
		var err error
		count, err = strconv.Atoi(s)
		require.NoError(t, err, "MCS_DNS_HOSTILE_COUNT")
	}
	biggest := 0
	for n, k := range hostileKinds() {
		u := blastUDP(t, srv.Addr, count, k, r)
		biggest = max(biggest, u.biggest)
		tc := blastTCP(t, srv.Addr, count/10, k, r)
		t.Logf("%-17s udp: %s", k.name, u)
		t.Logf("%-17s tcp: %s", k.name, tc)
		require.False(t, srv.Exited(), "the server exited after %s packets:\n%s", k.name, srv.Output())
		if k.wellFormed {
			assert.Zero(t, u.servfail+tc.servfail, "%s: SERVFAIL for well-formed queries", k.name)
			// UDP may drop a few on a loaded machine; TCP may not.
			assert.GreaterOrEqual(t, u.replies, u.sent*95/100, "%s: UDP queries unanswered", k.name)
			assert.Equal(t, tc.sent, tc.replies, "%s: TCP queries unanswered", k.name)
			assert.Zero(t, u.unparsable+tc.unparsable, "%s: replies that do not parse", k.name)
		}
		if k.only != 0 {
			assert.Equal(t, u.replies, u.rcodes[k.only], "%s: UDP replies other than %s", k.name, rcodeName(k.only))
			assert.Equal(t, tc.replies, tc.rcodes[k.only], "%s: TCP replies other than %s", k.name, rcodeName(k.only))
		}
		assert.LessOrEqual(t, u.biggest, udpCap, "%s: UDP reply bigger than the server's cap", k.name)
		if n == 0 {
			rssWarm = rssKiB(t, srv.Cmd.Process.Pid)
		}
	}
	// Still serving, and serving the right answers.
	mcsAnswers(t, srv.Addr, f)
	rssEnd := rssKiB(t, srv.Cmd.Process.Pid)
	logLines := strings.Count(srv.Output(), "\n") - logBefore
	t.Logf("RSS after the first kind %d KiB, after all %d KiB; %d log lines; largest UDP reply %d B", rssWarm, rssEnd, logLines, biggest)
	assert.LessOrEqual(t, logLines, maxHostileLogLines, "log lines for the matrix:\n%s", tail(srv.Output(), 40))
	// Flat: garbage must not be kept. Generous against GC timing.
	assert.Less(t, rssEnd, rssWarm*3/2+32*1024, "RSS grew from %d to %d KiB", rssWarm, rssEnd)
}

func tail(s string, lines int) string {
	all := strings.Split(s, "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

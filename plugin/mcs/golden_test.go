package mcs

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"

	"bufio"
	"encoding/hex"
	"github.com/coredns/coredns/request"
	"os"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcs-dns/mcs-dns/internal/answers"
)

// goldenFile holds the replies of the fixture's names as the plugin sent
// them before answers were shaped (local-first, rotation, right-sizing;
// written by goldenReply at commit 9c1cdfa, and never to be rewritten):
// with `locality none` every reply that fitted then must stay the same,
// byte for byte; one that was truncated (TC) is now a subset without TC.
const goldenFile = "testdata/locality-none.golden"

// goldenQueries are the queries of the golden comparison: every name of
// the fixture with A, AAAA and SRV, without EDNS0, with 1232 and 4096
// octets, over TCP, on the packed path and the dns.Msg path.
func goldenQueries() []string {
	names := []string{
		"web.demo.svc.clusterset.local.", "_http._tcp.web.demo.svc.clusterset.local.",
		"dual.demo.svc.clusterset.local.", "dns.demo.svc.clusterset.local.", "_dns._udp.dns.demo.svc.clusterset.local.",
		"db.demo.svc.clusterset.local.", "_pg._tcp.db.demo.svc.clusterset.local.", "_metrics._tcp.db.demo.svc.clusterset.local.",
		"db-0.east.db.demo.svc.clusterset.local.", "fd00--7.west.eu.db.demo.svc.clusterset.local.",
		"big.demo.svc.clusterset.local.", "_http._tcp.big.demo.svc.clusterset.local.", "10-3-0-1.east.big.demo.svc.clusterset.local.",
		"long.demo.svc.clusterset.local.", "_http._tcp.long.demo.svc.clusterset.local.",
	}
	var out []string
	for _, n := range names {
		for _, t := range []string{"A", "AAAA", "SRV"} {
			for _, how := range []string{"udp", "udp1232", "udp4096", "tcp"} {
				for _, path := range []string{"packed", "msg"} {
					out = append(out, strings.Join([]string{n, t, how, path}, " "))
				}
			}
		}
	}
	return out
}

// goldenReply sends one golden query and returns the reply's bytes.
func goldenReply(t *testing.T, p *MCS, q string) []byte {
	t.Helper()
	f := strings.Fields(q)
	r := new(dns.Msg)
	r.SetQuestion(f[0], dns.StringToType[f[1]])
	r.Id = 4242
	switch f[2] {
	case "udp1232":
		r.SetEdns0(1232, false)
	case "udp4096":
		r.SetEdns0(4096, false)
	}
	var wrap func(dns.ResponseWriter) dns.ResponseWriter
	if f[3] == "msg" {
		wrap = func(w dns.ResponseWriter) dns.ResponseWriter { return passThrough{w} }
	}
	inner := &wire{}
	inner.TCP = f[2] == "tcp"
	serveTo(t, p, r, inner, wrap)
	b := inner.raw
	if b == nil {
		require.NotNil(t, inner.msg, q)
		var err error
		b, err = inner.msg.Pack()
		require.NoError(t, err, q)
	}
	// The SOA serial of negative replies is the time of the last change.
	serial := binary.BigEndian.AppendUint32(nil, p.index.Serial())
	return bytes.ReplaceAll(b, serial, []byte{0, 0, 0, 0})
}

// TestGoldenLocalityNone: with locality none, every reply the plugin sent
// before answers were shaped is sent the same, byte for byte, when it
// fitted; a reply that was truncated is now the largest subset that fits,
// without TC.
func TestGoldenLocalityNone(t *testing.T) {
	p := newTestMCS(t)
	t.Run("no options", func(t *testing.T) { goldenCompare(t, p) })
	t.Run("locality none with a cluster ID", func(t *testing.T) {
		// east is the source cluster of most of the fixture.
		goldenCompare(t, shapedTestMCS(t, &answers.Shaping{ClusterID: "east", Locality: answers.LocalityNone}))
	})
}

// shapedTestMCS is newTestMCS with answers shaped by sh.
func shapedTestMCS(t testing.TB, sh *answers.Shaping) *MCS {
	p := newMCS(&config{zones: []string{"clusterset.local.", "in-addr.arpa.", "ip6.arpa."}, ttl: 5, maxUDP: dns.MaxMsgSize}, nil)
	p.setNSAddrs([]net.IP{net.ParseIP("192.0.2.53"), net.ParseIP("2001:db8::53")})
	acfg := answers.Config{Zones: p.cfg.forwardZones(), TTL: 5, Shaping: sh}
	for _, f := range fixture() {
		p.index.Put(f.svc.Key(), answers.Build(f.svc, f.slices, acfg))
	}
	return p
}

func goldenCompare(t *testing.T, p *MCS) {
	f, err := os.Open(goldenFile)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		require.Len(t, fields, 5)
		q := strings.Join(fields[:4], " ")
		want, err := hex.DecodeString(fields[4])
		require.NoError(t, err)
		old := new(dns.Msg)
		require.NoError(t, old.Unpack(want), q)
		got := goldenReply(t, p, q)
		n++
		if !old.Truncated {
			assert.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got), q)
			continue
		}
		m := new(dns.Msg)
		require.NoError(t, m.Unpack(got), q)
		assert.False(t, m.Truncated, q)
		assert.Greater(t, len(m.Answer), len(old.Answer)/2, "%s: a subset of about the truncated size", q)
		assert.LessOrEqual(t, len(got), goldenLimit(fields[2]), q)
		assert.Equal(t, rrs(old.Answer)[:1], rrs(m.Answer)[:1], "%s: the same order", q)
	}
	require.NoError(t, sc.Err())
	assert.Equal(t, len(goldenQueries()), n)
}

func goldenLimit(how string) int {
	switch how {
	case "udp1232":
		return 1232
	case "udp4096":
		return 4096
	case "tcp":
		return dns.MaxMsgSize
	}
	return dns.MinMsgSize
}

// serveTo sends r to p through the server's ScrubWriter around inner
// (wrapped as plugins before ours would).
func serveTo(t *testing.T, p *MCS, r *dns.Msg, inner *wire, wrap func(dns.ResponseWriter) dns.ResponseWriter) {
	t.Helper()
	var w dns.ResponseWriter = request.NewScrubWriter(r, inner)
	if wrap != nil {
		w = wrap(w)
	}
	_, err := p.ServeDNS(context.Background(), w, r)
	require.NoError(t, err)
}

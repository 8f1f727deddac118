package mcs

import (
	"bufio"
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metrics"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkedCoreDNS is the CoreDNS version whose writers writers.go was
// checked against.
const checkedCoreDNS = "v1.15.0"

// recheck says what to look at when a CoreDNS upgrade breaks an
// assumption of the fast path.
const recheck = `re-check, in the CoreDNS source of the new version, what writers.go relies on:
  - plugin.NextOrFailure still wraps the writer in its pluginWriter, a pointer to a struct whose embedded field
    ResponseWriter is the writer it wraps, and whose Write passes the bytes on unchanged;
  - metrics.Recorder (prometheus plugin): Write passes bytes on and adds to Len; the plugin reports Recorder.Rcode;
  - request.ScrubWriter: Write passes bytes on (it scrubs only in WriteMsg);
  - core/dnsserver writers: only DoQWriter needs WriteMsg (it ends the QUIC stream there).
Then set checkedCoreDNS to the new version.`

// TestCoreDNSAssumptions pins the CoreDNS version go.mod requires: the
// fast path reads one unexported CoreDNS type (writers.go), so an upgrade
// must re-check it; this test fails until someone has.
func TestCoreDNSAssumptions(t *testing.T) {
	f, err := os.Open("../../go.mod")
	require.NoError(t, err)
	defer f.Close()
	version := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "github.com/coredns/coredns" {
			version = fields[1]
		}
		if len(fields) >= 2 && fields[0] == "replace" && fields[1] == "github.com/coredns/coredns" {
			t.Fatalf("go.mod replaces CoreDNS; %s", recheck)
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, version, "no CoreDNS requirement in go.mod")
	if version != checkedCoreDNS {
		t.Fatalf("go.mod requires CoreDNS %s; the packed fast path was checked against %s.\n%s", version, checkedCoreDNS, recheck)
	}

	// The shape the reflection in writers.go reads.
	require.NotNil(t, pluginWriterType, "plugin.NextOrFailure no longer wraps the writer, or not in a pointer to a struct with an embedded dns.ResponseWriter; %s", recheck)
	require.Equal(t, reflect.Pointer, pluginWriterType.Kind(), recheck)
	require.Equal(t, reflect.Struct, pluginWriterType.Elem().Kind(), recheck)
	field, ok := pluginWriterType.Elem().FieldByName("ResponseWriter")
	require.True(t, ok && field.Anonymous && field.Type == reflect.TypeFor[dns.ResponseWriter](),
		"NextOrFailure's writer embeds no dns.ResponseWriter; %s", recheck)
	require.Equal(t, field.Index, []int{pluginWriterField}, recheck)

	// And what it does: inner finds the wrapped writer, and bytes written
	// through it arrive unchanged.
	r := new(dns.Msg)
	r.SetQuestion("db.demo.svc.clusterset.local.", dns.TypeA)
	w := &wire{}
	scrub := request.NewScrubWriter(r, w)
	rec := metrics.NewRecorder(scrub)
	wrapped := front{}.wrap(rec)
	require.Same(t, rec, inner(wrapped), recheck)
	require.Same(t, scrub, inner(rec), recheck)
	require.True(t, rawWriter(wrapped), recheck)
	payload := []byte{0xbe, 0xef, 0x84, 0x00, 0, 0, 0, 0, 0, 0, 0, 0}
	n, err := wrapped.Write(payload)
	require.NoError(t, err)
	require.Equal(t, len(payload), n)
	require.Equal(t, payload, w.raw, "bytes through NextOrFailure's writer and the recorder; %s", recheck)
	require.Equal(t, len(payload), rec.Len, "the recorder counts bytes written; %s", recheck)
}

// responses sums the prometheus plugin's reply counter for rcode and its
// reply-size histogram (sample count and sum), over all label values.
func responses(t *testing.T, rcode string) (count, sizes, sizeSum float64) {
	t.Helper()
	families, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		switch mf.GetName() {
		case "coredns_dns_responses_total":
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "rcode" && l.GetValue() == rcode {
						count += m.GetCounter().GetValue()
					}
				}
			}
		case "coredns_dns_response_size_bytes":
			for _, m := range mf.GetMetric() {
				sizes += float64(m.GetHistogram().GetSampleCount())
				sizeSum += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return count, sizes, sizeSum
}

// TestPrometheusPluginCountsPacked: CoreDNS's own prometheus plugin, in
// front of mcs and of another plugin, counts the replies the fast path
// writes as bytes with their rcode and size.
func TestPrometheusPluginCountsPacked(t *testing.T) {
	p := newTestMCS(t)
	for _, chain := range []struct {
		name string
		next plugin.Handler
	}{{"prometheus-mcs", p}, {"prometheus-front-mcs", front{next: p}}} {
		m := metrics.New("")
		m.Next = chain.next
		for _, c := range []struct {
			name  string
			qtype uint16
			rcode string
		}{
			{"db.demo.svc.clusterset.local.", dns.TypeA, "NOERROR"},
			{"_pg._tcp.db.demo.svc.clusterset.local.", dns.TypeSRV, "NOERROR"},
			{"nothere.demo.svc.clusterset.local.", dns.TypeA, "NXDOMAIN"},
			{"db.demo.svc.clusterset.local.", dns.TypeTXT, "NOERROR"}, // NODATA
			{"10.0.96.10.in-addr.arpa.", dns.TypePTR, "NOERROR"},
		} {
			r := new(dns.Msg)
			r.SetQuestion(c.name, c.qtype)
			before, sizesBefore, sumBefore := responses(t, c.rcode)
			w := &wire{}
			_, err := m.ServeDNS(context.Background(), request.NewScrubWriter(r, w), r)
			require.NoError(t, err)
			require.NotNil(t, w.raw, "%s %s %s: not written as bytes; %s", chain.name, c.name, dns.TypeToString[c.qtype], recheck)
			after, sizesAfter, sumAfter := responses(t, c.rcode)
			assert.Equal(t, before+1, after, "%s %s: counted as %s", chain.name, c.name, c.rcode)
			assert.Equal(t, sizesBefore+1, sizesAfter, "%s %s: one reply size", chain.name, c.name)
			assert.Equal(t, sumBefore+float64(len(w.raw)), sumAfter, "%s %s: its size", chain.name, c.name)
		}
	}
}

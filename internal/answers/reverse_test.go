package answers

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseReversePrefix(t *testing.T) {
	for name, want := range map[string]string{
		"10.in-addr.arpa.":        "10.0.0.0/8",
		"96.10.in-addr.arpa.":     "10.96.0.0/16",
		"0.96.10.in-addr.arpa.":   "10.96.0.0/24",
		"255.0.10.in-addr.arpa.":  "10.0.255.0/24",
		"f.ip6.arpa.":             "f000::/4",
		"d.f.ip6.arpa.":           "fd00::/8",
		"1.0.0.0.0.d.f.ip6.arpa.": "fd00:10::/28",
	} {
		v6, prefix, bits, ok := parseReversePrefix(name)
		require.True(t, ok, name)
		var got netip.Prefix
		if v6 {
			got = netip.PrefixFrom(netip.AddrFrom16(prefix), bits)
		} else {
			got = netip.PrefixFrom(netip.AddrFrom4([4]byte(prefix[:4])), bits)
		}
		assert.Equal(t, want, got.String(), name)
	}
	for _, name := range []string{
		"in-addr.arpa.", "ip6.arpa.", "1.2.3.4.in-addr.arpa.", "01.10.in-addr.arpa.", "256.in-addr.arpa.",
		"a.10.in-addr.arpa.", ".10.in-addr.arpa.", "F.ip6.arpa.", "10.f.ip6.arpa.", "g.ip6.arpa.",
		"0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", // 32 nibbles: an address
		"10.example.", "web.demo.svc.clusterset.local.",
	} {
		_, _, _, ok := parseReversePrefix(name)
		assert.False(t, ok, name)
	}
}

// TestReverseENT: a partial reverse name exists while an address below it
// has PTR records, and stops existing once none has (after the snapshot
// has aged).
func TestReverseENT(t *testing.T) {
	ix := NewIndex(5)
	svc := &Service{Namespace: "demo", Name: "web", Type: ClusterSetIP,
		IPs: []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:10:96::b")}}
	ix.Put(svc.Key(), Build(svc, nil, Config{Zones: []string{"clusterset.local."}, TTL: 5}))
	for name, want := range map[string]bool{
		"10.in-addr.arpa.":          true,
		"96.10.in-addr.arpa.":       true,
		"0.96.10.in-addr.arpa.":     true,
		"1.96.10.in-addr.arpa.":     false,
		"97.10.in-addr.arpa.":       false,
		"9.in-addr.arpa.":           false,
		"11.in-addr.arpa.":          false,
		"d.f.ip6.arpa.":             true,
		"0.0.d.f.ip6.arpa.":         true,
		"0.1.0.0.0.0.d.f.ip6.arpa.": true,
		"1.0.0.d.f.ip6.arpa.":       false,
		"2.0.0.d.f.ip6.arpa.":       false,
		"e.f.ip6.arpa.":             false,
		"c.f.ip6.arpa.":             false,
		"10.0.96.10.in-addr.arpa.":  false, // the address itself: a PTR name, not an ENT
	} {
		assert.Equal(t, want, ix.IsReverseENT(name), name)
	}

	ix.Put(svc.Key(), nil)
	assert.True(t, ix.IsReverseENT("96.10.in-addr.arpa."), "the snapshot is at most reverseSnapshotAge old")
	ix.rev.snap.Load().taken = time.Now().Add(-reverseSnapshotAge)
	assert.False(t, ix.IsReverseENT("96.10.in-addr.arpa."))
	assert.False(t, ix.IsReverseENT("d.f.ip6.arpa."))
}

// TestReverseENTAllocs: asking a partial reverse name allocates nothing
// (once the snapshot is built).
func TestReverseENTAllocs(t *testing.T) {
	ix := NewIndex(5)
	svc := &Service{Namespace: "demo", Name: "web", Type: ClusterSetIP, IPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}}
	ix.Put(svc.Key(), Build(svc, nil, Config{Zones: []string{"clusterset.local."}, TTL: 5}))
	require.True(t, ix.IsReverseENT("96.10.in-addr.arpa."))
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		ix.IsReverseENT("96.10.in-addr.arpa.")
		ix.IsReverseENT("0.0.d.f.ip6.arpa.")
	}))
}

// FuzzParseReversePrefix: whatever parseReversePrefix accepts is the tail
// of the reverse name of its prefix's first address, one label per 8 (or
// 4) bits: the canonical form reverseName writes, nothing else.
func FuzzParseReversePrefix(f *testing.F) {
	for _, s := range []string{"96.10.in-addr.arpa.", "0.96.10.in-addr.arpa.", "d.f.ip6.arpa.", "01.10.in-addr.arpa.", "..in-addr.arpa.", "a.b.ip6.arpa."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		v6, prefix, bits, ok := parseReversePrefix(name)
		if !ok {
			return
		}
		var addr netip.Addr
		per := 8
		if v6 {
			addr, per = netip.AddrFrom16(prefix), 4
		} else {
			addr = netip.AddrFrom4([4]byte(prefix[:4]))
		}
		full := string(reverseName(nil, addr))
		suffix := ".in-addr.arpa."
		if v6 {
			suffix = ".ip6.arpa."
		}
		labels := strings.Count(strings.TrimSuffix(name, suffix), ".") + 1
		if !strings.HasSuffix(full, "."+name) || labels*per != bits {
			t.Fatalf("%q parsed as %v/%d; the address's reverse name is %q", name, addr, bits, full)
		}
	})
}

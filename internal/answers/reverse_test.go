package answers

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

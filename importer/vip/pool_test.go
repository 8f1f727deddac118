package vip

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

var (
	v4 = []corev1.IPFamily{corev1.IPv4Protocol}
	v6 = []corev1.IPFamily{corev1.IPv6Protocol}
	t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func mustPool(t *testing.T, cidrs ...string) *Pool {
	p, err := ParsePool(cidrs)
	require.NoError(t, err)
	return p
}

func TestParsePool(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		errPart string
	}{
		{[]string{"10.250.0.0/16"}, ""},
		{[]string{"10.250.0.0/16", "fd00:250::/112"}, ""},
		{nil, "no ClusterSet CIDR"},
		{[]string{"10.250.0.1/16"}, "host bits"},
		{[]string{"banana"}, "banana"},
		{[]string{"10.0.0.0/8", "10.1.0.0/16"}, "at most one CIDR per IP family"},
		{[]string{"10.0.0.0/31"}, "too small"},
		{[]string{"::ffff:10.0.0.0/120"}, "IPv4-mapped"},
	} {
		_, err := ParsePool(tc.in)
		if tc.errPart == "" {
			require.NoError(t, err, tc.in)
		} else {
			require.ErrorContains(t, err, tc.errPart, tc.in)
		}
	}
}

func TestChooseDeterministicAndInPool(t *testing.T) {
	p := mustPool(t, "10.250.0.0/16", "fd00:250::/112")
	a, missing, err := p.Choose("ns/web", []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, nil)
	require.NoError(t, err)
	require.Empty(t, missing)
	require.Len(t, a, 2)
	require.True(t, a[0].Is4() && p.Contains(a[0]))
	require.True(t, a[1].Is6() && p.Contains(a[1]))
	b, _, _ := p.Choose("ns/web", []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, nil)
	require.Equal(t, a, b, "two importers that never talked pick the same first candidate")
	c, _, _ := p.Choose("ns/other", v4, nil)
	require.NotEqual(t, a[0], c[0])
}

func TestChooseKeepsExistingClaim(t *testing.T) {
	p := mustPool(t, "10.250.0.0/16")
	claims := []Claim{{Key: "ns/web", IPs: addrs("10.250.9.9"), Since: t0}}
	ips, _, err := p.Choose("ns/web", v4, claims)
	require.NoError(t, err)
	require.Equal(t, addrs("10.250.9.9"), ips)
}

func TestChooseSkipsOthersClaims(t *testing.T) {
	p := mustPool(t, "10.250.0.0/16")
	first, _, _ := p.Choose("ns/web", v4, nil)
	claims := []Claim{{Key: "ns/squatter", IPs: first, Since: t0}}
	ips, _, err := p.Choose("ns/web", v4, claims)
	require.NoError(t, err)
	require.NotEqual(t, first, ips)
}

// Two racing importers gave the same address to two imports: the earlier
// claim keeps it and the other moves; both importers compute the same.
func TestChooseResolvesDuplicateByAge(t *testing.T) {
	p := mustPool(t, "10.250.0.0/16")
	dup := addrs("10.250.1.1")
	claims := []Claim{
		{Key: "ns/b", IPs: dup, Since: t0.Add(time.Second)},
		{Key: "ns/a", IPs: dup, Since: t0},
	}
	a, _, err := p.Choose("ns/a", v4, claims)
	require.NoError(t, err)
	require.Equal(t, dup, a)
	b, _, err := p.Choose("ns/b", v4, claims)
	require.NoError(t, err)
	require.NotEqual(t, dup, b)
	// Same age: the smaller key wins.
	claims[0].Since = t0
	b2, _, _ := p.Choose("ns/b", v4, claims)
	require.NotEqual(t, dup, b2)
}

func TestChooseExhausted(t *testing.T) {
	p := mustPool(t, "10.250.0.0/30") // two usable addresses: .1 and .2
	var claims []Claim
	for i := range 2 {
		key := fmt.Sprintf("ns/s%d", i)
		ips, _, err := p.Choose(key, v4, claims)
		require.NoError(t, err)
		claims = append(claims, Claim{Key: key, IPs: ips, Since: t0})
	}
	require.ElementsMatch(t, addrs("10.250.0.1", "10.250.0.2"), append(claims[0].IPs, claims[1].IPs...))
	_, _, err := p.Choose("ns/s2", v4, claims)
	require.ErrorIs(t, err, ErrExhausted)
	// The others keep theirs.
	ips, _, err := p.Choose("ns/s0", v4, claims)
	require.NoError(t, err)
	require.Equal(t, claims[0].IPs, ips)
}

func TestChooseMissingFamily(t *testing.T) {
	p := mustPool(t, "10.250.0.0/16")
	ips, missing, err := p.Choose("ns/web", []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, nil)
	require.NoError(t, err)
	require.Equal(t, v6, missing)
	require.Len(t, ips, 1)
	require.True(t, ips[0].Is4())
	p6 := mustPool(t, "fd00:250::/120")
	ips, _, err = p6.Choose("ns/web", nil, nil)
	require.NoError(t, err)
	require.True(t, ips[0].Is6())
}

func TestNthSkipsNetworkAndBroadcast(t *testing.T) {
	p := mustPool(t, "10.250.0.0/30")
	seen := map[netip.Addr]bool{}
	var claims []Claim
	for i := range 2 {
		key := fmt.Sprintf("k%d", i)
		ips, _, err := p.Choose(key, v4, claims)
		require.NoError(t, err)
		seen[ips[0]] = true
		claims = append(claims, Claim{Key: key, IPs: ips, Since: t0})
	}
	require.False(t, seen[netip.MustParseAddr("10.250.0.0")])
	require.False(t, seen[netip.MustParseAddr("10.250.0.3")])
}

func BenchmarkChoose2000Claims(b *testing.B) {
	p, _ := ParsePool([]string{"10.250.0.0/16"})
	var claims []Claim
	for i := range 2000 {
		key := fmt.Sprintf("ns/s%d", i)
		ips, _, _ := p.Choose(key, v4, claims)
		claims = append(claims, Claim{Key: key, IPs: ips, Since: t0})
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _, _ = p.Choose("ns/new", v4, claims)
	}
}

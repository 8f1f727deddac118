package answers

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcs-dns/mcs-dns/internal/dnswire"
)

func vip(ns, name, ip string) *Set {
	return Build(&Service{Namespace: ns, Name: name, Type: ClusterSetIP, IPs: ips(ip)}, nil, cfg)
}

func TestIndexPutReplaceDelete(t *testing.T) {
	ix := NewIndex(5)
	a, b := vip("demo", "a", "10.96.0.1"), vip("demo", "b", "10.96.0.2")
	assert.Nil(t, ix.Put(a.Key(), a))
	assert.Nil(t, ix.Put(b.Key(), b))
	assert.Same(t, a, ix.Service("a.demo"))
	assert.True(t, ix.HasNamespace("demo"))
	assert.False(t, ix.HasNamespace("other"))
	assert.Equal(t, int64(2), ix.Imports(ClusterSetIP))

	// Replacing a touches nothing of b.
	a2 := vip("demo", "a", "10.96.0.3")
	assert.Same(t, a, ix.Put(a.Key(), a2))
	assert.Same(t, b, ix.Service("b.demo"))
	assert.Nil(t, ix.PTR("1.0.96.10.in-addr.arpa."), "old VIP's PTR is gone")
	require.Len(t, ix.PTR("3.0.96.10.in-addr.arpa."), 1)
	assert.Equal(t, "a.demo.svc.clusterset.local.", ix.PTR("3.0.96.10.in-addr.arpa.")[0].(*dns.PTR).Ptr)

	ix.Put(a.Key(), nil)
	ix.Put(b.Key(), nil)
	assert.Nil(t, ix.Service("a.demo"))
	assert.False(t, ix.HasNamespace("demo"), "namespace without services does not exist")
	assert.Nil(t, ix.PTR("2.0.96.10.in-addr.arpa."))
	assert.Equal(t, int64(0), ix.Imports(ClusterSetIP))
}

func TestIndexPTRSharedIP(t *testing.T) {
	ix := NewIndex(5)
	a, b := vip("demo", "a", "10.96.0.1"), vip("other", "b", "10.96.0.1")
	ix.Put(a.Key(), a)
	ix.Put(b.Key(), b)
	rev := "1.0.96.10.in-addr.arpa."
	require.Len(t, ix.PTR(rev), 2)
	ix.Put(a.Key(), nil)
	require.Len(t, ix.PTR(rev), 1)
	assert.Equal(t, "b.other.svc.clusterset.local.", ix.PTR(rev)[0].(*dns.PTR).Ptr)
	assert.Equal(t, uint32(5), ix.PTR(rev)[0].Header().Ttl)
}

func TestIndexEndpointsCount(t *testing.T) {
	ix := NewIndex(5)
	svc, sl := headless()
	s := Build(svc, sl, cfg)
	ix.Put(s.Key(), s)
	assert.Equal(t, int64(3), ix.Endpoints())
	assert.Equal(t, int64(1), ix.Imports(Headless))
	ix.Put(s.Key(), nil)
	assert.Equal(t, int64(0), ix.Endpoints())
}

// TestIndexConcurrent runs writers and readers together; with -race it
// proves queries need no locks.
func TestIndexConcurrent(t *testing.T) {
	ix := NewIndex(5)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 2 {
		wg.Go(func() {
			for i := range 2000 {
				s := vip("demo", fmt.Sprintf("s%d", i%50), fmt.Sprintf("10.96.%d.%d", w, i%50+1))
				if i%7 == 0 {
					ix.Put(s.Key(), nil)
				} else {
					ix.Put(s.Key(), s)
				}
			}
		})
	}
	for range 2 {
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := range 50 {
					if s := ix.Service(fmt.Sprintf("s%d.demo", i)); s != nil {
						n := s.Lookup(0, "")
						if a, _ := n.Records(dns.TypeA); len(a) != 1 {
							panic("torn set")
						}
					}
					_ = ix.PTR(fmt.Sprintf("%d.0.96.10.in-addr.arpa.", i+1))
					_ = ix.HasNamespace("demo")
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
}

func benchIndexUpdate(b *testing.B, services int) {
	ix := NewIndex(5)
	for i := range services {
		s := vip(fmt.Sprintf("ns%d", i%100), fmt.Sprintf("svc%d", i), fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
		ix.Put(s.Key(), s)
	}
	svc, sl := headless()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s := Build(svc, sl, cfg)
		if i%2 == 0 {
			ix.Put(s.Key(), s)
		} else {
			ix.Put(s.Key(), nil)
		}
	}
}

// BenchmarkIndexUpdate is one service's rebuild and publish; its cost must
// not grow with the number of services already in the index.
func BenchmarkIndexUpdate(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) { benchIndexUpdate(b, n) })
	}
}

func TestIndexPTRSharedByThree(t *testing.T) {
	ix := NewIndex(5)
	rev := "7.0.96.10.in-addr.arpa."
	targets := func() []string {
		var out []string
		for _, rr := range ix.PTR(rev) {
			out = append(out, rr.(*dns.PTR).Ptr)
			assert.Equal(t, rev, rr.Header().Name)
		}
		return out
	}
	c, a, b := vip("demo", "c", "10.96.0.7"), vip("demo", "a", "10.96.0.7"), vip("demo", "b", "10.96.0.7")
	ix.Put(c.Key(), c)
	ix.Put(a.Key(), a)
	ix.Put(b.Key(), b)
	assert.Equal(t, []string{"a.demo.svc.clusterset.local.", "b.demo.svc.clusterset.local.", "c.demo.svc.clusterset.local."}, targets(), "by service key")
	// Replacing one owner keeps the others.
	b2 := vip("demo", "b", "10.96.0.7")
	ix.Put(b2.Key(), b2)
	assert.Equal(t, []string{"a.demo.svc.clusterset.local.", "b.demo.svc.clusterset.local.", "c.demo.svc.clusterset.local."}, targets())
	ix.Put(a.Key(), nil)
	assert.Equal(t, []string{"b.demo.svc.clusterset.local.", "c.demo.svc.clusterset.local."}, targets())
	ix.Put(c.Key(), vip("demo", "c", "10.96.0.8"))
	assert.Equal(t, []string{"b.demo.svc.clusterset.local."}, targets())
	assert.True(t, ix.HasPTR(rev))
	ix.Put(a.Key(), a)
	assert.Equal(t, []string{"a.demo.svc.clusterset.local.", "b.demo.svc.clusterset.local."}, targets())
	ix.Put(a.Key(), nil)
	ix.Put(b.Key(), nil)
	assert.Nil(t, ix.PTR(rev))
	assert.False(t, ix.HasPTR(rev))
	assert.Empty(t, ix.multi)
	assert.Equal(t, []string{"c.demo.svc.clusterset.local."}, func() []string {
		var out []string
		for _, rr := range ix.PTR("8.0.96.10.in-addr.arpa.") {
			out = append(out, rr.(*dns.PTR).Ptr)
		}
		return out
	}())
}

// TestIndexPTRZonedAddress: an IPv6 zone is not part of the reverse name,
// so a zoned and an unzoned address are one PTR entry, with one
// bookkeeping (compact rejects zoned addresses; the Index holds anyway).
func TestIndexPTRZonedAddress(t *testing.T) {
	ix := NewIndex(5)
	a := Build(&Service{Namespace: "ns", Name: "a", Type: ClusterSetIP, IPs: ips("fe80::1%eth0")}, nil, cfg)
	b := Build(&Service{Namespace: "ns", Name: "b", Type: ClusterSetIP, IPs: ips("fe80::1")}, nil, cfg)
	ix.Put(a.Key(), a)
	ix.Put(b.Key(), b)
	rev := string(dnswire.AppendReverse(nil, netip.MustParseAddr("fe80::1")))
	assert.Len(t, ix.PTR(rev), 2)
	ix.Put(a.Key(), nil)
	ix.Put(b.Key(), nil)
	assert.Nil(t, ix.PTR(rev))
	assert.Empty(t, ix.multi)
}

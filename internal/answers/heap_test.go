package answers

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
)

// TestHeapAtScale reports the live heap of an Index holding 2,000
// headless services of 50 endpoints each (one named port, hostnames on
// half of them) plus 2,000 ClusterSetIP services (two named ports, as in
// the make bench fixture), and of 20,000 ClusterSetIP services alone. Run with
// MCS_HEAP=1 go test -run TestHeapAtScale -v ./internal/answers/.
func TestHeapAtScale(t *testing.T) {
	if os.Getenv("MCS_HEAP") == "" {
		t.Skip("set MCS_HEAP=1 to measure")
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	t.Run("headless", func(t *testing.T) { measureHeap(t, heap, 2000, 50, 2000) })
	t.Run("clustersetip", func(t *testing.T) { measureHeap(t, heap, 0, 0, 20000) })
}

func measureHeap(t *testing.T, heap func() uint64, nSvc, nEp, nVIP int) {
	type input struct {
		svc    *Service
		slices []*Slice
	}
	inputs := make([]input, 0, nSvc+nVIP)
	for i := range nSvc {
		svc := &Service{Namespace: fmt.Sprintf("ns%d", i%100), Name: fmt.Sprintf("hl%d", i), Type: Headless,
			Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}}}
		sl := &Slice{Name: fmt.Sprintf("hl%d-abcde", i), ClusterID: "cluster-a"}
		for j := range nEp {
			ep := Endpoint{Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), byte(j)})}}
			if j%2 == 0 {
				ep.Hostname = fmt.Sprintf("pod-%d", j)
			}
			sl.Endpoints = append(sl.Endpoints, ep)
		}
		inputs = append(inputs, input{svc, []*Slice{sl}})
	}
	for i := range nVIP {
		inputs = append(inputs, input{svc: &Service{Namespace: fmt.Sprintf("ns%d", i%100), Name: fmt.Sprintf("vip%d", i), Type: ClusterSetIP,
			IPs:   []netip.Addr{netip.AddrFrom4([4]byte{172, 20, byte(i >> 8), byte(i)})},
			Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}, {Name: "grpc", Protocol: "tcp", Port: 9090}}}})
	}
	if os.Getenv("MCS_HEAP_PROFILE") != "" {
		runtime.MemProfileRate = 1
	}
	before := heap()
	ix := NewIndex(5)
	c := Config{Zones: []string{"clusterset.local."}, TTL: 5}
	for _, in := range inputs {
		ix.Put(in.svc.Key(), Build(in.svc, in.slices, c))
	}
	after := heap()
	t.Logf("index heap: %.1f MiB for %d headless x %d endpoints + %d ClusterSetIP (%.0f B per endpoint or VIP)",
		float64(after-before)/(1<<20), nSvc, nEp, nVIP, float64(after-before)/float64(nSvc*nEp+nVIP))
	if f := os.Getenv("MCS_HEAP_PROFILE"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		_ = pprof.WriteHeapProfile(out)
		_ = out.Close()
	}
	runtime.KeepAlive(ix)
	runtime.KeepAlive(inputs)
}

// BenchmarkLookup measures a name look-up in a small (ClusterSetIP) set.
func BenchmarkLookup(b *testing.B) {
	svc := &Service{Namespace: "demo", Name: "web", Type: ClusterSetIP, IPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}, {Name: "grpc", Protocol: "tcp", Port: 9090}}}
	s := Build(svc, nil, Config{Zones: []string{"clusterset.local."}, TTL: 5})
	for _, prefix := range []string{"", "_grpc._tcp", "nothere"} {
		b.Run("prefix="+prefix, func(b *testing.B) {
			for b.Loop() {
				_ = s.Lookup(0, prefix)
			}
		})
	}
}

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
// half of them) plus 2,000 ClusterSetIP services. Run with
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
	const nSvc, nEp = 2000, 50
	type input struct {
		svc    *Service
		slices []*Slice
	}
	inputs := make([]input, 0, 2*nSvc)
	for i := range nSvc {
		svc := &Service{Namespace: fmt.Sprintf("ns%d", i%100), Name: fmt.Sprintf("hl%d", i), Type: Headless,
			Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}}}
		sl := &Slice{Name: fmt.Sprintf("hl%d-abcde", i), ClusterID: "cluster-a"}
		for j := range nEp {
			ep := Endpoint{Ready: true, Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), byte(j)})}}
			if j%2 == 0 {
				ep.Hostname = fmt.Sprintf("pod-%d", j)
			}
			sl.Endpoints = append(sl.Endpoints, ep)
		}
		inputs = append(inputs, input{svc, []*Slice{sl}})
		inputs = append(inputs, input{svc: &Service{Namespace: fmt.Sprintf("ns%d", i%100), Name: fmt.Sprintf("vip%d", i), Type: ClusterSetIP,
			IPs:   []netip.Addr{netip.AddrFrom4([4]byte{172, 20, byte(i >> 8), byte(i)})},
			Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}}}})
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
	t.Logf("index heap: %.1f MiB for %d headless x %d endpoints + %d ClusterSetIP (%.0f B per endpoint)",
		float64(after-before)/(1<<20), nSvc, nEp, nSvc, float64(after-before)/float64(nSvc*nEp))
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

package answers

import (
	"fmt"
	"net/netip"
	"testing"
)

// BenchmarkBuild measures building one service's answers: what start-up
// pays per service after the initial lists, and every change per service.
func BenchmarkBuild(b *testing.B) {
	cfg := Config{Zones: []string{"clusterset.local."}, TTL: 5}
	ports := []Port{{Name: "http", Protocol: "tcp", Port: 80}, {Name: "metrics", Protocol: "tcp", Port: 9090}}
	vip := &Service{Namespace: "ns1", Name: "svc-1234", Type: ClusterSetIP, IPs: []netip.Addr{netip.MustParseAddr("10.250.4.210")}, Ports: ports}
	headless := &Service{Namespace: "ns1", Name: "db-12", Type: Headless, Ports: ports[:1]}
	var slices []*Slice
	for c, cluster := range []string{"east", "west"} {
		sl := &Slice{Name: "db-12-" + cluster, ClusterID: cluster}
		for i := range 25 {
			sl.Endpoints = append(sl.Endpoints, Endpoint{Hostname: fmt.Sprintf("db-12-%d", i),
				Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, byte(c + 1), 12, byte(i + 1)})}})
		}
		slices = append(slices, sl)
	}
	b.Run("ClusterSetIP", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if Build(vip, nil, cfg) == nil {
				b.Fatal("no set")
			}
		}
	})
	b.Run("Headless-50", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if Build(headless, slices, cfg) == nil {
				b.Fatal("no set")
			}
		}
	})
	// One large service: building it must cost time linear in its
	// endpoints (each change to any of its slices rebuilds all of it).
	for _, n := range []int{1000, 16000} {
		big := &Service{Namespace: "ns1", Name: "big", Type: Headless, Ports: ports[:1]}
		sl := &Slice{Name: "big-east", ClusterID: "east"}
		for i := range n {
			sl.Endpoints = append(sl.Endpoints, Endpoint{
				Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)})}})
		}
		b.Run(fmt.Sprintf("Headless-%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if Build(big, []*Slice{sl}, cfg) == nil {
					b.Fatal("no set")
				}
			}
		})
	}
}

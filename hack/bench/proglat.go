package main

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miekg/dns"
)

// ProgLat is the DNS programming latency of one server.
type ProgLat struct {
	Server   string    `json:"server"`
	N        int       `json:"updates"`
	Timeouts int       `json:"timeouts"`
	P50Ms    float64   `json:"p50_ms"`
	P99Ms    float64   `json:"p99_ms"`
	MaxMs    float64   `json:"max_ms"`
	Samples  []float64 `json:"samples_ms"`
}

// MeasureProgLat updates EndpointSlices (flips the address of one endpoint,
// then flips it back, so the fixture is unchanged afterwards) and, for
// each update, times from the API's acknowledgement to the new address
// being served for that endpoint's name by every server, polling in a
// tight loop.
func MeasureProgLat(ctx context.Context, l *Loader, s Sizes, servers []*Server, updates int, timeout time.Duration) (map[string]*ProgLat, error) {
	out := map[string]*ProgLat{}
	for _, srv := range servers {
		out[srv.ID] = &ProgLat{Server: srv.ID}
	}
	if s.Headless == 0 {
		return out, fmt.Errorf("no headless services to update")
	}
	flipBase := netip.MustParseAddr("172.16.0.0")
	pairs := (updates + 1) / 2
	for p := 0; p < pairs; p++ {
		j := (p * 7) % s.Headless
		ns, name := s.hlNS(j), sliceName(j, 0, 0)
		sl, err := l.Kube.DiscoveryV1().EndpointSlices(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return out, err
		}
		orig := s.epIP(j, 0, 0)
		for _, ip := range []netip.Addr{addrAdd(flipBase, uint32(p+1)), orig} {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			sl.Endpoints[0].Addresses = []string{ip.String()}
			sl, err = l.Kube.DiscoveryV1().EndpointSlices(ns).Update(ctx, sl, metav1.UpdateOptions{})
			if err != nil {
				return out, err
			}
			acked := time.Now()
			qname := s.epFQDN(j, 0, 0)
			var wg sync.WaitGroup
			for _, srv := range servers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					d, ok := pollFor(ctx, srv.Addr(), qname, ip.String(), acked, timeout)
					pl := out[srv.ID]
					pl.N++
					if !ok {
						pl.Timeouts++
						return
					}
					pl.Samples = append(pl.Samples, float64(d.Microseconds())/1000)
				}()
			}
			wg.Wait()
			_ = waitCtx(ctx, 5*time.Millisecond)
		}
	}
	for _, pl := range out {
		ds := make([]time.Duration, len(pl.Samples))
		for i, v := range pl.Samples {
			ds[i] = time.Duration(v * float64(time.Millisecond))
		}
		pl.P50Ms = ms(percentileDur(ds, 0.50))
		pl.P99Ms = ms(percentileDur(ds, 0.99))
		pl.MaxMs = ms(percentileDur(ds, 1))
	}
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pollFor asks name A until the answer is exactly want.
func pollFor(ctx context.Context, addr, name, want string, since time.Time, timeout time.Duration) (time.Duration, bool) {
	c := &dns.Client{Net: "udp", Timeout: 100 * time.Millisecond, UDPSize: 4096}
	m := newMsg(name, dns.TypeA)
	for time.Since(since) < timeout && ctx.Err() == nil {
		r, _, err := c.Exchange(m, addr)
		if err == nil && len(r.Answer) == 1 {
			if a, ok := r.Answer[0].(*dns.A); ok && a.A.String() == want {
				return time.Since(since), true
			}
		}
	}
	return 0, false
}

package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcs-dns/mcs-dns/test/netcut"
	"github.com/mcs-dns/mcs-dns/test/procs"
	"github.com/mcs-dns/mcs-dns/test/stack"
)

// SlowMemberResult is the member-scale churn run again with the last
// member reached through a proxy that delays every chunk each way: what
// the others see must not move with it.
type SlowMemberResult struct {
	NotDone string `json:"not_done,omitempty"`
	// DelayMs is the proxy's delay each way (a round trip takes twice it).
	DelayMs float64 `json:"delay_ms"`
	Changes int     `json:"changes"`
	// Others*: a change to the farthest of the other members, with the
	// slow member in the clusterset; Base*: the same over the same
	// members in the plain churn, before.
	OthersP50Ms float64 `json:"others_p50_ms"`
	OthersP99Ms float64 `json:"others_p99_ms"`
	BaseP50Ms   float64 `json:"base_p50_ms"`
	BaseP99Ms   float64 `json:"base_p99_ms"`
	// Slow*: a change to the slow member itself.
	SlowP50Ms float64 `json:"slow_p50_ms"`
	SlowP99Ms float64 `json:"slow_p99_ms"`
	Unseen    int     `json:"unseen"`
}

// churnRate is the churn's changes per second at m members:
// MemberChurnRate, lowered where that would ask more than
// MemberChurnWrites mirrored-slice writes a second of the clusterset
// (each change is one write into every member). Above the API servers'
// write capacity the backlog, not the importer, sets the latency.
func (b *Bench) churnRate(m int) float64 {
	r := b.Opt.MemberChurnRate
	if w := b.Opt.MemberChurnWrites; w > 0 && r*float64(m) > w {
		r = w / float64(m)
	}
	return r
}

// churn makes n endpoint changes at rate a second, each one address of
// a source slice of member pick() set to a new address (numbered from
// offset, so that runs do not reuse one), and tells churn when each was
// acknowledged.
func (b *Bench) churn(ctx context.Context, loaders []*Loader, churn *churnSeen, n, offset int, rate float64, pick func() int) error {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(offset)))
	tick := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	for k := offset; k < offset+n; k++ {
		next = next.Add(tick)
		if err := waitCtx(ctx, time.Until(next)); err != nil {
			return err
		}
		i := pick()
		_, slices := scaleSources(i)
		s := slices[rng.IntN(len(slices))]
		addr := fmt.Sprintf("10.250.%d.%d", k/250, 1+k%250)
		cur, err := loaders[i].Kube.DiscoveryV1().EndpointSlices(scaleNS).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Endpoints[0].Addresses = []string{addr}
		if _, err := loaders[i].Kube.DiscoveryV1().EndpointSlices(scaleNS).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return err
		}
		churn.expect(addr, time.Now())
	}
	return nil
}

// slowMember runs the churn again with a fresh importer that reaches the
// last member through a delaying proxy (MemberSlowDelay each way); the
// changes are made in the other members, so the slow member is only a
// destination. Writes go to the members in parallel, each under its own
// timeout: the others' latency should stay where it was.
func (b *Bench) slowMember(ctx context.Context, st *stack.Stack, loaders []*Loader, churn *churnSeen, m int, rng *rand.Rand) (*SlowMemberResult, error) {
	r := &SlowMemberResult{DelayMs: ms(b.Opt.MemberSlowDelay)}
	slow := st.Set.Clusters[m-1]
	p, err := netcut.StartDelayed(strings.TrimPrefix(strings.TrimSuffix(slow.Config.Host, "/"), "https://"), b.Opt.MemberSlowDelay)
	if err != nil {
		return r, err
	}
	defer p.Close()
	kc, err := clientcmd.LoadFromFile(st.Kubeconfig)
	if err != nil {
		return r, err
	}
	kc.Clusters[kc.Contexts[slow.Name].Cluster].Server = "https://" + p.Addr()
	path := filepath.Join(b.Out, "run", fmt.Sprintf("kubeconfig.scale%d-slow", m))
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return r, err
	}
	port, err := procs.FindFreePort()
	if err != nil {
		return r, err
	}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	args := st.ImporterArgs(fmt.Sprintf("127.0.0.1:%d", port), "--endpointslice-managers", scaleSourceManager)
	args.Kubeconfig = path
	args.Extra = append(args.Extra, strings.Fields(b.Opt.ImporterArgs)...)
	imp, err := b.startImporter(st, fmt.Sprintf("mcs-importer.scale%d-slow", m), args)
	if err != nil {
		return r, err
	}
	defer children.Stop(imp)
	// It finds everything written already: once every member is up and it
	// is quiet, every member is joined and up to date.
	if err := waitMembersUp(ctx, metricsURL, m, 5*time.Minute); err != nil {
		return r, err
	}
	if _, _, err := waitImporterQuiet(ctx, metricsURL, 3*time.Second, 5*time.Minute); err != nil {
		return r, err
	}
	churn.reset()
	rate := b.churnRate(m)
	n := int(rate * b.Opt.MemberChurn.Seconds())
	if err := b.churn(ctx, loaders, churn, n, 2*n, rate, func() int { return rng.IntN(m - 1) }); err != nil {
		return r, err
	}
	_, r.Unseen = churn.wait(ctx, 30*time.Second)
	others, own, _ := churn.split(m - 1)
	r.Changes = n
	r.OthersP50Ms, r.OthersP99Ms = ms(percentileDur(others, 0.5)), ms(percentileDur(others, 0.99))
	r.SlowP50Ms, r.SlowP99Ms = ms(percentileDur(own, 0.5)), ms(percentileDur(own, 0.99))
	logf("member scale %d, one member slowed by %s each way: %d changes, the others' farthest p50 %.0f ms p99 %.0f ms, the slow member p50 %.0f ms p99 %.0f ms, %d unseen",
		m, b.Opt.MemberSlowDelay, n, r.OthersP50Ms, r.OthersP99Ms, r.SlowP50Ms, r.SlowP99Ms, r.Unseen)
	if imp.Exited() {
		return r, fmt.Errorf("mcs-importer exited: %s", lastLines(imp.Output(), 3))
	}
	return r, nil
}

// waitMembersUp polls the importer's metrics until n members are up
// (mcs_importer_member_state{state="up"} is 1 for n series).
func waitMembersUp(ctx context.Context, url string, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	up := 0
	for {
		if body, err := get(ctx, url); err == nil {
			up = 0
			for _, line := range strings.Split(body, "\n") {
				if strings.HasPrefix(line, "mcs_importer_member_state{") && strings.Contains(line, `state="up"`) && strings.HasSuffix(line, " 1") {
					up++
				}
			}
			if up >= n {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d members up after %s", up, n, limit)
		}
		if err := waitCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// get returns the body of a GET of url.
func get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

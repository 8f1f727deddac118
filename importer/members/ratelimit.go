package members

import (
	"context"
	"net/http"
	"sync/atomic"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Without API Priority and Fairness on a member's API server, its clients
// are limited to what the importer used by default before it relied on
// APF.
const (
	fallbackQPS   = 100
	fallbackBurst = 200
)

// apfLimiter is a member's client-side limit when the operator sets none.
// An API server with API Priority and Fairness (on by default, GA since
// Kubernetes 1.29) queues and sheds load itself, and controllers now run
// without a client-side limiter against it; one started with
// --enable-priority-and-fairness=false gets a token bucket instead. Until
// a response shows which (the first requests are the start-up discovery),
// requests wait for the bucket; the first response carrying APF's
// flow-schema header turns the bucket off for good.
type apfLimiter struct {
	flowcontrol.RateLimiter
	off atomic.Bool
}

func newAPFLimiter() *apfLimiter {
	return &apfLimiter{RateLimiter: flowcontrol.NewTokenBucketRateLimiter(fallbackQPS, fallbackBurst)}
}

// TryAccept implements flowcontrol.RateLimiter.
func (l *apfLimiter) TryAccept() bool { return l.off.Load() || l.RateLimiter.TryAccept() }

// Accept implements flowcontrol.RateLimiter.
func (l *apfLimiter) Accept() {
	if !l.off.Load() {
		l.RateLimiter.Accept()
	}
}

// Wait implements flowcontrol.RateLimiter.
func (l *apfLimiter) Wait(ctx context.Context) error {
	if l.off.Load() {
		return nil
	}
	return l.RateLimiter.Wait(ctx)
}

// QPS implements flowcontrol.RateLimiter: 0 once off.
func (l *apfLimiter) QPS() float32 {
	if l.off.Load() {
		return 0
	}
	return l.RateLimiter.QPS()
}

// observe wraps a client transport: a response from an API server with
// APF turns the limiter off.
func (l *apfLimiter) observe(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && !l.off.Load() && resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) != "" {
			l.off.Store(true)
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// limitClients sets cfg's client-side limit: none when the API server has
// APF (see apfLimiter), unless cfg sets a rate; then that rate, in one
// token bucket that every client made from cfg shares (client-go would
// give each clientset a bucket of its own, several times the rate asked
// for against one member).
func limitClients(cfg *rest.Config) *apfLimiter {
	if cfg.RateLimiter != nil {
		return nil
	}
	if cfg.QPS != 0 {
		burst := cfg.Burst
		if burst <= 0 {
			burst = int(2 * cfg.QPS)
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, burst)
		return nil
	}
	l := newAPFLimiter()
	cfg.RateLimiter = l
	cfg.Wrap(l.observe)
	return l
}

// ClientLimit describes the member clients' request limit, for logs.
func (m *Member) ClientLimit() string {
	switch {
	case m.limiter == nil:
		return "set by flags"
	case m.limiter.off.Load():
		return "none (API Priority and Fairness)"
	}
	return "100/s, burst 200 (no API Priority and Fairness seen)"
}

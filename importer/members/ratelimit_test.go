package members

import (
	"context"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/client-go/rest"

	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// TestAPFLimiter: the fallback token bucket applies until a response
// carries APF's flow-schema header, and not after; responses without it
// change nothing.
func TestAPFLimiter(t *testing.T) {
	l := newAPFLimiter()
	header := http.Header{}
	rt := l.observe(roundTripperFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: header}, nil
	}))
	req, err := http.NewRequest(http.MethodGet, "http://example.invalid/version", nil)
	require.NoError(t, err)

	_, err = rt.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, float32(fallbackQPS), l.QPS(), "no APF seen: the bucket")
	accepted := 0
	began := time.Now()
	for l.TryAccept() {
		accepted++
	}
	// The bucket refills at fallbackQPS while the loop runs (longer when
	// the machine is loaded).
	refilled := int(math.Ceil(time.Since(began).Seconds() * fallbackQPS))
	assert.GreaterOrEqual(t, accepted, fallbackBurst, "the bucket's burst")
	assert.LessOrEqual(t, accepted, fallbackBurst+refilled+1, "the bucket's burst, then no more")

	header.Set(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID, "3a4b")
	_, err = rt.RoundTrip(req)
	require.NoError(t, err)
	assert.Zero(t, l.QPS(), "APF seen: no limit")
	for range 10 * fallbackBurst {
		require.True(t, l.TryAccept())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	require.NoError(t, l.Wait(ctx), "no waiting")

	header.Del(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID)
	_, err = rt.RoundTrip(req)
	require.NoError(t, err)
	assert.Zero(t, l.QPS(), "for good")
}

// TestConnectClientLimit: against a real API server (APF on, as by
// default) a member connected without a rate runs without a client-side
// limit once start-up discovery has seen a response; with a rate, that
// rate is the clients'.
func TestConnectClientLimit(t *testing.T) {
	set := cluster.Start(t, cluster.Spec{Name: "east"})
	cfg := rest.CopyConfig(set.Get("east").Config)
	cfg.QPS, cfg.Burst = 0, 0
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := Connect(ctx, cfg, "east")
	require.NoError(t, err)
	assert.Equal(t, "none (API Priority and Fairness)", m.ClientLimit())
	assert.Same(t, m.limiter, m.Config.RateLimiter, "one limiter for every client of the member")

	cfg.QPS, cfg.Burst = 50, 100
	m, err = Connect(ctx, cfg, "east")
	require.NoError(t, err)
	assert.Equal(t, "set by flags", m.ClientLimit())
	require.NotNil(t, m.Config.RateLimiter, "one bucket for every client of the member")
	assert.Equal(t, float32(50), m.Config.RateLimiter.QPS())
	for _, c := range []rest.Interface{m.Kube.CoreV1().RESTClient(), m.Kube.DiscoveryV1().RESTClient(), m.MCS.MulticlusterV1beta1().RESTClient()} {
		assert.Same(t, m.Config.RateLimiter, c.GetRateLimiter(), "the kube and MCS clients share the bucket")
	}
	// The shared bucket holds the burst (less what discovery took), then
	// the rate, for all of them.
	accepted := 0
	for m.Config.RateLimiter.TryAccept() {
		accepted++
	}
	assert.GreaterOrEqual(t, accepted, 50)
	assert.LessOrEqual(t, accepted, 110)
}

package members

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serverAway refuses the first n connections, then answers 200.
func serverAway(n int, calls *int) http.RoundTripper {
	return roundTripperFunc(func(*http.Request) (*http.Response, error) {
		*calls++
		if *calls <= n {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		}
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}"))}, nil
	})
}

// serverStarting answers 503 to the first n requests, then 200.
func serverStarting(n int, calls *int) http.RoundTripper {
	return roundTripperFunc(func(*http.Request) (*http.Response, error) {
		*calls++
		code := http.StatusOK
		if *calls <= n {
			code = http.StatusServiceUnavailable
		}
		return &http.Response{StatusCode: code, Header: http.Header{"Retry-After": {"5"}}, Body: io.NopCloser(strings.NewReader("{}"))}, nil
	})
}

func TestRetryWhileAway(t *testing.T) {
	t.Run("a read is asked again soon", func(t *testing.T) {
		calls := 0
		req, err := http.NewRequest(http.MethodGet, "https://member.invalid/apis/multicluster.x-k8s.io/v1beta1/serviceexports?watch=true", nil)
		require.NoError(t, err)
		began := time.Now()
		resp, err := retryWhileAway(serverStarting(2, &calls), nil).RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, 3, calls)
		// 250 ms, then 500 ms: not client-go's 5 s, nor no wait at all.
		assert.GreaterOrEqual(t, time.Since(began), 750*time.Millisecond)
	})
	t.Run("a write is not", func(t *testing.T) {
		calls := 0
		req, err := http.NewRequest(http.MethodPost, "https://member.invalid/apis/multicluster.x-k8s.io/v1beta1/namespaces/a/serviceimports", strings.NewReader("{}"))
		require.NoError(t, err)
		resp, err := retryWhileAway(serverStarting(1, &calls), nil).RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "client-go decides")
		assert.Equal(t, 1, calls)
	})
	t.Run("a watch waits for the server", func(t *testing.T) {
		calls := 0
		req, err := http.NewRequest(http.MethodGet, "https://member.invalid/api/v1/services?allowWatchBookmarks=true&watch=true", nil)
		require.NoError(t, err)
		resp, err := retryWhileAway(serverAway(4, &calls), nil).RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, 5, calls)
	})
	t.Run("other requests see the refusal", func(t *testing.T) {
		calls := 0
		req, err := http.NewRequest(http.MethodGet, "https://member.invalid/apis/multicluster.x-k8s.io/v1beta1/serviceexports?limit=1", nil)
		require.NoError(t, err)
		_, err = retryWhileAway(serverAway(1, &calls), nil).RoundTrip(req)
		assert.ErrorIs(t, err, syscall.ECONNREFUSED, "the health probe sees the member go")
		assert.Equal(t, 1, calls)
	})
	t.Run("a watch stops waiting when its caches are stopped", func(t *testing.T) {
		calls := 0
		req, err := http.NewRequest(http.MethodGet, "https://member.invalid/api/v1/services?watch=true", nil)
		require.NoError(t, err)
		stop := make(chan struct{})
		time.AfterFunc(600*time.Millisecond, func() { close(stop) })
		_, err = retryWhileAway(serverAway(1000, &calls), func() <-chan struct{} { return stop }).RoundTrip(req)
		assert.ErrorIs(t, err, syscall.ECONNREFUSED, "the last refusal, for the reflector (whose own stop then ends it)")
		assert.LessOrEqual(t, calls, 3, "given up at the stop")
	})
	t.Run("until the request's context ends", func(t *testing.T) {
		calls := 0
		ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://member.invalid/api/v1/services", nil)
		require.NoError(t, err)
		_, err = retryWhileAway(serverStarting(1000, &calls), nil).RoundTrip(req)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		// Asked at 0 and 250 ms; the context ends during the 500 ms wait
		// (a late timer can add one more).
		assert.LessOrEqual(t, calls, 3, "not spinning")
	})
}

package mcs

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The age the staleness gauge reports: 0 while requests go through, time
// since the first failure while they do not, 0 again after a success, and
// consistent when failing and succeeding requests race.
func TestReachabilityAge(t *testing.T) {
	var fail atomic.Bool
	var r reachability
	rt := r.wrap(roundTripperFunc(func(*http.Request) (*http.Response, error) {
		if fail.Load() {
			return nil, &net.OpError{Op: "read", Err: errors.New("connection reset")} // not retried
		}
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	}))
	get := func() {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://api/apis/discovery.k8s.io/v1/endpointslices", nil)
		require.NoError(t, err)
		if resp, err := rt.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	get()
	assert.Zero(t, r.age(time.Now()))
	fail.Store(true)
	get()
	time.Sleep(10 * time.Millisecond)
	get()
	assert.GreaterOrEqual(t, r.age(time.Now()), 10*time.Millisecond, "counts from the first failure")
	fail.Store(false)
	get()
	assert.Zero(t, r.age(time.Now()))

	// Racing requests, then a success: fresh.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				fail.Store((i+j)%2 == 0)
				get()
			}
		})
	}
	wg.Wait()
	fail.Store(false)
	get()
	assert.Zero(t, r.age(time.Now()), "a success after racing requests leaves the answers fresh")
	fail.Store(true)
	get()
	assert.NotZero(t, r.lostAt.Load(), "a failure after that is seen")
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

package memberconn

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// server answers each attempt in turn: an error, a status, or 200 once
// the script runs out; it records when each attempt came.
type server struct {
	mu     sync.Mutex
	script []any // error or int (status)
	at     []time.Time
}

func (s *server) RoundTrip(*http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = append(s.at, time.Now())
	code := http.StatusOK
	if len(s.script) > 0 {
		next := s.script[0]
		s.script = s.script[1:]
		if err, ok := next.(error); ok {
			return nil, err
		}
		code = next.(int)
	}
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

// gaps are the waits between attempts.
func (s *server) gaps() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var g []time.Duration
	for i := 1; i < len(s.at); i++ {
		g = append(g, s.at[i].Sub(s.at[i-1]))
	}
	return g
}

var refused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

func get(t *testing.T, ctx context.Context) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.invalid/api/v1/services?watch=true", nil)
	require.NoError(t, err)
	return req
}

func all(*http.Request) bool { return true }

// near asserts the waits, give or take the timers' slack.
func near(t *testing.T, want []time.Duration, got []time.Duration) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		assert.GreaterOrEqual(t, got[i], want[i], "wait %d", i)
		assert.Less(t, got[i], want[i]+200*time.Millisecond, "wait %d", i)
	}
}

func TestRideOutagesSchedules(t *testing.T) {
	t.Run("refusals back off to MaxWait", func(t *testing.T) {
		s := &server{script: []any{refused, refused, refused, refused}}
		resp, err := RideOutages(s, Policy{WaitRefused: all}).RoundTrip(get(t, context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		near(t, []time.Duration{FirstWait, 2 * FirstWait, MaxWait, MaxWait}, s.gaps())
	})
	t.Run("steady refusals every FirstWait; 503s back off on their own", func(t *testing.T) {
		s := &server{script: []any{refused, refused, http.StatusServiceUnavailable, refused, http.StatusServiceUnavailable}}
		resp, err := RideOutages(s, Policy{WaitRefused: all, SteadyRefused: true, RetryStarting: all}).RoundTrip(get(t, context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		near(t, []time.Duration{FirstWait, FirstWait, FirstWait, FirstWait, 2 * FirstWait}, s.gaps())
	})
	t.Run("503s for at most StartingFor", func(t *testing.T) {
		s := &server{script: []any{503, 503, 503, 503, 503, 503}}
		resp, err := RideOutages(s, Policy{RetryStarting: all, StartingFor: time.Second}).RoundTrip(get(t, context.Background()))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "then client-go decides")
		assert.Len(t, s.at, 3, "at 0, 250 and 750 ms; the next wait would end after 1 s")
	})
}

func TestRideOutagesLeavesAlone(t *testing.T) {
	for name, tc := range map[string]struct {
		method string
		p      Policy
		first  any
	}{
		"a write refused":             {http.MethodPost, Policy{WaitRefused: all}, refused},
		"a write turned away":         {http.MethodPost, Policy{RetryStarting: all}, 503},
		"a read not selected":         {http.MethodGet, Policy{WaitRefused: func(*http.Request) bool { return false }}, refused},
		"an error other than dial":    {http.MethodGet, Policy{WaitRefused: all}, &net.OpError{Op: "read", Err: errors.New("reset")}},
		"a 503 with no RetryStarting": {http.MethodGet, Policy{WaitRefused: all}, 503},
	} {
		s := &server{script: []any{tc.first}}
		req, err := http.NewRequest(tc.method, "https://api.invalid/api/v1/services", strings.NewReader("{}"))
		require.NoError(t, err)
		if tc.method == http.MethodGet {
			req.Body = nil
		}
		resp, err := RideOutages(s, tc.p).RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		assert.Len(t, s.at, 1, name)
	}
}

func TestRideOutagesHooks(t *testing.T) {
	s := &server{script: []any{refused, 503}}
	var failed []int
	var reasons []error
	answered := 0
	resp, err := RideOutages(s, Policy{
		WaitRefused:   all,
		RetryStarting: all,
		Failed: func(_ *http.Request, attempt int, reason error) {
			failed = append(failed, attempt)
			reasons = append(reasons, reason)
		},
		Answered: func(_ *http.Request, resp *http.Response) {
			answered++
			assert.Equal(t, http.StatusOK, resp.StatusCode)
		},
	}).RoundTrip(get(t, context.Background()))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, []int{0, 1}, failed)
	assert.ErrorIs(t, reasons[0], syscall.ECONNREFUSED)
	assert.ErrorContains(t, reasons[1], "starting")
	assert.Equal(t, 1, answered)
}

func TestRideOutagesEnds(t *testing.T) {
	t.Run("with the request's context: both errors", func(t *testing.T) {
		s := &server{script: []any{refused, refused, refused, refused, refused, refused}}
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		defer cancel()
		_, err := RideOutages(s, Policy{WaitRefused: all}).RoundTrip(get(t, ctx))
		assert.ErrorIs(t, err, syscall.ECONNREFUSED, "what kept it waiting")
		assert.ErrorIs(t, err, context.DeadlineExceeded, "why it ended")
	})
	t.Run("when stopped", func(t *testing.T) {
		s := &server{script: []any{503, 503, 503, 503, 503, 503}}
		stop := make(chan struct{})
		time.AfterFunc(400*time.Millisecond, func() { close(stop) })
		_, err := RideOutages(s, Policy{RetryStarting: all, Stopped: func() <-chan struct{} { return stop }}).RoundTrip(get(t, context.Background()))
		assert.ErrorIs(t, err, ErrStopped)
		assert.Len(t, s.at, 2)
	})
}

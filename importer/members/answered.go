package members

import (
	"net/http"
	"sync/atomic"
	"time"
)

// noteAnswers wraps a member's transport so that every answer it gives
// (a response other than 429 Too Many Requests and 503/504, which say it
// is too busy or cannot reach its storage) marks the member answered.
// Responses only: the events of a watch already open are marked by the
// caches' handlers (see handler).
func noteAnswers(rt http.RoundTripper, answered *atomic.Int64) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			switch resp.StatusCode {
			case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			default:
				answered.Store(time.Now().UnixNano())
			}
		}
		return resp, err
	})
}

// answeredSince reports whether the member answered anything at or after t.
func (m *Member) answeredSince(t time.Time) bool {
	return m.answered.Load() >= t.UnixNano()
}

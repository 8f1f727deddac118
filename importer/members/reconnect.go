package members

import (
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// How a member's clients get back to an API server that was away.
//
// client-go's reflectors back off exponentially (to about 30 s, with
// jitter) while a watch cannot be made, so after an API server restart
// the importer's caches of that member would resume, and an export made
// there would be seen, up to half a minute after the server answers
// again. And a restarted kube-apiserver answers /readyz before it serves
// everything: requests for resources whose handlers are not installed yet
// (those of CRDs, ServiceExports and ServiceImports among them) get 503
// with Retry-After: 5 for a moment, which takes well under a second;
// client-go waits the whole 5 s.
const (
	firstReconnect = 250 * time.Millisecond
	maxReconnect   = time.Second
	// startingRetryFor bounds the quick retries of one request turned
	// away with 503; one that lasts longer goes to client-go, which waits
	// as it is told.
	startingRetryFor = 10 * time.Second
)

// retryWhileAway wraps a member's transport so that its caches resume as
// soon as the API server is back:
//   - a watch (the caches' reads) whose connection is refused is made
//     again after 250 ms, 500 ms, then every second, until the request's
//     context ends or the caches that made it are stopped (stopped returns
//     their channel, nil before any: some informers, mcs-api's among them,
//     watch with a context that never ends): the reflector waits in it
//     instead of backing off. Other requests fail at once, so the health
//     probe still sees the member go.
//   - a read (GET, no body) turned away with 503 is asked again on the
//     same schedule, for at most startingRetryFor.
func retryWhileAway(rt http.RoundTripper, stopped func() <-chan struct{}) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet || (req.Body != nil && req.Body != http.NoBody) {
			return rt.RoundTrip(req)
		}
		watch := req.URL.Query().Get("watch") == "true"
		var stop <-chan struct{}
		if stopped != nil {
			stop = stopped()
		}
		startingUntil := time.Now().Add(startingRetryFor)
		wait := firstReconnect
		for {
			resp, err := rt.RoundTrip(req)
			switch {
			case err != nil:
				if !watch || !refused(err) || req.Context().Err() != nil {
					return resp, err
				}
			case resp.StatusCode == http.StatusServiceUnavailable && time.Now().Add(wait).Before(startingUntil):
				// Read what is left, so that the connection is reused.
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
				_ = resp.Body.Close()
			default:
				return resp, nil
			}
			t := time.NewTimer(wait)
			select {
			case <-req.Context().Done():
				t.Stop()
				return nil, req.Context().Err()
			case <-stop:
				t.Stop()
				if err == nil {
					err = errCachesStopped
				}
				return nil, err
			case <-t.C:
			}
			wait = min(2*wait, maxReconnect)
		}
	})
}

// errCachesStopped: a request given up because the caches that made it
// were stopped.
var errCachesStopped = errors.New("the member's caches were stopped")

// refused reports an error that says no connection could be made (nothing
// was sent, so asking again is safe).
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

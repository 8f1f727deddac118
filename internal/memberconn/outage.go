package memberconn

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Why clients ride out an API server outage here rather than in
// client-go: its reflectors back off exponentially (to about 30 s, 60
// with jitter) while a list or watch cannot connect, so after an API
// server restart a cache would resume, and a change made meanwhile be
// seen, up to a minute after the server answers again. And a restarted
// kube-apiserver answers /readyz before it serves everything: requests
// for resources whose handlers are not installed yet (those of CRDs,
// ServiceExports and ServiceImports among them) get 503 with
// Retry-After: 5 for a moment, which takes well under a second, while
// client-go waits the whole 5 s. Waiting in the transport instead, the
// reflector sees a slow request rather than an error and never backs off.

// The schedule of a request asked again: FirstWait, then twice that, up
// to MaxWait.
const (
	FirstWait = 250 * time.Millisecond
	MaxWait   = time.Second
)

// Policy is what one program asks of RideOutages. Only reads (GET without
// a body, safe to repeat) are ever asked again, and only those the
// predicates select; the zero Policy rides out nothing.
type Policy struct {
	// WaitRefused selects the reads that wait out refused connections
	// (nothing was sent), until they connect or their context ends; the
	// others fail at once (a health probe then sees the server go).
	WaitRefused func(*http.Request) bool
	// SteadyRefused: a refused read is tried again every FirstWait rather
	// than on the growing schedule, so that it resumes within FirstWait
	// of the server's return.
	SteadyRefused bool
	// RetryStarting selects the reads asked again when a starting server
	// turns them away with 503.
	RetryStarting func(*http.Request) bool
	// StartingFor bounds how long one request is asked again after 503s
	// (one that lasts longer goes to client-go, which waits as it is
	// told); 0 for no bound.
	StartingFor time.Duration
	// Stopped, when set, is called once per request; closing the channel
	// it returns (nil for none) ends the request's wait, for informers
	// whose watches have a context that never ends.
	Stopped func() <-chan struct{}
	// Failed is told of each failed attempt (an error, or a 503), unless
	// the request's context has ended: attempt counts from 0, reason says
	// what failed.
	Failed func(req *http.Request, attempt int, reason error)
	// Answered is told of each response handed back to the caller.
	Answered func(req *http.Request, resp *http.Response)
}

// ErrStopped: a request given up because its Policy.Stopped channel was
// closed while a starting server turned it away.
var ErrStopped = errors.New("the caller's caches were stopped")

// RideOutages wraps rt so that the reads p selects wait for an API
// server that refuses connections or is still starting, on the FirstWait
// to MaxWait schedule.
func RideOutages(rt http.RoundTripper, p Policy) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		read := req.Method == http.MethodGet && (req.Body == nil || req.Body == http.NoBody)
		waitRefused := read && p.WaitRefused != nil && p.WaitRefused(req)
		retryStarting := read && p.RetryStarting != nil && p.RetryStarting(req)
		var stop <-chan struct{}
		if p.Stopped != nil {
			stop = p.Stopped()
		}
		startingUntil := time.Now().Add(p.StartingFor)
		backoff := FirstWait
		for attempt := 0; ; attempt++ {
			resp, err := rt.RoundTrip(req)
			reason := err
			if err == nil {
				if !retryStarting || resp.StatusCode != http.StatusServiceUnavailable ||
					(p.StartingFor > 0 && !time.Now().Add(backoff).Before(startingUntil)) {
					if p.Answered != nil {
						p.Answered(req, resp)
					}
					return resp, nil
				}
				reason = fmt.Errorf("the API server is starting (%s)", resp.Status)
			}
			if req.Context().Err() != nil {
				return resp, err // the caller is gone
			}
			if p.Failed != nil {
				p.Failed(req, attempt, reason)
			}
			var wait time.Duration
			switch {
			case err == nil: // turned away by a starting server
				drain(resp)
				wait, backoff = backoff, min(2*backoff, MaxWait)
			case !waitRefused || !Refused(err):
				return resp, err
			case p.SteadyRefused:
				wait = FirstWait
			default:
				wait, backoff = backoff, min(2*backoff, MaxWait)
			}
			t := time.NewTimer(wait)
			select {
			case <-req.Context().Done():
				t.Stop()
				// Both: what kept the request waiting, and why it ended.
				return nil, fmt.Errorf("%w (%w)", reason, req.Context().Err())
			case <-stop:
				t.Stop()
				if err == nil {
					err = ErrStopped
				}
				return nil, err
			case <-t.C:
			}
		}
	})
}

// Refused reports an error that says no connection could be made
// (nothing was sent, so asking again is safe).
func Refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// drain reads what is left of a response body (so that its connection can
// be reused) and closes it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

package mcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
)

// reachability wraps the API client's transport to notice when the API
// server cannot be reached, and to ride out the outage. client-go's
// reflectors retry refused connections quietly and with a back-off that
// grows to 30 s (60 with jitter), so without this an API outage would go
// unlogged and changes made when the server returns could wait a minute.
// Instead, a list or watch that cannot connect is retried here every
// reconnectInterval until it connects or its context ends: the reflector
// sees a slow request rather than an error, never backs off for an outage,
// and resumes within reconnectInterval of the server's return. A server
// that is back but not serving every API yet (see starting) is retried the
// same way, with a back-off of at most maxStartingInterval. It logs once
// when the server becomes unreachable and once when it comes back, counts
// failed requests by resource, and tells how long the answers have been
// cut off from the API (coredns_mcs_last_sync_age_seconds).
type reachability struct {
	// lostAt is when the API server stopped answering (unix ns); 0 while
	// it answers. One word, so that requests failing and succeeding at
	// once cannot leave a "down" flag and the time disagreeing.
	lostAt atomic.Int64
}

// reconnectInterval is how often a request that cannot connect is retried.
const reconnectInterval = 250 * time.Millisecond

// maxStartingInterval bounds the back-off of requests that a starting API
// server turns away (see starting).
const maxStartingInterval = time.Second

// age is how long the answers have gone without the API server: 0 while
// it answers, else the time since it stopped.
func (r *reachability) age(now time.Time) time.Duration {
	t := r.lostAt.Load()
	if t == 0 {
		return 0
	}
	return now.Sub(time.Unix(0, t))
}

// reachabilities are the running controllers' (see lastSyncAge).
var reachabilities sync.Map // *reachability -> struct{}

// lastSyncAge is the largest age over the running controllers.
func lastSyncAge() float64 {
	now := time.Now()
	var oldest time.Duration
	reachabilities.Range(func(k, _ any) bool {
		oldest = max(oldest, k.(*reachability).age(now))
		return true
	})
	return oldest.Seconds()
}

// unreachable reports errors that say the server could not be connected
// to at all (nothing was sent, so a retry is safe).
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func (r *reachability) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		// Lists and watches only: discovery has no context to end it on
		// a reload, and its caller retries on its own.
		retry := req.Method == http.MethodGet && (req.Body == nil || req.Body == http.NoBody) && resourceOf(req.URL.Path) != "discovery"
		backoff := reconnectInterval
		for attempt := 0; ; attempt++ {
			resp, err := rt.RoundTrip(req)
			reason := err
			if err == nil {
				if !retry || !starting(resp) {
					if r.lostAt.Swap(0) != 0 {
						log.Infof("the API server is reachable again")
					}
					if retry && resp.StatusCode == http.StatusOK && fullList(req) {
						lists.WithLabelValues(resourceOf(req.URL.Path)).Inc()
					}
					return resp, nil
				}
				reason = fmt.Errorf("the API server is starting (%s)", resp.Status)
			}
			if req.Context().Err() != nil {
				return resp, err // we are stopping
			}
			if attempt == 0 {
				watchErrors.WithLabelValues(resourceOf(req.URL.Path)).Inc()
			}
			if r.lostAt.CompareAndSwap(0, time.Now().UnixNano()) {
				log.Warningf("cannot reach the API server; answers stay as they are until it is back: %v", reason)
			}
			wait := reconnectInterval
			switch {
			case err == nil: // turned away by a starting server
				drain(resp)
				wait, backoff = backoff, min(2*backoff, maxStartingInterval)
			case !retry || !unreachable(err):
				return resp, err
			}
			t := time.NewTimer(wait)
			select {
			case <-req.Context().Done():
				t.Stop()
				return nil, reason
			case <-t.C:
			}
		}
	})
}

// starting reports a response that says the server is up but cannot
// serve the request yet. A restarted kube-apiserver answers the resources
// of CRDs (ServiceImports) with 503 and Retry-After: 5 until their
// handlers are installed, which takes well under a second; client-go
// would wait the whole 5 s before it asks again.
func starting(resp *http.Response) bool {
	return resp.StatusCode == http.StatusServiceUnavailable
}

// fullList reports a request that reads a resource's whole state: a list,
// or a watch that starts with it (sendInitialEvents, client-go's
// watch-list). A reflector makes one at start, and another when its watch
// expired (410 Gone, after an etcd compaction or an API server restart)
// or failed.
func fullList(req *http.Request) bool {
	q := req.URL.Query()
	if q.Get("watch") == "true" {
		return q.Get("sendInitialEvents") == "true"
	}
	return q.Get("continue") == "" // a list's later pages are the same read
}

// drain reads what is left of a response body (so that its connection can
// be reused) and closes it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// resourceOf names the resource of an API path, from a fixed set (no
// label cardinality from paths).
func resourceOf(path string) string {
	switch {
	case strings.Contains(path, "/serviceimports"):
		return "serviceimports"
	case strings.Contains(path, "/endpointslices"):
		return "endpointslices"
	}
	return "discovery"
}

// watchErrorHandler logs and counts a reflector's errors; a list that
// finds the resource not served (404) also signals gone, when set. A
// permanent error (see permanent) before the first sync fails start-up.
func (c *controller) watchErrorHandler(resource string, gone chan<- struct{}) cache.WatchErrorHandlerWithContext {
	return func(_ context.Context, _ *cache.Reflector, err error) {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return // the server closed a watch; the reflector resumes it
		}
		watchErrors.WithLabelValues(resource).Inc()
		log.Warningf("watching %s: %v", resource, err)
		if permanent(err) {
			c.fail(fmt.Errorf("watching %s: %w", resource, err))
		}
		if gone != nil && apierrors.IsNotFound(err) {
			select {
			case gone <- struct{}{}:
			default: // one is pending already
			}
		}
	}
}

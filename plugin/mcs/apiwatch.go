package mcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
)

// reachability wraps the API client's transport to notice when the API
// server cannot be reached. client-go's reflectors retry refused
// connections quietly, so without this an API outage would go unlogged.
// It logs once when the server becomes unreachable and once when it comes
// back, counts every failed request by resource, and tells how long the
// answers have been cut off from the API (coredns_mcs_last_sync_age_seconds).
type reachability struct {
	down atomic.Bool
	// lastContact is when the API server last answered (unix ns), set
	// when it stops answering; 0 while it does.
	lastContact atomic.Int64
}

// age is how long the answers have gone without the API server: 0 while
// it answers, else the time since it last did.
func (r *reachability) age(now time.Time) time.Duration {
	t := r.lastContact.Load()
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

func (r *reachability) wrap(rt http.RoundTripper) http.RoundTripper {
	var last atomic.Int64 // when a request last went through (unix ns)
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			if req.Context().Err() != nil {
				return resp, err // we are stopping
			}
			watchErrors.WithLabelValues(resourceOf(req.URL.Path)).Inc()
			if r.down.CompareAndSwap(false, true) {
				since := last.Load()
				if since == 0 {
					since = time.Now().UnixNano()
				}
				r.lastContact.Store(since)
				log.Warningf("cannot reach the API server; answers stay as they are until it is back: %v", err)
			}
			return resp, err
		}
		last.Store(time.Now().UnixNano())
		if r.down.CompareAndSwap(true, false) {
			r.lastContact.Store(0)
			log.Infof("the API server is reachable again")
		}
		return resp, nil
	})
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

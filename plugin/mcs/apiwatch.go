package mcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
)

// reachability wraps the API client's transport to notice when the API
// server cannot be reached. client-go's reflectors retry refused
// connections quietly, so without this an API outage would go unlogged.
// It logs once when the server becomes unreachable and once when it comes
// back, and counts every failed request by resource.
type reachability struct {
	down atomic.Bool
}

func (r *reachability) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			if req.Context().Err() != nil {
				return resp, err // we are stopping
			}
			watchErrors.WithLabelValues(resourceOf(req.URL.Path)).Inc()
			if r.down.CompareAndSwap(false, true) {
				log.Warningf("cannot reach the API server; answers stay as they are until it is back: %v", err)
			}
			return resp, err
		}
		if r.down.CompareAndSwap(true, false) {
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

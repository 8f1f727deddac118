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

	"github.com/mcs-dns/mcs-dns/internal/memberconn"
)

// reachability rides out an API outage with memberconn.RideOutages: a
// list or watch that cannot connect is tried again every
// memberconn.FirstWait until it connects or its context ends (so the
// answers resume within that of the server's return), and one a starting
// server turns away with 503 is asked again with a back-off of at most
// memberconn.MaxWait. Its policy adds what the plugin needs to know: it
// logs once when the server becomes unreachable and once when it comes
// back, counts failed requests by resource, and tells how long the
// answers have been cut off from the API
// (coredns_mcs_last_sync_age_seconds).
type reachability struct {
	// lostAt is when the API server stopped answering (unix ns); 0 while
	// it answers. One word, so that requests failing and succeeding at
	// once cannot leave a "down" flag and the time disagreeing.
	lostAt atomic.Int64
}

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

// waits selects the requests that wait for the API server: lists and
// watches (memberconn retries only reads), not discovery, which has no
// context to end it on a reload, and whose caller retries on its own.
func waits(req *http.Request) bool {
	return resourceOf(req.URL.Path) != "discovery"
}

func (r *reachability) wrap(rt http.RoundTripper) http.RoundTripper {
	return memberconn.RideOutages(rt, memberconn.Policy{
		WaitRefused:   waits,
		SteadyRefused: true,
		RetryStarting: waits,
		Failed: func(req *http.Request, attempt int, reason error) {
			if attempt == 0 {
				watchErrors.WithLabelValues(resourceOf(req.URL.Path)).Inc()
			}
			if r.lostAt.CompareAndSwap(0, time.Now().UnixNano()) {
				log.Warningf("cannot reach the API server; answers stay as they are until it is back: %v", reason)
			}
		},
		Answered: func(req *http.Request, resp *http.Response) {
			if r.lostAt.Swap(0) != 0 {
				log.Infof("the API server is reachable again")
			}
			read := req.Method == http.MethodGet && (req.Body == nil || req.Body == http.NoBody)
			if read && waits(req) && resp.StatusCode == http.StatusOK && fullList(req) {
				lists.WithLabelValues(resourceOf(req.URL.Path)).Inc()
			}
		},
	})
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

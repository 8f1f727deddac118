package members

import (
	"net/http"
	"time"

	"github.com/mcs-dns/mcs-dns/internal/memberconn"
)

// startingRetryFor bounds the quick retries of one request turned away
// with 503; one that lasts longer goes to client-go, which waits as it is
// told.
const startingRetryFor = 10 * time.Second

// retryWhileAway wraps a member's transport so that its caches resume as
// soon as the API server is back (memberconn.RideOutages):
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
	return memberconn.RideOutages(rt, memberconn.Policy{
		WaitRefused:   isWatch,
		RetryStarting: func(*http.Request) bool { return true },
		StartingFor:   startingRetryFor,
		Stopped:       stopped,
	})
}

func isWatch(req *http.Request) bool { return req.URL.Query().Get("watch") == "true" }

package importer

import (
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcs-dns/mcs-dns/importer/members"
)

// readiness says whether the importer is ready, and each member's state.
func readiness(working *atomic.Bool, set *members.Set) (bool, string) {
	var b strings.Builder
	up := 0
	for _, st := range set.Statuses() {
		name := st.Context
		if st.Cluster != st.Context {
			name += " (cluster " + st.Cluster + ")"
		}
		fmt.Fprintf(&b, "member %s: %s", name, st.State)
		if st.Reason != "" {
			fmt.Fprintf(&b, ": %s", st.Reason)
		}
		if !st.WithdrawAt.IsZero() {
			fmt.Fprintf(&b, "; its last known state is withdrawn at %s unless it is seen again", st.WithdrawAt.UTC().Format(time.RFC3339))
			if st.HeldSinceEarlier {
				b.WriteString(" (held since an earlier process or leader term)")
			}
		}
		b.WriteByte('\n')
		if st.State == members.Up {
			up++
		}
	}
	if d := set.Disruption(); d.Active {
		fmt.Fprintf(&b, "disruption since %s: most members cannot be reached at once", d.Since.UTC().Format(time.RFC3339))
		switch {
		case d.LimitReached:
			b.WriteString("; it has lasted --max-disruption, and withdrawals go on")
		case !d.Until.IsZero():
			fmt.Fprintf(&b, "; nothing is withdrawn until it ends or until %s (--max-disruption)", d.Until.UTC().Format(time.RFC3339))
		default:
			b.WriteString("; nothing is withdrawn until it ends")
		}
		b.WriteByte('\n')
	}
	switch {
	case !working.Load():
		return false, "not working yet (standing by for the leader Lease, or trying every member once)\n" + b.String()
	case up == 0:
		return false, "no member cluster is usable\n" + b.String()
	}
	return true, "ok\n" + b.String()
}

func healthMux(reg *prometheus.Registry, working *atomic.Bool, set *members.Set, profiling bool) *http.ServeMux {
	mux := http.NewServeMux()
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, detail := readiness(working, set)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = io.WriteString(w, detail)
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

package controller

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// propagation times how long a change seen in a source member takes to be
// written into the members: from the event of an export, its Service or
// its EndpointSlices (the first one since the key was last carried) to the
// last write of the reconcile that carried it, per source cluster; and
// to each member's last write, per member. A reconcile that writes
// nothing observes nothing (the change needed no write); one that fails
// keeps the times, so that a change carried only by a retry counts its
// retries. A nil *propagation records nothing (controllers built by
// hand in tests).
type propagation struct {
	mu sync.Mutex
	// seen: per key, per source cluster, the first change not yet carried.
	seen map[string]map[string]time.Time
	// writes: per key, per member written, the last write of the reconcile
	// running for it (one at a time per key: the work queue's rule).
	writes map[string]map[string]time.Time

	source *prometheus.HistogramVec // by source_cluster
	member *prometheus.HistogramVec // by cluster
}

// propagationBuckets span a local write (a few ms) to a retried one
// (minutes).
var propagationBuckets = prometheus.ExponentialBuckets(0.005, 2, 16)

func newPropagation(reg prometheus.Registerer) *propagation {
	p := &propagation{
		seen:   map[string]map[string]time.Time{},
		writes: map[string]map[string]time.Time{},
		source: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "mcs_importer", Name: "propagation_seconds",
			Help:    "Time from seeing a change of an export, its Service or its EndpointSlices in source_cluster to the last member write that carries it (changes that need no write are not observed).",
			Buckets: propagationBuckets,
		}, []string{"source_cluster"}),
		member: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "mcs_importer", Name: "member_write_lag_seconds",
			Help:    "Time from seeing a change in any source cluster to the write into cluster that carries it.",
			Buckets: propagationBuckets,
		}, []string{"cluster"}),
	}
	reg.MustRegister(p.source, p.member)
	return p
}

// changed records a change of key seen in source at t, unless an earlier
// one is still to be carried.
func (p *propagation) changed(key, source string, t time.Time) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.seen[key]
	if s == nil {
		s = map[string]time.Time{}
		p.seen[key] = s
	}
	if _, ok := s[source]; !ok {
		s[source] = t
	}
}

// wrote records a write of key's objects into member at t, if a change
// of key waits to be carried.
func (p *propagation) wrote(key, member string, t time.Time) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.seen[key]) == 0 {
		return
	}
	w := p.writes[key]
	if w == nil {
		w = map[string]time.Time{}
		p.writes[key] = w
	}
	w[member] = t
}

// started is called when a reconcile of key begins: it returns the
// changes it carries (those seen so far), and forgets writes of earlier
// reconciles.
func (p *propagation) started(key string) map[string]time.Time {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.writes, key)
	s := p.seen[key]
	if len(s) == 0 {
		return nil
	}
	out := make(map[string]time.Time, len(s))
	for src, t := range s {
		out[src] = t
	}
	return out
}

// finished is called when that reconcile ends: when it succeeded, the
// changes it carried are observed (if it wrote) and forgotten; changes
// seen during it stay for the next one.
func (p *propagation) finished(key string, carried map[string]time.Time, ok bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	writes := p.writes[key]
	delete(p.writes, key)
	if !ok || len(carried) == 0 {
		return
	}
	var last, first time.Time
	for _, t := range writes {
		if t.After(last) {
			last = t
		}
	}
	for _, t := range carried {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	if !last.IsZero() {
		for src, t := range carried {
			p.source.WithLabelValues(src).Observe(max(0, last.Sub(t)).Seconds())
		}
		for m, t := range writes {
			p.member.WithLabelValues(m).Observe(max(0, t.Sub(first)).Seconds())
		}
	}
	s := p.seen[key]
	for src, t := range carried {
		if s[src].Equal(t) {
			delete(s, src)
		}
	}
	if len(s) == 0 {
		delete(p.seen, key)
	}
}

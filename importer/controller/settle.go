package controller

import (
	"sync"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// typeChangeSettle is how long a new import type must stay decided before
// an existing import takes it. A type change is the most disruptive write
// there is (ClusterSetIP to Headless gives up the VIP; back makes a new
// one), and the caches can show, for a moment, states that do not last:
// a Service replaced (deleted, then made again) that a watch replays
// after a reconnection, members joining one by one after a start. The
// import keeps its type meanwhile; its endpoints go on following.
const typeChangeSettle = 2 * time.Second

// typeSettle remembers, per "cluster/ns/name", a type decided for an
// import that holds another, and since when.
type typeSettle struct {
	mu      sync.Mutex
	pending map[string]pendingType
}

type pendingType struct {
	typ   mcsv1beta1.ServiceImportType
	since time.Time
}

// settled reports whether import mk (which holds type have) may take type
// want now; when not, it returns how long to wait. A decision that
// changes (back to have, or to yet another type) starts again.
func (s *typeSettle) settled(mk string, have, want mcsv1beta1.ServiceImportType, now time.Time) (bool, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if have == want {
		delete(s.pending, mk)
		return true, 0
	}
	if s.pending == nil {
		s.pending = map[string]pendingType{}
	}
	p, ok := s.pending[mk]
	if !ok || p.typ != want {
		s.pending[mk] = pendingType{typ: want, since: now}
		return false, typeChangeSettle
	}
	if wait := typeChangeSettle - now.Sub(p.since); wait > 0 {
		return false, wait
	}
	delete(s.pending, mk)
	return true, 0
}

// forget drops what s remembers of mk (its import is gone).
func (s *typeSettle) forget(mk string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, mk)
}

// addServeAfter queues a serve pass of k after d.
func (c *Controller) addServeAfter(k string, d time.Duration) {
	c.queue.AddWithOpts(priorityqueue.AddOpts{After: d, Priority: ptr.To(priorityServe)}, item{k, passServe})
}

// Package write applies one object's desired state to an API server, the
// one way every mcs-importer write goes: create it when the cache has
// none; when the create finds one there already (the cache was behind),
// adopt it if mcs-importer manages it and yield to it if not; update what
// differs, and on a conflict read the live object and decide again. What
// is wanted is decided by the caller before Ensure is called; Ensure only
// writes it.
package write

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// RequestTimeout bounds each request Ensure and Delete send. A caller
// writing many objects into one member (a service every member exports
// has a mirrored slice per exporter) is bounded per request, not as a
// whole: a member that answers slowly still takes every write, and one
// that hangs fails the first (see TimedOut) instead of the caller's
// whole part. (A variable for tests.)
var RequestTimeout = 20 * time.Second

// TimedOut reports whether err says the API server did not answer in
// time, or said it is too busy: the next request to it would most likely
// fare no better.
func TimedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err)
}

// bounded calls f with ctx bounded by RequestTimeout.
func bounded[R any](ctx context.Context, f func(context.Context) (R, error)) (R, error) {
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	return f(rctx)
}

// Outcome says what Ensure did.
type Outcome int

const (
	// Unchanged: the object had what is wanted already.
	Unchanged Outcome = iota
	// Created: the object was created.
	Created
	// Updated: the object was updated.
	Updated
	// Yielded: an object mcs-importer does not manage holds the name; it
	// was left alone.
	Yielded
	// Absent: there is no object and none was to be created.
	Absent
)

func (o Outcome) String() string {
	switch o {
	case Unchanged:
		return "unchanged"
	case Created:
		return "created"
	case Updated:
		return "updated"
	case Yielded:
		return "yielded"
	case Absent:
		return "absent"
	}
	return "unknown"
}

// Ops says how one object is read and written, and what is wanted of it.
type Ops[P metav1.Object] struct {
	// Get reads the live object from the API server.
	Get func(context.Context) (P, error)
	// Create creates the wanted object. Nil: an absent object stays
	// absent (a status, say, is only written onto what exists).
	Create func(context.Context) (P, error)
	// Owned reports whether mcs-importer manages the object; an object
	// it does not manage is never written. Nil: every object is ours.
	Owned func(P) bool
	// UpToDate reports whether the object has what is wanted.
	UpToDate func(P) bool
	// Update writes what is wanted onto a copy of the object it is
	// given (never the object itself: it may be a shared cache's).
	Update func(context.Context, P) (P, error)
	// Wrote, if set, is told of every write ("create", "update") and
	// its result, failed ones too.
	Wrote func(verb string, err error)
}

var errYield = errors.New("object is not managed by mcs-importer")

// Ensure makes the object hold what ops want, starting from cur, the
// cache's copy (nil when the cache has none). It returns the object as
// last read or written (nil when absent), what it did, and the error of
// the write that failed: conflicts are retried from the live object
// (client-go's retry.DefaultRetry); every other error (a quota, a
// webhook's denial, the API server away) is returned as it is, for the
// caller's workqueue to retry with its backoff.
func Ensure[T any, P interface {
	*T
	metav1.Object
}](ctx context.Context, ops Ops[P], cur P) (P, Outcome, error) {
	wrote := ops.Wrote
	if wrote == nil {
		wrote = func(string, error) {}
	}
	owned := ops.Owned
	if owned == nil {
		owned = func(P) bool { return true }
	}
	if cur == nil {
		if ops.Create == nil {
			return nil, Absent, nil
		}
		created, err := bounded(ctx, ops.Create)
		wrote("create", err)
		if err == nil {
			return created, Created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, Absent, err
		}
		// The cache is behind, or someone else's object has the name.
		if cur, err = bounded(ctx, ops.Get); err != nil {
			return nil, Absent, err
		}
	}
	out := Unchanged
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !owned(cur) {
			return errYield
		}
		if ops.UpToDate(cur) {
			return nil // possibly the object read after a conflict
		}
		upd, err := bounded(ctx, func(ctx context.Context) (P, error) { return ops.Update(ctx, cur) })
		wrote("update", err)
		if err == nil {
			cur, out = upd, Updated
			return nil
		}
		if apierrors.IsConflict(err) {
			if live, gerr := bounded(ctx, ops.Get); gerr == nil {
				cur = live
			}
		}
		return err
	})
	if errors.Is(err, errYield) {
		return cur, Yielded, nil
	}
	return cur, out, err
}

// Delete deletes the object with that UID through del. An object gone
// already, or replaced by another of the same name (the UID precondition
// fails with a conflict), counts as deleted: the replacement is never
// touched.
func Delete(ctx context.Context, del func(context.Context, metav1.DeleteOptions) error, uid types.UID, wrote func(verb string, err error)) error {
	_, err := bounded(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, del(ctx, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	})
	if wrote != nil {
		wrote("delete", err)
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

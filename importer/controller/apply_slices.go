package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"

	"github.com/mcs-dns/mcs-dns/importer/aggregate"
	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/importer/slicedigest"
	"github.com/mcs-dns/mcs-dns/importer/write"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// writeSlices writes a slice plan in v's member: replacements, creates
// and updates, then removals. It returns the wanted slices whose names
// objects we do not manage hold (left alone, and looked up before the
// next create, which would fail and count as a write), apart from the
// errors.
func (c *Controller) writeSlices(ctx context.Context, v view, ns string, p slicePlan) (held []*members.NotOwnedError, _ error) {
	if p.empty() {
		return nil, nil
	}
	m := v.m
	client := m.Kube.DiscoveryV1().EndpointSlices(ns)
	// ctx's deadline (the member's part's time) stops new writes from
	// starting; writes in flight when it is up are let finish.
	wctx, stop := letFinish(ctx)
	defer stop()
	del := func(s *discoveryv1.EndpointSlice) error {
		err := write.Delete(wctx, func(ctx context.Context, opts metav1.DeleteOptions) error {
			err := client.Delete(ctx, s.Name, opts)
			if err == nil || apierrors.IsNotFound(err) {
				m.RecordDelete(s)
			}
			return err
		}, s.UID, c.recorder(m, kindSlice, ns, s.Labels[mcsapi.LabelServiceName], s.Name))
		if err != nil {
			c.failed(m, "delete EndpointSlice")
		}
		return err
	}
	// Each slice is written on its own (up to sliceWriteParallelism at
	// once, within the member's client limits): a service every member
	// exports has a slice per exporter, and its part of a reconcile
	// must not grow with them one round trip at a time.
	var (
		mu     sync.Mutex
		errs   []error
		gaveUp atomic.Bool
		wg     sync.WaitGroup
	)
	sem := make(chan struct{}, sliceWriteParallelism)
	for _, w := range p.writes {
		sem <- struct{}{}
		if gaveUp.Load() || ctx.Err() != nil {
			// The member did not answer in time: the rest would fare
			// no better. What was written stays; the key is retried.
			<-sem
			break
		}
		wg.Add(1)
		c.pool.Go(func() {
			defer wg.Done()
			defer func() { <-sem }()
			h, err := c.writeSlice(wctx, v, ns, w, client, del)
			if err != nil && write.TimedOut(err) {
				gaveUp.Store(true)
			}
			mu.Lock()
			defer mu.Unlock()
			if h != nil {
				held = append(held, h)
			}
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	// By name, whatever order the writes finished in: what is in the
	// way ends up in conditions, which must not flap.
	slices.SortFunc(held, func(a, b *members.NotOwnedError) int { return strings.Compare(a.Name, b.Name) })
	switch {
	case gaveUp.Load():
		// Removals wait for the writes: endpoints moving between slices
		// must never be all gone.
		return held, errors.Join(errs...)
	case partOver(ctx):
		// The part's time is up while the member answers: what was
		// written stays, the next pass goes on from there (removals
		// included).
		return held, errors.Join(append(errs, errUnfinished)...)
	}
	for _, s := range p.remove {
		if err := del(s); err != nil {
			errs = append(errs, err)
		}
	}
	return held, errors.Join(errs...)
}

// sendSlice sends a create or update (send) of mirrored slice d into m,
// marked in flight until its answer is recorded (members.Member.Writing,
// which has d's import reconciled again when a change to d later than
// the write was taken for its echo meanwhile).
func (c *Controller) sendSlice(m *members.Member, ns string, d *discoveryv1.EndpointSlice, send func() (*discoveryv1.EndpointSlice, error)) (*discoveryv1.EndpointSlice, error) {
	done := m.Writing(members.KindMirroredSlice, ns, d.Name, d.Labels[mcsapi.LabelServiceName])
	defer done()
	s, err := send()
	return recorded(m, s, err)
}

// sliceWriteParallelism bounds how many of one key's slices are written
// into one member at once.
const sliceWriteParallelism = 4

// writeSlice makes one wanted slice of a plan hold what w wants in v's
// member. It returns the name held by an object we do not manage, if
// that is what is in the way, apart from the error.
func (c *Controller) writeSlice(ctx context.Context, v view, ns string, w sliceWrite, client discoveryclient.EndpointSliceInterface, del func(*discoveryv1.EndpointSlice) error) (*members.NotOwnedError, error) {
	m := v.m
	d, cur := w.want, w.cur
	if w.replace != nil {
		// Gone, or replaced already (the UID changed): the create
		// below then finds what is there.
		if err := del(w.replace); err != nil {
			return nil, err
		}
	}
	heldKey := m.ID + "/" + ns + "/" + d.Name
	if cur == nil && c.heldNames.Has(heldKey) {
		// Someone else's last time: look before writing.
		gctx, cancel := context.WithTimeout(ctx, write.RequestTimeout)
		live, err := client.Get(gctx, d.Name, metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, err
		default:
			cur = live
		}
	}
	upToDate := aggregate.SliceUpToDate
	if w.endpointsOnly {
		upToDate = aggregate.EndpointsUpToDate
	}
	ops := write.Ops[*discoveryv1.EndpointSlice]{
		Get: func(ctx context.Context) (*discoveryv1.EndpointSlice, error) {
			return client.Get(ctx, d.Name, metav1.GetOptions{})
		},
		Create: func(ctx context.Context) (*discoveryv1.EndpointSlice, error) {
			return c.sendSlice(m, ns, d, func() (*discoveryv1.EndpointSlice, error) {
				return client.Create(ctx, slicedigest.ForWrite(d), metav1.CreateOptions{})
			})
		},
		Owned:    func(s *discoveryv1.EndpointSlice) bool { return members.Owned(s) },
		UpToDate: func(s *discoveryv1.EndpointSlice) bool { return upToDate(d, s) },
		Update: func(ctx context.Context, s *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, error) {
			// s may be the cache's slim copy: it gets d's endpoints.
			upd := slicedigest.ForWrite(s).DeepCopy()
			upd.Endpoints = d.Endpoints
			if !w.endpointsOnly {
				upd.Labels, upd.Ports = aggregate.MergeSliceLabels(d, s), d.Ports
			}
			return c.sendSlice(m, ns, d, func() (*discoveryv1.EndpointSlice, error) {
				return client.Update(ctx, upd, metav1.UpdateOptions{})
			})
		},
		Wrote: c.recorder(m, kindSlice, ns, d.Labels[mcsapi.LabelServiceName], d.Name),
	}
	if w.endpointsOnly {
		// A held import's slice is never made anew: one gone
		// meanwhile waits for the hold to end (NotFound below).
		ops.Create = nil
	}
	_, out, err := write.Ensure(ctx, ops, cur)
	switch {
	case out == write.Yielded:
		c.heldNames.Insert(heldKey)
		return &members.NotOwnedError{Kind: kindSlice, Namespace: ns, Name: d.Name}, nil
	case err != nil && w.endpointsOnly && apierrors.IsNotFound(err):
		err = nil
	case err != nil && cur == nil && out == write.Absent:
		c.failed(m, "create EndpointSlice")
	case err != nil:
		c.failed(m, "update EndpointSlice")
	}
	c.heldNames.Delete(heldKey)
	return nil, err
}

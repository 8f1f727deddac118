package members

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// access is one kind of call the importer makes in a member.
type access struct {
	group, resource, subresource, verb string
}

func (a access) String() string {
	r := a.resource
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.group != "" {
		r += "." + a.group
	}
	return a.verb + " " + r
}

const mcsGroup = "multicluster.x-k8s.io"

// accesses lists every call the importer makes in m, besides the
// one-item lists the probe makes anyway: the caches' lists and watches
// (ServiceExports, ServiceImports, Services, EndpointSlices, Namespaces in
// every member), the reads of single objects before a write (where it
// writes), and the writes: the export conditions where it writes them,
// and imports, mirrored slices and derived Services where it imports. A
// role that keeps list but loses watch leaves a cache frozen at its last
// list, so both are asked.
func (m *Member) accesses() []access {
	var out []access
	for _, r := range []access{{group: mcsGroup, resource: "serviceexports"}, {group: mcsGroup, resource: "serviceimports"},
		{resource: "services"}, {group: "discovery.k8s.io", resource: "endpointslices"}, {resource: "namespaces"}} {
		for _, verb := range []string{"list", "watch"} {
			r.verb = verb
			out = append(out, r)
		}
	}
	if m.ExportConditions {
		out = append(out, access{mcsGroup, "serviceexports", "", "get"}, access{mcsGroup, "serviceexports", "status", "update"})
	}
	if m.Importing {
		for _, verb := range []string{"get", "create", "update", "delete"} {
			out = append(out,
				access{mcsGroup, "serviceimports", "", verb},
				access{"discovery.k8s.io", "endpointslices", "", verb},
				access{"", "services", "", verb})
		}
		out = append(out, access{mcsGroup, "serviceimports", "status", "update"})
	}
	return out
}

// writeCheckEvery is how often a member's permissions are asked again
// (SelfSubjectAccessReviews, which any authenticated user may make): the
// probe's one-item lists run every probe, the full check (some thirty
// reviews, made at once) less often.
const writeCheckEvery = 30 * time.Second

// forbiddenRecheckAfter is how soon after the last check a write refused
// with 403 has the permissions asked again. Quotas and webhooks refuse
// with 403 too (the check then finds every call allowed): the bound keeps
// a write refused on every pass from sending the reviews on every probe.
const forbiddenRecheckAfter = 2 * time.Second

// writeCheck is the last answer about m's permissions (see accesses).
type writeCheck struct {
	mu  sync.Mutex
	at  time.Time
	err error
	// soon: a write was refused with 403 since the last check; ask
	// again forbiddenRecheckAfter after it, not writeCheckEvery.
	soon atomic.Bool
}

// WriteForbidden tells m that the API server refused one of the
// importer's writes with 403 Forbidden: a RoleBinding that lost a write
// is then noticed at the next probe rather than within writeCheckEvery.
func (m *Member) WriteForbidden() {
	m.writeCheck.soon.Store(true)
}

// probeReads lists one object of every resource the importer reads in m
// that the MCS probe does not (Services, EndpointSlices, Namespaces): a
// RoleBinding that loses one of them leaves the caches of the others live
// and that one frozen, which must not pass for Up.
func (m *Member) probeReads(ctx context.Context) error {
	one := metav1.ListOptions{Limit: 1}
	if _, err := m.Kube.CoreV1().Services("").List(ctx, one); err != nil {
		return err
	}
	if _, err := m.Kube.DiscoveryV1().EndpointSlices("").List(ctx, one); err != nil {
		return err
	}
	_, err := m.Kube.CoreV1().Namespaces().List(ctx, one)
	return err
}

// probeWrites asks the member whether the importer may make every call it
// makes there (accesses; at most every writeCheckEvery, the last answer
// otherwise). A call it may not make is a Forbidden error naming it.
func (m *Member) probeWrites(ctx context.Context) error {
	m.writeCheck.mu.Lock()
	defer m.writeCheck.mu.Unlock()
	if at := m.writeCheck.at; !at.IsZero() {
		since := time.Since(at)
		if since < writeCheckEvery && (!m.writeCheck.soon.Load() || since < forbiddenRecheckAfter) {
			return m.writeCheck.err
		}
	}
	m.writeCheck.soon.Store(false)
	err := m.checkWrites(ctx)
	if ctx.Err() != nil {
		return err // not an answer: asked again at the next probe
	}
	m.writeCheck.at, m.writeCheck.err = time.Now(), err
	return err
}

func (m *Member) checkWrites(ctx context.Context) error {
	all := m.accesses()
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, a := range all {
		wg.Go(func() {
			review, err := m.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Group: a.group, Resource: a.resource, Subresource: a.subresource, Verb: a.verb,
				}},
			}, metav1.CreateOptions{})
			switch {
			case err != nil:
				errs[i] = err
			case !review.Status.Allowed:
				errs[i] = apierrors.NewForbidden(schema.GroupResource{Group: a.group, Resource: a.resource}, "",
					fmt.Errorf("the importer may not %s here", a))
			}
		})
	}
	wg.Wait()
	// The first in the list, so that the reason does not change from one
	// check to the next.
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

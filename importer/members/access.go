package members

import (
	"context"
	"fmt"
	"sync"
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

// writes lists the writes the importer makes in m: the export conditions
// where it writes them, and imports, mirrored slices and derived Services
// where it imports.
func (m *Member) writes() []access {
	var out []access
	if m.ExportConditions {
		out = append(out, access{mcsGroup, "serviceexports", "status", "update"})
	}
	if m.Importing {
		for _, verb := range []string{"create", "update", "delete"} {
			out = append(out,
				access{mcsGroup, "serviceimports", "", verb},
				access{"discovery.k8s.io", "endpointslices", "", verb},
				access{"", "services", "", verb})
		}
		out = append(out, access{mcsGroup, "serviceimports", "status", "update"})
	}
	return out
}

// writeCheckEvery is how often a member's write permissions are asked
// again (SelfSubjectAccessReviews, which any authenticated user may make):
// reads are checked by every probe, writes less often, being a dozen
// requests.
const writeCheckEvery = 30 * time.Second

// writeCheck is the last answer about m's write permissions.
type writeCheck struct {
	mu  sync.Mutex
	at  time.Time
	err error
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

// probeWrites asks the member whether the importer may make every write it
// makes there (at most every writeCheckEvery; the last answer otherwise).
// A write it may not make is a Forbidden error naming it.
func (m *Member) probeWrites(ctx context.Context) error {
	m.writeCheck.mu.Lock()
	defer m.writeCheck.mu.Unlock()
	if !m.writeCheck.at.IsZero() && time.Since(m.writeCheck.at) < writeCheckEvery {
		return m.writeCheck.err
	}
	err := m.checkWrites(ctx)
	if ctx.Err() != nil {
		return err // not an answer: asked again at the next probe
	}
	m.writeCheck.at, m.writeCheck.err = time.Now(), err
	return err
}

func (m *Member) checkWrites(ctx context.Context) error {
	for _, a := range m.writes() {
		review, err := m.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: a.group, Resource: a.resource, Subresource: a.subresource, Verb: a.verb,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !review.Status.Allowed {
			return apierrors.NewForbidden(schema.GroupResource{Group: a.group, Resource: a.resource}, "",
				fmt.Errorf("the importer may not %s here", a))
		}
	}
	return nil
}

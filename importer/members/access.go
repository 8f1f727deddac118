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

// accesses lists every call the importer makes in m: the caches' lists
// and watches (ServiceExports, ServiceImports, Services, EndpointSlices,
// Namespaces in every member), the reads of single objects before a write (where it
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

// DefaultAccessCheckInterval is how often a member's access is checked in
// full while the last check found nothing missing: one-item lists of every
// resource the importer reads besides ServiceExports, and every call in
// accesses (some thirty) matched against one SelfSubjectRulesReview or,
// where the member's authorizer cannot list its rules, a
// SelfSubjectAccessReview for each, made at once (any authenticated user
// may make both). Every probe lists
// one ServiceExport; the rest, at every probe, would be most of what an
// idle importer costs its members and itself. A lost permission that
// shows is noticed at the next probe (recheckSoon: a write refused with
// 403, a cache's list or watch refused); the full check finds the one
// that has not shown yet.
const DefaultAccessCheckInterval = 2 * time.Minute

// forbiddenRecheckAfter is how soon after the last check the access is
// checked again when it showed a refusal since (recheckSoon), and how
// long a check that found something missing is kept: a member refused
// is asked again at the probes after that, so that it is back soon after
// its role is. Quotas and webhooks refuse writes with 403 too (the check
// then finds every call allowed): the bound keeps a write refused on
// every pass from sending the reviews on every probe.
const forbiddenRecheckAfter = 2 * time.Second

// accessCheck is the last full check of m's access (see checkAccess).
type accessCheck struct {
	mu  sync.Mutex
	at  time.Time
	err error
	// soon: a write or a cache's read was refused since the last check;
	// check again forbiddenRecheckAfter after it, not at the interval.
	soon atomic.Bool
}

// WriteForbidden tells m that the API server refused one of the
// importer's writes with 403 Forbidden: a RoleBinding that lost a write
// is then noticed at the next probe rather than at the access check
// interval.
func (m *Member) WriteForbidden() { m.recheckSoon() }

func (m *Member) recheckSoon() { m.access.soon.Store(true) }

// readRefused reports whether a cache's list or watch failed because
// the member refused it (credentials, RBAC, or a resource no longer
// served), as opposed to not answering: the access check then runs at
// the next probe. A watch already open when a role loses a verb goes on
// (authorization is checked when a request starts); its cache freezes
// only when the watch ends and the list or watch that follows is
// refused, which this catches.
func readRefused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err)
}

// probeReads lists one object of every resource the importer reads in m
// besides ServiceExports (which every probe lists): ServiceImports where
// it imports, Services, EndpointSlices and Namespaces. A RoleBinding that
// loses one of them leaves the caches of the others live and that one
// frozen, which must not pass for Up; a ServiceImport CRD deleted alone
// is a 404 here.
func (m *Member) probeReads(ctx context.Context) error {
	one := metav1.ListOptions{Limit: 1}
	if m.Importing {
		var err error
		if m.alphaImports() {
			_, err = m.MCS.MulticlusterV1alpha1().ServiceImports("").List(ctx, one)
		} else {
			_, err = m.MCS.MulticlusterV1beta1().ServiceImports("").List(ctx, one)
		}
		if err != nil {
			return err
		}
	}
	if _, err := m.Kube.CoreV1().Services("").List(ctx, one); err != nil {
		return err
	}
	if _, err := m.Kube.DiscoveryV1().EndpointSlices("").List(ctx, one); err != nil {
		return err
	}
	_, err := m.Kube.CoreV1().Namespaces().List(ctx, one)
	return err
}

// checkAccess checks that the importer may still make every call it
// makes in m (probeReads, then the reviews of accesses), or returns the
// last answer while it is fresh: the access check interval for an answer
// that found nothing missing, forbiddenRecheckAfter for one that found a
// refusal or after a refusal was seen (recheckSoon). Only answers are
// kept: a check that failed because the member did not answer (a
// timeout, a broken connection, a 5xx) is made again at the next probe.
// A call it may not make is a Forbidden error naming it.
func (m *Member) checkAccess(ctx context.Context) error {
	m.access.mu.Lock()
	defer m.access.mu.Unlock()
	if at := m.access.at; !at.IsZero() {
		keep := m.accessEvery
		if keep <= 0 {
			keep = DefaultAccessCheckInterval
		}
		if m.access.err != nil || m.access.soon.Load() {
			keep = forbiddenRecheckAfter
		}
		if time.Since(at) < keep {
			return m.access.err
		}
	}
	m.access.soon.Store(false)
	err := m.probeReads(ctx)
	if err == nil {
		err = m.checkWrites(ctx)
	}
	if err == nil || readRefused(err) {
		m.access.at, m.access.err = time.Now(), err
	} else {
		m.access.at = time.Time{}
	}
	return err
}

// clusterScopeRulesNamespace is the namespace a SelfSubjectRulesReview
// names to learn what the importer may do in every namespace. The review
// needs a namespace and answers with the rules granted cluster-wide and
// those granted in that namespace, unmarked; the importer's calls are all
// over every namespace, which only cluster-wide grants allow. No
// namespace can have this name (a colon is not allowed in one), so no
// RoleBinding adds to the answer.
const clusterScopeRulesNamespace = "mcs-importer:cluster-scope"

// checkWrites checks that the importer may make every call in accesses:
// with one SelfSubjectRulesReview where the member's authorizers can list
// the rules they grant (RBAC, ABAC, AlwaysAllow), else with a
// SelfSubjectAccessReview for each call (a webhook authorizer, or a
// review that could not decide).
func (m *Member) checkWrites(ctx context.Context) error {
	all := m.accesses()
	if err, decided := m.checkByRules(ctx, all); decided {
		return err
	}
	return m.checkEach(ctx, all)
}

// checkByRules matches every call in all against the rules one
// SelfSubjectRulesReview returns. decided is false where the answer
// cannot be relied on: the review refused or not served, its rules
// incomplete, or a call found missing while the evaluation reported an
// error (a binding to a role that does not exist, say).
func (m *Member) checkByRules(ctx context.Context, all []access) (err error, decided bool) {
	review, err := m.Kube.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: clusterScopeRulesNamespace},
	}, metav1.CreateOptions{})
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err):
		// The review itself refused or not served: ask call by call.
		return nil, false
	case err != nil:
		// No answer (a timeout, a broken connection, an overloaded
		// server): the calls one by one would fare no better.
		return err, true
	case review.Status.Incomplete:
		return nil, false
	}
	for _, a := range all {
		if !rulesAllow(review.Status.ResourceRules, a) {
			if review.Status.EvaluationError != "" {
				return nil, false
			}
			return a.forbidden(), true
		}
	}
	return nil, true
}

// rulesAllow reports whether one of rules allows a over every object,
// as RBAC matches them: "*" for any verb, group or resource, "*/sub" for
// any resource's subresource sub, and a rule naming objects
// (resourceNames) allowing no call over all of them.
func rulesAllow(rules []authorizationv1.ResourceRule, a access) bool {
	combined := a.resource
	if a.subresource != "" {
		combined += "/" + a.subresource
	}
	for _, r := range rules {
		if len(r.ResourceNames) > 0 || !matchesOrAll(r.Verbs, a.verb) || !matchesOrAll(r.APIGroups, a.group) {
			continue
		}
		for _, res := range r.Resources {
			if res == "*" || res == combined || (a.subresource != "" && res == "*/"+a.subresource) {
				return true
			}
		}
	}
	return false
}

func matchesOrAll(values []string, v string) bool {
	for _, x := range values {
		if x == "*" || x == v {
			return true
		}
	}
	return false
}

func (a access) forbidden() error {
	return apierrors.NewForbidden(schema.GroupResource{Group: a.group, Resource: a.resource}, "",
		fmt.Errorf("the importer may not %s here", a))
}

// checkEach asks a SelfSubjectAccessReview for every call in all, at once.
func (m *Member) checkEach(ctx context.Context, all []access) error {
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
				errs[i] = a.forbidden()
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

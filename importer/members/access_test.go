package members

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rbacclient "k8s.io/client-go/kubernetes/typed/rbac/v1"
	"k8s.io/client-go/rest"

	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// The access check covers every verb the importer uses, reads included:
// a role that keeps listing Services but may no longer watch them (the
// Services cache would stay at its last list) fails the probe with a
// Forbidden error naming the verb and the resource. Real API server and
// RBAC; the member is reached as a user bound to a ClusterRole the test
// edits.
func TestProbeCoversWatch(t *testing.T) {
	set := cluster.Start(t, cluster.Names("east")...)
	east := set.Get("east")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const user = "importer-probe"
	all := []string{"get", "list", "watch", "create", "update", "delete"}
	rules := importerRules
	m, roles := memberAs(ctx, t, east, user, rules(all...))
	probeAfresh := func() error {
		m.access.mu.Lock()
		m.access.at = time.Time{}
		m.access.mu.Unlock()
		return m.Probe(ctx, 10*time.Second)
	}
	require.Eventually(t, func() bool { return probeAfresh() == nil }, 30*time.Second, 100*time.Millisecond,
		"the full role never passed: %v", probeAfresh())

	role, err := roles.Get(ctx, user, metav1.GetOptions{})
	require.NoError(t, err)
	role.Rules = rules("get", "list", "create", "update", "delete") // no watch
	role, err = roles.Update(ctx, role, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return probeAfresh() != nil }, 30*time.Second, 100*time.Millisecond,
		"the probe passed without watch on Services")
	err = probeAfresh()
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Contains(t, err.Error(), "may not watch services")
	assert.Contains(t, Reason(err), "forbidden")

	// A refusal is kept for forbiddenRecheckAfter, then asked again at
	// every probe: the member is back soon after its role is.
	role.Rules = rules(all...)
	role, err = roles.Update(ctx, role, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Error(t, m.Probe(ctx, 10*time.Second), "asked again within forbiddenRecheckAfter")
	require.Eventually(t, func() bool { return m.Probe(ctx, 10*time.Second) == nil }, 30*time.Second, 100*time.Millisecond,
		"the role restored, the probe still failed")

	// An allowed answer is kept for the access check interval; a write refused
	// with 403 has the permissions asked again at the next probe once
	// forbiddenRecheckAfter has passed, well within it.
	role.Rules = rules("get", "list", "watch", "create", "delete") // no update
	_, err = roles.Update(ctx, role, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, m.Probe(ctx, 10*time.Second), "the last answer, kept")
	m.WriteForbidden()
	require.Eventually(t, func() bool { return m.Probe(ctx, 10*time.Second) != nil }, 10*time.Second, 100*time.Millisecond,
		"a refused write did not have the permissions asked again")
	assert.Contains(t, m.Probe(ctx, 10*time.Second).Error(), "may not update services")
}

// Between full access checks a probe is one request: an idle importer's
// cost, in itself and in every member's API server, is its probes. Real
// API server; the requests counted under the member's transport.
func TestProbeIsOneRequestBetweenChecks(t *testing.T) {
	set := cluster.Start(t, cluster.Names("east")...)
	east := set.Get("east")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var requests, accessReviews, rulesReviews atomic.Int64
	cfg := rest.CopyConfig(east.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			requests.Add(1)
			switch {
			case strings.HasSuffix(req.URL.Path, "/selfsubjectaccessreviews"):
				accessReviews.Add(1)
			case strings.HasSuffix(req.URL.Path, "/selfsubjectrulesreviews"):
				rulesReviews.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	m, err := Connect(ctx, cfg, "east")
	require.NoError(t, err)
	m.Importing, m.ExportConditions = true, true
	require.NoError(t, m.Probe(ctx, 10*time.Second), "the first probe, with the full check")
	full := requests.Load()
	const probes = 10
	for range probes {
		require.NoError(t, m.Probe(ctx, 10*time.Second))
	}
	t.Logf("measured: first probe %d requests; %d probes after it %d", full, probes, requests.Load()-full)
	// RBAC lists the rules it grants: every call is matched against one
	// SelfSubjectRulesReview, none asked on its own.
	assert.Equal(t, int64(1), rulesReviews.Load(), "rules reviews of the full check")
	assert.Zero(t, accessReviews.Load(), "access reviews of the full check")
	assert.Equal(t, int64(probes), requests.Load()-full, "requests of the probes between full checks")

	// A refused read (a cache's list or watch) has the full check made
	// at the next probe after forbiddenRecheckAfter.
	m.recheckSoon()
	time.Sleep(forbiddenRecheckAfter)
	before := requests.Load()
	require.NoError(t, m.Probe(ctx, 10*time.Second))
	assert.Equal(t, int64(2), rulesReviews.Load(), "the full check after a refusal")
	assert.Greater(t, requests.Load()-before, int64(2), "the full check after a refusal: the reads too")
}

// The rules review decides as the access reviews do, call by call, for
// roles that grant by wildcard, by "*/status", by naming objects, or only
// in one namespace: the same calls allowed, the same first call refused.
// Real API server and RBAC; the member reached as a user whose
// ClusterRole the test edits.
func TestRulesReviewDecidesAsAccessReviews(t *testing.T) {
	set := cluster.Start(t, cluster.Names("east")...)
	east := set.Get("east")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const user = "importer-rules"
	all := []string{"get", "list", "watch", "create", "update", "delete"}
	m, roles := memberAs(ctx, t, east, user, importerRules(all...))

	// Every call allowed in "grantedIn" only: a RoleBinding there does
	// not allow calls over every namespace.
	const ns = "granted-in"
	_, err := east.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = east.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	withoutServices := slices.Delete(importerRules(all...), 2, 3)
	statusByWildcard := importerRules(all...)
	statusByWildcard[1].Resources = []string{"*/status"}
	namedServices := importerRules(all...)
	namedServices[2].ResourceNames = []string{"one"}
	cases := []struct {
		name  string
		rules []rbacv1.PolicyRule
		// refused: what the first refused call's error says; "" for none.
		refused string
	}{
		{"every call named", importerRules(all...), ""},
		{"everything by wildcard", []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}, ""},
		{"status of any resource", statusByWildcard, ""},
		{"no watch on services", importerRules("get", "list", "create", "update", "delete"), "may not watch services"},
		{"services granted in one namespace only", withoutServices, "may not list services"},
		{"services granted by name only", namedServices, "may not list services"},
		{"nothing", nil, "may not list serviceexports." + mcsGroup},
	}
	for _, tc := range cases {
		role, err := roles.Get(ctx, user, metav1.GetOptions{})
		require.NoError(t, err)
		role.Rules = tc.rules
		_, err = roles.Update(ctx, role, metav1.UpdateOptions{})
		require.NoError(t, err)
		// The authorizer learns of the role from its informers.
		var eachErr error
		settled := assert.Eventually(t, func() bool {
			eachErr = m.checkEach(ctx, m.accesses())
			if tc.refused == "" {
				return eachErr == nil
			}
			return eachErr != nil && strings.Contains(eachErr.Error(), tc.refused)
		}, 30*time.Second, 100*time.Millisecond)
		require.True(t, settled, "%s: the access reviews never said %q: %v", tc.name, tc.refused, eachErr)
		rulesErr, decided := m.checkByRules(ctx, m.accesses())
		require.True(t, decided, "%s: RBAC's rules are complete", tc.name)
		if tc.refused == "" {
			assert.NoError(t, rulesErr, tc.name)
			continue
		}
		if assert.Error(t, rulesErr, tc.name) {
			assert.Equal(t, eachErr.Error(), rulesErr.Error(), tc.name)
			assert.True(t, apierrors.IsForbidden(rulesErr), tc.name)
		}
	}

	// Where the rules review is refused, every call is asked on its own.
	basic, err := roles.Get(ctx, "system:basic-user", metav1.GetOptions{})
	require.NoError(t, err)
	for i, r := range basic.Rules {
		basic.Rules[i].Resources = slices.DeleteFunc(r.Resources, func(res string) bool { return res == "selfsubjectrulesreviews" })
	}
	_, err = roles.Update(ctx, basic, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, decided := m.checkByRules(ctx, m.accesses())
		return !decided
	}, 30*time.Second, 100*time.Millisecond, "the rules review was never refused")
	role, err := roles.Get(ctx, user, metav1.GetOptions{})
	require.NoError(t, err)
	role.Rules = importerRules("get", "list", "create", "update", "delete")
	_, err = roles.Update(ctx, role, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		err := m.checkWrites(ctx)
		return err != nil && strings.Contains(err.Error(), "may not watch services")
	}, 30*time.Second, 100*time.Millisecond, "without the rules review, a missing watch was not found")
	role, err = roles.Get(ctx, user, metav1.GetOptions{})
	require.NoError(t, err)
	role.Rules = importerRules(all...)
	_, err = roles.Update(ctx, role, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return m.checkWrites(ctx) == nil }, 30*time.Second, 100*time.Millisecond,
		"without the rules review, the full role never passed")
}

// rulesAllow matches as RBAC does (the agreement with the API server's
// own decisions is TestRulesReviewDecidesAsAccessReviews).
func TestRulesAllow(t *testing.T) {
	status := access{mcsGroup, "serviceimports", "status", "update"}
	list := access{"", "services", "", "list"}
	rule := func(groups, resources, verbs []string, names ...string) authorizationv1.ResourceRule {
		return authorizationv1.ResourceRule{APIGroups: groups, Resources: resources, Verbs: verbs, ResourceNames: names}
	}
	core, every := []string{""}, []string{"*"}
	for _, tc := range []struct {
		name  string
		rules []authorizationv1.ResourceRule
		a     access
		want  bool
	}{
		{"exact", []authorizationv1.ResourceRule{rule(core, []string{"services"}, []string{"list"})}, list, true},
		{"wildcards", []authorizationv1.ResourceRule{rule(every, every, every)}, status, true},
		{"another verb", []authorizationv1.ResourceRule{rule(core, []string{"services"}, []string{"get", "watch"})}, list, false},
		{"another group", []authorizationv1.ResourceRule{rule([]string{"apps"}, []string{"services"}, every)}, list, false},
		{"named objects", []authorizationv1.ResourceRule{rule(core, []string{"services"}, every, "one")}, list, false},
		{"the resource, not its status", []authorizationv1.ResourceRule{rule(every, []string{"serviceimports"}, every)}, status, false},
		{"resource/status", []authorizationv1.ResourceRule{rule([]string{mcsGroup}, []string{"serviceimports/status"}, []string{"update"})}, status, true},
		{"*/status", []authorizationv1.ResourceRule{rule([]string{mcsGroup}, []string{"*/status"}, []string{"update"})}, status, true},
		{"*/status, not the resource", []authorizationv1.ResourceRule{rule(every, []string{"*/status"}, every)}, list, false},
		{"*/scale, not status", []authorizationv1.ResourceRule{rule(every, []string{"*/scale"}, every)}, status, false},
		{"across rules", []authorizationv1.ResourceRule{rule(core, []string{"services"}, []string{"get"}), rule(core, []string{"services"}, []string{"list"})}, list, true},
		{"none", nil, list, false},
	} {
		assert.Equal(t, tc.want, rulesAllow(tc.rules, tc.a), tc.name)
	}
}

// memberAs connects to c as user, bound cluster-wide to a ClusterRole
// named user with rules, and returns the member (importing and writing
// export conditions) and the ClusterRoles client to edit the role with.
func memberAs(ctx context.Context, t *testing.T, c *cluster.Cluster, user string, rules []rbacv1.PolicyRule) (*Member, rbacclient.ClusterRoleInterface) {
	t.Helper()
	roles := c.Kube.RbacV1().ClusterRoles()
	cfg := impersonated(ctx, t, c, user, rules)
	// The API server's authorizer learns of the new binding from its own
	// informers: until then even the ClusterProperty read is forbidden.
	var m *Member
	var connErr error
	connected := assert.Eventually(t, func() bool {
		m, connErr = Connect(ctx, cfg, c.Name)
		return connErr == nil
	}, 30*time.Second, 100*time.Millisecond)
	require.True(t, connected, "never connected as %s: %v", user, connErr)
	m.Importing, m.ExportConditions = true, true
	return m, roles
}

// importerRules is a ClusterRole's rules granting every call the importer
// makes, with serviceVerbs on Services.
func importerRules(serviceVerbs ...string) []rbacv1.PolicyRule {
	all := []string{"get", "list", "watch", "create", "update", "delete"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{mcsGroup}, Resources: []string{"serviceexports", "serviceimports"}, Verbs: all},
		{APIGroups: []string{mcsGroup}, Resources: []string{"serviceexports/status", "serviceimports/status"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: serviceVerbs},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: all},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"about.k8s.io"}, Resources: []string{"clusterproperties"}, Verbs: []string{"get"}},
	}
}

// impersonated binds a ClusterRole of rules to user in c and returns c's
// config acting as user.
func impersonated(ctx context.Context, t *testing.T, c *cluster.Cluster, user string, rules []rbacv1.PolicyRule) *rest.Config {
	t.Helper()
	_, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}

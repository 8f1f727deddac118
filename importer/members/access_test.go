package members

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	rules := func(serviceVerbs ...string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{
			{APIGroups: []string{mcsGroup}, Resources: []string{"serviceexports", "serviceimports"}, Verbs: all},
			{APIGroups: []string{mcsGroup}, Resources: []string{"serviceexports/status", "serviceimports/status"}, Verbs: []string{"update"}},
			{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: serviceVerbs},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: all},
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"about.k8s.io"}, Resources: []string{"clusterproperties"}, Verbs: []string{"get"}},
		}
	}
	roles := east.Kube.RbacV1().ClusterRoles()
	_, err := roles.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules(all...)}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = east.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg := rest.CopyConfig(east.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	// The API server's authorizer learns of the new binding from its own
	// informers: until then even the ClusterProperty read is forbidden.
	var m *Member
	var connErr error
	connected := assert.Eventually(t, func() bool {
		m, connErr = Connect(ctx, cfg, "east")
		return connErr == nil
	}, 30*time.Second, 100*time.Millisecond)
	require.True(t, connected, "never connected as %s: %v", user, connErr)
	m.Importing, m.ExportConditions = true, true
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
	var requests atomic.Int64
	cfg := rest.CopyConfig(east.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			requests.Add(1)
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
	assert.Greater(t, full, int64(len(m.accesses())), "the first probe checked every access")
	assert.Equal(t, int64(probes), requests.Load()-full, "requests of the probes between full checks")

	// A refused read (a cache's list or watch) has the full check made
	// at the next probe after forbiddenRecheckAfter.
	m.recheckSoon()
	time.Sleep(forbiddenRecheckAfter)
	before := requests.Load()
	require.NoError(t, m.Probe(ctx, 10*time.Second))
	assert.Greater(t, requests.Load()-before, int64(len(m.accesses())), "the full check after a refusal")
}

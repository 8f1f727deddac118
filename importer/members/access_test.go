package members

import (
	"context"
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
		m.writeCheck.mu.Lock()
		m.writeCheck.at = time.Time{}
		m.writeCheck.mu.Unlock()
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

	// The answer is kept for writeCheckEvery: a probe within it does not
	// ask again.
	role.Rules = rules(all...)
	role, err = roles.Update(ctx, role, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Error(t, m.Probe(ctx, 10*time.Second), "asked again before writeCheckEvery")
	require.Eventually(t, func() bool { return probeAfresh() == nil }, 30*time.Second, 100*time.Millisecond)

	// A write refused with 403 has the permissions asked again at the
	// next probe once forbiddenRecheckAfter has passed, well within
	// writeCheckEvery.
	role.Rules = rules("get", "list", "watch", "create", "delete") // no update
	_, err = roles.Update(ctx, role, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, m.Probe(ctx, 10*time.Second), "the last answer, kept")
	m.WriteForbidden()
	require.Eventually(t, func() bool { return m.Probe(ctx, 10*time.Second) != nil }, 10*time.Second, 100*time.Millisecond,
		"a refused write did not have the permissions asked again")
	assert.Contains(t, m.Probe(ctx, 10*time.Second).Error(), "may not update services")
}

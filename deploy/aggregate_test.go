package deploy_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// access is one question put to the authorizer: may user do verb on
// group/resource in namespace?
type access struct {
	user, namespace, verb, group, resource string
}

func (a access) String() string {
	return fmt.Sprintf("%s %s %s.%s in %s", a.user, a.verb, a.resource, a.group, a.namespace)
}

// allowed asks the API server (SubjectAccessReview, as the admin) which of
// the accesses are allowed.
func allowed(ctx context.Context, kc kubernetes.Interface, qs []access) (map[access]bool, error) {
	out := map[access]bool{}
	for _, q := range qs {
		res, subres, _ := strings.Cut(q.resource, "/")
		r, err := kc.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: q.user, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: q.namespace, Verb: q.verb, Group: q.group, Resource: res, Subresource: subres}},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		out[q] = r.Status.Allowed
	}
	return out, nil
}

// aggregated says whether each of the named ClusterRoles holds every rule
// of the ClusterRoles its aggregationRule selects.
func aggregated(ctx context.Context, kc kubernetes.Interface, names ...string) error {
	for _, name := range names {
		role, err := kc.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if role.AggregationRule == nil {
			return fmt.Errorf("ClusterRole %s aggregates nothing", name)
		}
		for _, sel := range role.AggregationRule.ClusterRoleSelectors {
			s, err := metav1.LabelSelectorAsSelector(&sel)
			if err != nil {
				return err
			}
			parts, err := kc.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: s.String()})
			if err != nil {
				return err
			}
			for _, part := range parts.Items {
				for _, r := range part.Rules {
					if !slices.ContainsFunc(role.Rules, func(have rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(have, r) }) {
						return fmt.Errorf("ClusterRole %s lacks %s's rule %v", name, part.Name, r)
					}
				}
			}
		}
	}
	return nil
}

// The aggregated roles in deploy/member let app teams export their own
// Services: bound to the built-in edit (or admin) ClusterRole in a
// namespace, a user may write ServiceExports there and read ServiceImports;
// bound to view, read ServiceImports. Nothing else changes: not in other
// namespaces, not ServiceImport or EndpointSlice writes, not statuses.
// kube-controller-manager's clusterrole-aggregation controller does the
// merging, as in a real cluster.
func TestAggregatedRoles(t *testing.T) {
	set := cluster.Start(t, cluster.Spec{Name: "member", ControlPlane: true})
	c := set.Clusters[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const teamA, teamB = "team-a", "team-b"
	roles := map[string]string{"alice": "edit", "bob": "view", "carol": "admin"}
	for _, ns := range []string{teamA, teamB} {
		_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for user, role := range roles {
		_, err := c.Kube.RbacV1().RoleBindings(teamA).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	var qs []access
	for user := range roles {
		for _, ns := range []string{teamA, teamB} {
			for _, gr := range [][2]string{
				{"multicluster.x-k8s.io", "serviceexports"}, {"multicluster.x-k8s.io", "serviceexports/status"},
				{"multicluster.x-k8s.io", "serviceimports"}, {"multicluster.x-k8s.io", "serviceimports/status"},
				{"discovery.k8s.io", "endpointslices"},
			} {
				for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"} {
					qs = append(qs, access{user, ns, verb, gr[0], gr[1]})
				}
			}
		}
	}
	// The controller fills the built-in roles in at start-up: measure once
	// it has.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.NoError(ct, aggregated(ctx, c.Kube, "admin", "edit", "view"))
	}, time.Minute, 200*time.Millisecond)
	before, err := allowed(ctx, c.Kube, qs)
	require.NoError(t, err)
	for _, q := range qs {
		if q.group == "multicluster.x-k8s.io" {
			require.False(t, before[q], "before the roles: %s", q)
		}
	}

	var objs []*unstructured.Unstructured
	for _, o := range render(t, "member") {
		if o.GetKind() == "ClusterRole" && o.GetLabels()["rbac.authorization.k8s.io/aggregate-to-edit"]+
			o.GetLabels()["rbac.authorization.k8s.io/aggregate-to-view"] != "" {
			objs = append(objs, o)
		}
	}
	require.Len(t, objs, 2, "the aggregated roles in deploy/member")
	apply(t, c, objs, false)

	// What each built-in role gains, in team-a only.
	gained := func(q access) bool {
		if q.namespace != teamA {
			return false
		}
		switch q.resource {
		case "serviceexports":
			return roles[q.user] != "view" && q.verb != "deletecollection"
		case "serviceimports":
			return slices.Contains([]string{"get", "list", "watch"}, q.verb)
		}
		return false
	}
	// The controller merges the rules in soon after the roles appear.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		after, err := allowed(ctx, c.Kube, qs)
		if !assert.NoError(ct, err) {
			return
		}
		for _, q := range qs {
			assert.Equal(ct, before[q] || gained(q), after[q], "%s", q)
		}
	}, time.Minute, 500*time.Millisecond)

	// The same, through the API as those users.
	as := func(user string) (kubernetes.Interface, mcsclient.Interface) {
		cfg := rest.CopyConfig(c.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		kc, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		mc, err := mcsclient.NewForConfig(cfg)
		require.NoError(t, err)
		return kc, mc
	}
	export := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "cart"}}
	aliceKube, alice := as("alice")
	_, err = alice.MulticlusterV1beta1().ServiceExports(teamA).Create(ctx, export, metav1.CreateOptions{})
	require.NoError(t, err, "edit in team-a exports there")
	_, err = alice.MulticlusterV1beta1().ServiceExports(teamB).Create(ctx, export, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "edit in team-a exports in team-b: %v", err)
	_, err = alice.MulticlusterV1beta1().ServiceImports(teamA).Create(ctx, &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "cart"},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "edit creates ServiceImports: %v", err)
	_, err = aliceKube.DiscoveryV1().EndpointSlices(teamA).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "cart-mirror"},
		AddressType: discoveryv1.AddressTypeIPv4,
	}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "edit creates EndpointSlices: %v", err)
	_, err = alice.MulticlusterV1beta1().ServiceImports(teamA).List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "edit reads ServiceImports")

	_, bob := as("bob")
	_, err = bob.MulticlusterV1beta1().ServiceImports(teamA).List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "view reads ServiceImports")
	_, err = bob.MulticlusterV1beta1().ServiceImports(teamB).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "view in team-a reads team-b: %v", err)
	_, err = bob.MulticlusterV1beta1().ServiceExports(teamA).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "view exports: %v", err)

	_, carol := as("carol")
	require.NoError(t, carol.MulticlusterV1beta1().ServiceExports(teamA).Delete(ctx, "cart", metav1.DeleteOptions{}), "admin withdraws an export")
}

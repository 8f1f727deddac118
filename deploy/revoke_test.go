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
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/deploy/crds"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

// The importer running with the shipped member role, when one member takes
// its access away: its binding deleted (403), then its MCS CRDs deleted
// (404). That member is unreachable with the reason, then withdrawn after
// the grace period; the other member keeps importing; when access (or the
// CRDs) come back the member recovers by itself, without a restart.
func TestImporterAccessRevoked(t *testing.T) {
	bins := procs.Build(t)
	set := cluster.Start(t, cluster.Spec{Name: "east", ClusterID: "east"}, cluster.Spec{Name: "west", ClusterID: "west"})
	east, west := set.Clusters[0], set.Clusters[1]
	applyRBAC(t, set)
	kubeconfig := tokenKubeconfig(t, set, "mcs-importer-member")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, c := range set.Clusters {
		_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	export := func(c *cluster.Cluster, name string) { exportShop(ctx, t, c, name) }
	imported := func(c *cluster.Cluster, name string) bool { return importedShop(ctx, c, name) }
	export(west, "cart")

	addr := fmt.Sprintf("127.0.0.1:%d", procs.FreePort(t))
	imp := procs.Start(t, "mcs-importer", bins.Importer, "--kubeconfig", kubeconfig, "--contexts", "east,west",
		"--metrics-addr", addr, "--health-probe-interval", "200ms", "--health-access-check-interval", "5s", "--endpoint-grace-period", "4s")
	readyz := func() string { return readyzAt(addr) }
	require.Eventually(t, func() bool { return imported(east, "cart") && imported(west, "cart") }, time.Minute, 200*time.Millisecond,
		"never imported:\n%s", imp.Output())

	t.Run("binding deleted", func(t *testing.T) {
		crb := "mcs-dns:importer"
		require.NoError(t, west.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, crb, metav1.DeleteOptions{}))
		revoked := time.Now()
		require.Eventually(t, func() bool { return strings.Contains(readyz(), "member west: unreachable: forbidden") },
			30*time.Second, 100*time.Millisecond, "readyz:\n%s", readyz())
		t.Logf("measured: reported forbidden %s after the binding went", time.Since(revoked).Round(time.Millisecond))
		export(east, "pay")
		require.Eventually(t, func() bool { return imported(east, "pay") }, 30*time.Second, 200*time.Millisecond, "east stopped importing")
		// After the grace period west's export is withdrawn from east.
		require.Eventually(t, func() bool {
			_, err := east.MCS.MulticlusterV1beta1().ServiceImports("shop").Get(ctx, "cart", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, 30*time.Second, 200*time.Millisecond, "west's export never withdrawn:\n%s", imp.Output())
		assert.GreaterOrEqual(t, time.Since(revoked), 4*time.Second, "withdrawn before the grace period")
		assert.Contains(t, readyz(), "member west: down: forbidden")
		assert.Regexp(t, `withdrawn after the grace period.*cluster=west services=1`, imp.Output())

		applyRBAC(t, set) // the binding is back
		restored := time.Now()
		require.Eventually(t, func() bool { return imported(west, "pay") && imported(east, "cart") }, time.Minute, 200*time.Millisecond,
			"west never recovered:\n%s", imp.Output())
		t.Logf("measured: recovered %s after the binding came back", time.Since(restored).Round(time.Millisecond))
		assert.Contains(t, readyz(), "member west: up")
	})

	// One resource taken out of the member role: the member is not Up
	// with that resource's data frozen, it is unreachable with a reason
	// naming it, and back when the role is.
	revokeOne := func(t *testing.T, resource string, keepVerbs ...string) {
		role, err := west.Kube.RbacV1().ClusterRoles().Get(ctx, "mcs-dns:importer", metav1.GetOptions{})
		require.NoError(t, err)
		for i, r := range role.Rules {
			if slices.Contains(r.Resources, resource) {
				role.Rules[i].Verbs = keepVerbs
			}
		}
		role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return len(r.Verbs) == 0 })
		_, err = west.Kube.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{})
		require.NoError(t, err)
		revoked := time.Now()
		require.Eventually(t, func() bool {
			r := readyz()
			return strings.Contains(r, "member west: unreachable: forbidden") && strings.Contains(r, resource)
		}, time.Minute, 100*time.Millisecond, "readyz:\n%s", readyz())
		t.Logf("measured: reported forbidden (%s) %s after the role lost it", resource, time.Since(revoked).Round(time.Millisecond))
		applyRBAC(t, set)
		require.Eventually(t, func() bool { return strings.Contains(readyz(), "member west: up") }, time.Minute, 100*time.Millisecond,
			"readyz:\n%s", readyz())
		require.Eventually(t, func() bool { return imported(west, "cart") && imported(east, "cart") }, time.Minute, 200*time.Millisecond,
			"west never recovered:\n%s", imp.Output())
	}
	t.Run("EndpointSlices no longer readable", func(t *testing.T) { revokeOne(t, "endpointslices") })
	t.Run("Services no longer writable", func(t *testing.T) { revokeOne(t, "services", "get", "list", "watch") })

	t.Run("CRDs deleted and re-created", func(t *testing.T) {
		ext, err := apiextensionsclient.NewForConfig(west.Config)
		require.NoError(t, err)
		all, err := crds.All()
		require.NoError(t, err)
		var mcs []string
		for _, c := range all {
			if c.Spec.Group == mcsapi.Group {
				mcs = append(mcs, c.Name)
				require.NoError(t, ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, c.Name, metav1.DeleteOptions{}))
			}
		}
		require.Eventually(t, func() bool { return strings.Contains(readyz(), "member west: unreachable: MCS API not served") },
			30*time.Second, 100*time.Millisecond, "readyz:\n%s", readyz())
		require.Eventually(t, func() bool { return strings.Contains(readyz(), "member west: down") }, 30*time.Second, 100*time.Millisecond)
		// Deleting the CRDs deleted west's export: east drops it.
		require.Eventually(t, func() bool {
			_, err := east.MCS.MulticlusterV1beta1().ServiceImports("shop").Get(ctx, "cart", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, 30*time.Second, 200*time.Millisecond)

		for _, c := range all {
			if c.Spec.Group != mcsapi.Group {
				continue
			}
			c = c.DeepCopy()
			require.Eventually(t, func() bool {
				_, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, c, metav1.CreateOptions{})
				return err == nil // AlreadyExists while the old one is still being deleted
			}, time.Minute, 200*time.Millisecond, "re-creating %s", c.Name)
		}
		recreated := time.Now()
		// The export is made again; west rejoins and both imports are back.
		require.Eventually(t, func() bool {
			_, err := west.MCS.MulticlusterV1beta1().ServiceExports("shop").Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "cart"}}, metav1.CreateOptions{})
			return err == nil
		}, time.Minute, 200*time.Millisecond)
		require.Eventually(t, func() bool {
			return imported(east, "cart") && imported(west, "cart") && imported(west, "pay")
		}, time.Minute, 200*time.Millisecond, "west never recovered:\n%s", imp.Output())
		t.Logf("measured: recovered %s after the CRDs came back (%v)", time.Since(recreated).Round(time.Millisecond), mcs)
		assert.Contains(t, readyz(), "member west: up")
	})
	require.False(t, imp.Exited(), "the importer exited:\n%s", imp.Output())
}

package helm_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"

	"github.com/mcs-dns/mcs-dns/test/cluster"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// helmConfig is what `helm --kube-context hub -n mcs-dns-system` uses:
// the cluster from the set's kubeconfig, release records in Secrets.
func helmConfig(t *testing.T, set *cluster.Set, context string) *action.Configuration {
	t.Helper()
	getter := genericclioptions.NewConfigFlags(false)
	getter.KubeConfig = ptr.To(set.Kubeconfig)
	getter.Context = ptr.To(context)
	getter.Namespace = ptr.To(namespace)
	// Not ~/.kube/cache.
	getter.CacheDir = ptr.To(filepath.Join(t.TempDir(), "cache"))
	cfg := quiet()
	require.NoError(t, cfg.Init(getter, namespace, "secret"))
	return cfg
}

// TestInstallUpgradeUninstall installs the chart (importer, CoreDNS, member
// identity and rules) into a real API server, upgrades it with other
// values and uninstalls it. The test clusters run no kubelet, so the
// Deployments never get pods: Helm is told not to wait for readiness (only
// for hooks, of which the chart has none), and the test checks the objects
// the API server stores.
func TestInstallUpgradeUninstall(t *testing.T) {
	set := cluster.Start(t, cluster.Names("hub")...)
	hub := set.Clusters[0]
	kc, err := os.ReadFile(set.Kubeconfig)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cfg := helmConfig(t, set, "hub")
	vals := map[string]any{
		"importer": map[string]any{
			"contexts":   []any{"hub"},
			"kubeconfig": map[string]any{"content": string(kc)},
		},
		// The test cluster has no PrometheusRule CRD.
		"monitoring": map[string]any{"rules": map[string]any{"enabled": true, "kind": "ConfigMap"}},
	}

	inst := action.NewInstall(cfg)
	inst.ReleaseName = releaseName
	inst.Namespace = namespace
	inst.CreateNamespace = true
	inst.WaitStrategy = kube.HookOnlyStrategy
	inst.Timeout = time.Minute
	// The API server validates every object (Helm applies with strict
	// field validation); Helm's own client-side check against the OpenAPI
	// schema would only add ten seconds per action under -race.
	inst.DisableOpenAPIValidation = true
	r, err := inst.RunWithContext(ctx, loadChart(t, chartDir), vals)
	require.NoError(t, err, "install")
	rel := r.(*releasev1.Release)
	require.Equal(t, "deployed", rel.Info.Status.String())
	require.Equal(t, 1, rel.Version)

	client := hub.Kube
	dep, err := client.AppsV1().Deployments(namespace).Get(ctx, "mcs-importer", metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, dep.Spec.Template.Spec.Containers[0].Args, "--contexts=hub")
	require.Equal(t, int32(2), *dep.Spec.Replicas)
	sum := dep.Spec.Template.Annotations["checksum/kubeconfig"]
	require.NotEmpty(t, sum)
	sec, err := client.CoreV1().Secrets(namespace).Get(ctx, "mcs-importer-kubeconfig", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, kc, sec.Data["kubeconfig"])
	for _, name := range []string{"mcs-importer", "mcs-dns"} {
		_, err := client.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "PodDisruptionBudget %s", name)
	}
	_, err = client.AppsV1().Deployments(namespace).Get(ctx, "mcs-dns", metav1.GetOptions{})
	require.NoError(t, err)
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, "mcs-dns-corefile", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, cm.Data["Corefile"], "cluster_id")
	_, err = client.CoreV1().ConfigMaps(namespace).Get(ctx, "mcs-dns-rules", metav1.GetOptions{})
	require.NoError(t, err)
	for _, name := range []string{"mcs-dns:importer", "mcs-dns:coredns", "mcs-dns:aggregate-to-edit", "mcs-dns:aggregate-to-view"} {
		_, err := client.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "ClusterRole %s", name)
	}
	_, err = client.CoreV1().ServiceAccounts(namespace).Get(ctx, "mcs-importer-member", metav1.GetOptions{})
	require.NoError(t, err)

	// Upgrade: another member list and grace period, three replicas, no
	// importer PDB, a cluster ID in the Corefile.
	up := action.NewUpgrade(cfg)
	up.Namespace = namespace
	up.WaitStrategy = kube.HookOnlyStrategy
	up.Timeout = time.Minute
	up.DisableOpenAPIValidation = true
	vals["importer"].(map[string]any)["contexts"] = []any{"hub", "spoke"}
	vals["importer"].(map[string]any)["replicas"] = 3
	vals["importer"].(map[string]any)["endpointGracePeriod"] = "5m"
	vals["importer"].(map[string]any)["podDisruptionBudget"] = map[string]any{"enabled": false}
	vals["coredns"] = map[string]any{"corefile": map[string]any{"clusterID": "hub"}}
	r, err = up.RunWithContext(ctx, releaseName, loadChart(t, chartDir), vals)
	require.NoError(t, err, "upgrade")
	rel = r.(*releasev1.Release)
	require.Equal(t, "deployed", rel.Info.Status.String())
	require.Equal(t, 2, rel.Version)

	dep, err = client.AppsV1().Deployments(namespace).Get(ctx, "mcs-importer", metav1.GetOptions{})
	require.NoError(t, err)
	a := dep.Spec.Template.Spec.Containers[0].Args
	require.Contains(t, a, "--contexts=hub,spoke")
	require.Contains(t, a, "--endpoint-grace-period=5m")
	require.Equal(t, int32(3), *dep.Spec.Replicas)
	require.Equal(t, sum, dep.Spec.Template.Annotations["checksum/kubeconfig"], "same kubeconfig, same checksum")
	_, err = client.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, "mcs-importer", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the importer's PDB is deleted: %v", err)
	_, err = client.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, "mcs-dns", metav1.GetOptions{})
	require.NoError(t, err)
	cm, err = client.CoreV1().ConfigMaps(namespace).Get(ctx, "mcs-dns-corefile", metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, cm.Data["Corefile"], "cluster_id hub")
	readStanza(t, cm.Data["Corefile"])

	// Uninstall: every object goes but the CRDs (Helm never deletes crds/).
	un := action.NewUninstall(cfg)
	un.WaitStrategy = kube.HookOnlyStrategy
	un.Timeout = time.Minute
	_, err = un.Run(releaseName)
	require.NoError(t, err, "uninstall")
	for _, check := range []struct {
		what string
		get  func() error
	}{
		{"Deployment mcs-importer", func() error {
			_, err := client.AppsV1().Deployments(namespace).Get(ctx, "mcs-importer", metav1.GetOptions{})
			return err
		}},
		{"Deployment mcs-dns", func() error {
			_, err := client.AppsV1().Deployments(namespace).Get(ctx, "mcs-dns", metav1.GetOptions{})
			return err
		}},
		{"Secret mcs-importer-kubeconfig", func() error {
			_, err := client.CoreV1().Secrets(namespace).Get(ctx, "mcs-importer-kubeconfig", metav1.GetOptions{})
			return err
		}},
		{"ClusterRole mcs-dns:importer", func() error {
			_, err := client.RbacV1().ClusterRoles().Get(ctx, "mcs-dns:importer", metav1.GetOptions{})
			return err
		}},
	} {
		// Deletion is asynchronous for objects with finalizers; none of
		// these has one, but allow the API server a moment.
		require.Eventually(t, func() bool { return apierrors.IsNotFound(check.get()) }, 30*time.Second, 100*time.Millisecond, "%s left after uninstall", check.what)
	}
	crds, err := hub.Dynamic.Resource(crdGVR).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, c := range crds.Items {
		names = append(names, c.GetName())
	}
	require.Subset(t, names, []string{"serviceexports.multicluster.x-k8s.io", "serviceimports.multicluster.x-k8s.io", "clusterproperties.about.k8s.io"})
	list := action.NewList(cfg)
	list.All = true
	rels, err := list.Run()
	require.NoError(t, err)
	require.Empty(t, rels, "no release record left")
}

// Package deploy_test proves the manifests a cluster operator applies: the
// kustomization renders, every object is accepted by a real API server
// (server-side apply, dry-run), and the roles are enough, and no more than
// enough, for our real binaries running with ServiceAccount tokens bound to
// exactly those roles.
package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

const namespace = "mcs-dns-system"

// render builds a kustomization folder the way `kubectl apply -k` does.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kustomize build %s", dir)
	var objs []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		m, err := r.Map()
		require.NoError(t, err)
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs
}

// apply server-side-applies objs (dry-run when dryRun) and fails the test
// on the first object the API server rejects.
func apply(t *testing.T, c *cluster.Cluster, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Kube.Discovery()))
	opts := metav1.PatchOptions{FieldManager: "deploy-test", Force: ptr.To(true)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s %s: not served", gvk, o.GetName())
		raw, err := o.MarshalJSON()
		require.NoError(t, err)
		res := c.Dynamic.Resource(m.Resource)
		var ri interface {
			Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*unstructured.Unstructured, error)
		} = res
		if o.GetNamespace() != "" {
			ri = res.Namespace(o.GetNamespace())
		}
		_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, raw, opts)
		require.NoError(t, err, "applying %s %s/%s", gvk.Kind, o.GetNamespace(), o.GetName())
	}
}

func TestManifestsApply(t *testing.T) {
	objs := render(t, ".")
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetKind() != "CustomResourceDefinition" && o.GetKind() != "Namespace" &&
			o.GetKind() != "ClusterRole" && o.GetKind() != "ClusterRoleBinding" {
			require.Equal(t, namespace, o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
		}
	}
	require.Equal(t, 3, kinds["CustomResourceDefinition"])
	require.Equal(t, 2, kinds["Deployment"])
	require.Equal(t, 1, kinds["ConfigMap"])
	require.Equal(t, 1, kinds["Secret"])
	require.Equal(t, 2, kinds["PodDisruptionBudget"])
	checkDisruption(t, objs)

	set := cluster.Start(t, cluster.Spec{Name: "member"})
	c := set.Clusters[0]
	// Dry-run cannot create the namespace the other objects live in, so the
	// Namespace is applied for real and everything else as a dry-run.
	var ns, rest []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			ns = append(ns, o)
		} else {
			rest = append(rest, o)
		}
	}
	apply(t, c, ns, false)
	apply(t, c, rest, true)

	// The Corefile shipped in the ConfigMap is the production example.
	for _, o := range rest {
		if o.GetKind() == "ConfigMap" {
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			require.Contains(t, data["Corefile"], "mcs clusterset.local")
		}
	}
}

// checkDisruption checks that every Deployment runs more than one replica,
// has a PodDisruptionBudget that selects its pods and lets a drain evict
// no more than one of them, and spreads its pods over nodes and zones.
func checkDisruption(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var deployments []appsv1.Deployment
	var pdbs []policyv1.PodDisruptionBudget
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d))
			deployments = append(deployments, d)
		case "PodDisruptionBudget":
			var p policyv1.PodDisruptionBudget
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &p))
			pdbs = append(pdbs, p)
		}
	}
	for _, d := range deployments {
		pods := labels.Set(d.Spec.Template.Labels)
		require.Greater(t, ptr.Deref(d.Spec.Replicas, 1), int32(1), "Deployment %s: one replica cannot survive a drain", d.Name)
		var covering []string
		for _, p := range pdbs {
			sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
			require.NoError(t, err)
			if !sel.Empty() && sel.Matches(pods) {
				covering = append(covering, p.Name)
				require.Nil(t, p.Spec.MinAvailable, "PodDisruptionBudget %s", p.Name)
				require.Equal(t, intstr.FromInt32(1), ptr.Deref(p.Spec.MaxUnavailable, intstr.IntOrString{}), "PodDisruptionBudget %s", p.Name)
			}
		}
		require.Len(t, covering, 1, "Deployment %s: PodDisruptionBudgets selecting its pods", d.Name)

		spread := map[string]bool{}
		for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
			sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
			require.NoError(t, err)
			require.True(t, !sel.Empty() && sel.Matches(pods), "Deployment %s: spread over %s counts other pods", d.Name, c.TopologyKey)
			require.Equal(t, corev1.ScheduleAnyway, c.WhenUnsatisfiable, "Deployment %s: a replica must never stay pending for spreading", d.Name)
			spread[c.TopologyKey] = true
		}
		require.Equal(t, map[string]bool{corev1.LabelHostname: true, corev1.LabelTopologyZone: true}, spread, "Deployment %s", d.Name)
	}
}

// tokenKubeconfig writes a kubeconfig whose contexts (one per cluster) use a
// fresh token of ServiceAccount namespace/sa in that cluster.
func tokenKubeconfig(t *testing.T, set *cluster.Set, sa string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range set.Clusters {
		tr, err := c.Kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}},
			metav1.CreateOptions{})
		require.NoError(t, err)
		kc.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
		kc.AuthInfos[c.Name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
		kc.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name}
	}
	kc.CurrentContext = set.Clusters[0].Name
	path := filepath.Join(t.TempDir(), sa+".kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path
}

// can asks the API server whether the kubeconfig's identity may do verb on
// resource (SelfSubjectAccessReview, as that identity).
func can(t *testing.T, kubeconfig, kubeContext, verb, group, resource string) bool {
	t.Helper()
	return canOn(t, kubeconfig, kubeContext, verb, group, resource, "", "")
}

// canOn is can for one object (name) in one namespace; "" means any.
func canOn(t *testing.T, kubeconfig, kubeContext, verb, group, resource, ns, name string) bool {
	t.Helper()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	require.NoError(t, err)
	kc, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := kc.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Group: group, Resource: resource, Namespace: ns, Name: name}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return r.Status.Allowed
}

// applyRBAC applies, for real, the member and CoreDNS roles into every cluster.
func applyRBAC(t *testing.T, set *cluster.Set) {
	var objs []*unstructured.Unstructured
	for _, dir := range []string{"member", "coredns"} {
		for _, o := range render(t, dir) {
			switch o.GetKind() {
			case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
				objs = append(objs, o)
			}
		}
	}
	for _, c := range set.Clusters {
		apply(t, c, objs, false)
	}
}

// The CoreDNS role is read-only and narrow; the plugin runs with it.
func TestCoreDNSRBAC(t *testing.T) {
	bins := procs.Build(t)
	set := cluster.Start(t, cluster.Spec{Name: "east", ClusterID: "east"})
	c := set.Clusters[0]
	applyRBAC(t, set)
	kubeconfig := tokenKubeconfig(t, set, "mcs-dns")

	require.True(t, can(t, kubeconfig, "east", "watch", "multicluster.x-k8s.io", "serviceimports"))
	require.True(t, can(t, kubeconfig, "east", "list", "discovery.k8s.io", "endpointslices"))
	for _, denied := range [][3]string{
		{"list", "about.k8s.io", "clusterproperties"},
		{"create", "multicluster.x-k8s.io", "serviceimports"},
		{"get", "", "secrets"},
		{"list", "", "services"},
		{"update", "discovery.k8s.io", "endpointslices"},
	} {
		require.False(t, can(t, kubeconfig, "east", denied[0], denied[1], denied[2]), "coredns may %v", denied)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.MCS.MulticlusterV1beta1().ServiceImports("shop").Create(ctx, &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "cart"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.250.1.1"},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	corefile := fmt.Sprintf("clusterset.local {\n    mcs {\n        kubeconfig %s east\n    }\n}\n", kubeconfig)
	srv := procs.StartCoreDNS(t, bins.CoreDNS, corefile)
	require.Eventually(t, func() bool {
		r, err := procs.Query(srv.Addr, "udp", "cart.shop.svc.clusterset.local.", dns.TypeA)
		return err == nil && len(r.Answer) == 1 && r.Answer[0].(*dns.A).A.String() == "10.250.1.1"
	}, 30*time.Second, 100*time.Millisecond, "plugin with the shipped role never answered:\n%s", srv.Output())
	require.NotContains(t, strings.ToLower(srv.Output()), "forbidden")
}

func TestDeployYAMLParses(t *testing.T) {
	// Every YAML file we ship is valid YAML (kustomize would catch most,
	// but not files no kustomization lists).
	files, err := filepath.Glob("*/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, doc := range strings.Split(string(raw), "\n---\n") {
			var v map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(doc), &v), "%s document %d", f, i)
		}
	}
}

// The member role is enough for the importer (derived-service VIPs, leader
// election, export conditions) and no more than it needs.
func TestImporterRBAC(t *testing.T) {
	bins := procs.Build(t)
	set := cluster.Start(t, cluster.Spec{Name: "east", ClusterID: "east"}, cluster.Spec{Name: "west", ClusterID: "west"})
	east, west := set.Clusters[0], set.Clusters[1]
	applyRBAC(t, set)
	kubeconfig := tokenKubeconfig(t, set, "mcs-importer-member")
	for _, denied := range [][3]string{
		{"get", "", "secrets"},
		{"create", "", "namespaces"},
		{"delete", "multicluster.x-k8s.io", "serviceexports"},
		{"create", "", "pods"},
		{"patch", "discovery.k8s.io", "endpointslices"},
		{"create", "", "events"},
		{"create", "coordination.k8s.io", "leases"}, // in every namespace: only in its own
		{"list", "about.k8s.io", "clusterproperties"},
	} {
		require.False(t, can(t, kubeconfig, "east", denied[0], denied[1], denied[2]), "the importer may %v", denied)
	}
	// Next to its Lease it keeps its member record, and touches no other
	// ConfigMap there.
	require.True(t, canOn(t, kubeconfig, "east", "update", "", "configmaps", namespace, "mcs-importer-members"))
	require.False(t, canOn(t, kubeconfig, "east", "update", "", "configmaps", namespace, "coredns"))
	require.False(t, canOn(t, kubeconfig, "east", "get", "", "configmaps", namespace, "coredns"))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range set.Clusters {
		_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := east.Kube.CoreV1().Services("shop").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "cart"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = east.MCS.MulticlusterV1beta1().ServiceExports("shop").Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "cart"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	imp := procs.Start(t, "mcs-importer", bins.Importer, "--kubeconfig", kubeconfig, "--contexts", "east,west",
		"--metrics-addr", "127.0.0.1:0", "--leader-elect", "--leader-elect-namespace", namespace)
	require.Eventually(t, func() bool {
		si, err := west.MCS.MulticlusterV1beta1().ServiceImports("shop").Get(ctx, "cart", metav1.GetOptions{})
		if err != nil || len(si.Spec.IPs) == 0 {
			return false
		}
		e, err := east.MCS.MulticlusterV1beta1().ServiceExports("shop").Get(ctx, "cart", metav1.GetOptions{})
		return err == nil && len(e.Status.Conditions) >= 3
	}, 60*time.Second, 200*time.Millisecond, "the importer with the shipped role never imported:\n%s", imp.Output())
	require.Eventually(t, func() bool {
		cm, err := east.Kube.CoreV1().ConfigMaps(namespace).Get(ctx, "mcs-importer-members", metav1.GetOptions{})
		return err == nil && strings.Contains(cm.Data["members.json"], `"west"`)
	}, 30*time.Second, 200*time.Millisecond, "the importer never wrote its member record:\n%s", imp.Output())
	require.NotContains(t, strings.ToLower(imp.Output()), "forbidden")
}

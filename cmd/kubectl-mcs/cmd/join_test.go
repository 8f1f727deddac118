package cmd_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

// snapshotResources are what join and unjoin may write.
var snapshotResources = []schema.GroupVersionResource{
	{Version: "v1", Resource: "namespaces"},
	{Version: "v1", Resource: "serviceaccounts"},
	{Version: "v1", Resource: "secrets"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	mcsapi.ClusterPropertyGVR,
}

// snapshot lists the objects of c that join and unjoin may write, as
// resource/namespace/name, with their resourceVersions when withRV.
func snapshot(t *testing.T, c *cluster.Cluster, withRV bool) []string {
	t.Helper()
	var out []string
	for _, gvr := range snapshotResources {
		l, err := c.Dynamic.Resource(gvr).List(context.Background(), metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		require.NoError(t, err, gvr.Resource)
		for _, it := range l.Items {
			s := gvr.Resource + "/" + it.GetNamespace() + "/" + it.GetName()
			if withRV {
				s += "@" + it.GetResourceVersion()
			}
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// importerKubeconfig reads the kubeconfig join wrote into the hub.
func importerKubeconfig(t *testing.T, hub *cluster.Cluster) *clientcmdapi.Config {
	t.Helper()
	sec, err := hub.Kube.CoreV1().Secrets("mcs-dns-system").Get(context.Background(), "mcs-importer-kubeconfig", metav1.GetOptions{})
	require.NoError(t, err)
	kc, err := clientcmd.Load(sec.Data["kubeconfig"])
	require.NoError(t, err)
	return kc
}

// asContext is the REST config of one context of kc.
func asContext(t *testing.T, kc *clientcmdapi.Config, name string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, &clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
	require.NoError(t, err)
	return cfg
}

// join, unjoin and dns against real API servers: east and west join
// hub's importer kubeconfig (west without the MCS CRDs, which join
// installs); the minted tokens can list each member's ServiceExports and
// no Secrets; a second join, and --dry-run, change nothing; a taken
// cluster ID is refused; --rotate replaces the token and revokes the old
// one; unjoin leaves each cluster with the objects it had before join;
// dns --apply then --undo gives back the Corefile byte for byte.
func TestJoinUnjoinDNS(t *testing.T) {
	start := time.Now()
	set := cluster.Start(t,
		cluster.Spec{Name: "hub"},
		cluster.Spec{Name: "east", ControlPlane: true},
		cluster.Spec{Name: "west", ControlPlane: true, SkipMCSCRDs: true})
	t.Logf("measured: three clusters started in %s", time.Since(start).Round(time.Millisecond))
	hub, east, west := set.Get("hub"), set.Get("east"), set.Get("west")
	ctx := context.Background()
	kc := set.Kubeconfig
	run := func(args ...string) (int, string, string) {
		return kubectl(append(args, "--kubeconfig", kc)...)
	}
	join := func(member string, extra ...string) (int, string, string) {
		return run(append([]string{"join", "--hosting-context", "hub", "--member-context", member}, extra...)...)
	}
	unjoin := func(member string, extra ...string) (int, string, string) {
		return run(append([]string{"unjoin", "--hosting-context", "hub", "--member-context", member}, extra...)...)
	}

	// Without the namespace in the hub, join refuses before writing.
	code, _, errOut := join("east")
	require.Equal(t, 1, code)
	assert.Contains(t, errOut, `hosting cluster "hub" has no namespace mcs-dns-system`)
	_, err := hub.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mcs-dns-system"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// A namespace of west's own, there before and after.
	_, err = west.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The controllers' own writes (a default ServiceAccount in every
	// namespace of the clusters that run them) settle first: on a busy
	// machine they may come after the clusters answer.
	for _, c := range []*cluster.Cluster{east, west} {
		require.Eventually(t, func() bool {
			nss, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false
			}
			for _, ns := range nss.Items {
				if _, err := c.Kube.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{}); err != nil {
					return false
				}
			}
			return true
		}, time.Minute, 100*time.Millisecond, "%s: the default ServiceAccounts never appeared", c.Name)
	}
	before := map[string][]string{}
	for _, c := range set.Clusters {
		before[c.Name] = snapshot(t, c, false)
	}

	// --dry-run says what it would do and does nothing.
	eastRV := snapshot(t, east, true)
	hubRV := snapshot(t, hub, true)
	code, out, errOut := join("east", "--dry-run")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, row("would create", "Namespace/mcs-dns-system"))
	assert.Contains(t, out, row("would create", "ClusterProperty/cluster.clusterset.k8s.io (cluster ID east)"))
	assert.Contains(t, out, row("would create", "Secret/mcs-dns-system/mcs-importer-member-token"))
	assert.Contains(t, out, row("would create", "context east in Secret/mcs-dns-system/mcs-importer-kubeconfig"))
	assert.Contains(t, out, row("unchanged", "CustomResourceDefinition/serviceexports.multicluster.x-k8s.io"))
	assert.Contains(t, out, "dry run:")
	assert.Equal(t, eastRV, snapshot(t, east, true))
	assert.Equal(t, hubRV, snapshot(t, hub, true))

	t0 := time.Now()
	code, out, errOut = join("east")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	t.Logf("measured: join east took %s; its output:\n%s", time.Since(t0).Round(time.Millisecond), out)
	assert.Contains(t, out, row("created", "ClusterRole/mcs-dns:importer"))
	assert.Contains(t, out, row("created", "context east in Secret/mcs-dns-system/mcs-importer-kubeconfig (the Secret is created)"))
	assert.Contains(t, out, `mcs_importer_member_state{cluster="east",state="up"}`)

	// A taken cluster ID is refused, and nothing is written.
	westRV := snapshot(t, west, true)
	code, _, errOut = join("west", "--cluster-id", "east")
	require.Equal(t, 1, code)
	assert.Contains(t, errOut, `cluster ID "east" is taken`)
	assert.Equal(t, westRV, snapshot(t, west, true))

	code, out, errOut = join("west", "--cluster-id", "west-1")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	assert.Contains(t, out, row("created", "CustomResourceDefinition/serviceexports.multicluster.x-k8s.io"))
	assert.Contains(t, out, row("created", "ClusterProperty/cluster.clusterset.k8s.io (cluster ID west-1)"))
	assert.Contains(t, out, row("created", "context west-1 in Secret/mcs-dns-system/mcs-importer-kubeconfig\n"))
	id, err := west.Dynamic.Resource(mcsapi.ClusterPropertyGVR).Get(ctx, mcsapi.ClusterIDProperty, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "west-1", id.Object["spec"].(map[string]any)["value"])
	// Once a member has an ID, another one is refused.
	code, _, errOut = join("west", "--cluster-id", "west-2")
	require.Equal(t, 1, code)
	assert.Contains(t, errOut, `already has cluster ID "west-1"`)

	// The importer's kubeconfig: one context per member, whose token may
	// list ServiceExports there, and not Secrets.
	ikc := importerKubeconfig(t, hub)
	require.ElementsMatch(t, []string{"east", "west-1"}, keys(ikc.Contexts))
	for name, c := range map[string]*cluster.Cluster{"east": east, "west-1": west} {
		cfg := asContext(t, ikc, name)
		assert.Equal(t, c.Config.Host, cfg.Host)
		assert.Empty(t, cfg.CertData, "a token, not the admin's certificate")
		mcs, err := mcsclient.NewForConfig(cfg)
		require.NoError(t, err)
		_, err = mcs.MulticlusterV1beta1().ServiceExports("").List(ctx, metav1.ListOptions{})
		assert.NoError(t, err, name)
		kube, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		_, err = kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
		assert.True(t, apierrors.IsForbidden(err), "%s: %v", name, err)
	}

	// Again: nothing changes, and it says so; --dry-run too.
	all := func() map[string][]string {
		m := map[string][]string{}
		for _, c := range set.Clusters {
			m[c.Name] = snapshot(t, c, true)
		}
		return m
	}
	joined := all()
	for _, args := range [][]string{{"east"}, {"west"}, {"east", "--dry-run"}} {
		code, out, errOut = join(args[0], args[1:]...)
		require.Equal(t, 0, code, "%v: %s\n%s", args, out, errOut)
		assert.Contains(t, out, "nothing to change", args)
		assert.NotContains(t, out, "created", args)
		assert.NotContains(t, out, "would", args)
	}
	assert.Equal(t, joined, all())

	// --wait: an importer run with the kubeconfig join wrote reports the
	// member up; one it was not told of is reported unknown.
	kcFile := filepath.Join(t.TempDir(), "importer.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*importerKubeconfig(t, hub), kcFile))
	metrics := fmt.Sprintf("127.0.0.1:%d", procs.FreePort(t))
	imp := procs.Start(t, "mcs-importer", procs.ImporterBinary(t), "--kubeconfig", kcFile, "--contexts", "east", "--metrics-addr", metrics)
	code, out, errOut = join("east", "--wait", "45s", "--importer-metrics", "http://"+metrics+"/metrics")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	assert.Contains(t, out, "nothing to change")
	assert.Contains(t, out, `the importer reports member "east" up`)
	// Long enough for one answer from an importer on a loaded machine:
	// the reason is read from it.
	code, out, errOut = join("west", "--wait", "5s", "--importer-metrics", "http://"+metrics+"/metrics")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, errOut, `the importer at http://`+metrics+`/metrics to report member "west-1" up: not after 5s`)
	assert.Contains(t, errOut, "it does not know the member")
	require.NoError(t, imp.Stop())
	code, _, errOut = join("east", "--wait", "1s")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--wait needs --importer-metrics")

	// --rotate: a new token, the old one refused.
	oldCfg := asContext(t, ikc, "east")
	code, out, errOut = join("east", "--rotate")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	assert.Contains(t, out, row("deleted", "Secret/mcs-dns-system/mcs-importer-member-token"))
	assert.Contains(t, out, row("updated", "context east in Secret/mcs-dns-system/mcs-importer-kubeconfig"))
	newCfg := asContext(t, importerKubeconfig(t, hub), "east")
	require.NotEqual(t, oldCfg.BearerToken, newCfg.BearerToken)
	oldKube, err := kubernetes.NewForConfig(oldCfg)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := oldKube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		return apierrors.IsUnauthorized(err)
	}, 30*time.Second, 100*time.Millisecond, "the old token still works")
	newDyn, err := dynamic.NewForConfig(newCfg)
	require.NoError(t, err)
	_, err = newDyn.Resource(schema.GroupVersionResource{Group: mcsapi.Group, Version: "v1beta1", Resource: "serviceexports"}).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)

	// unjoin keeps a CRD that has objects, and says so.
	_, err = west.MCS.MulticlusterV1beta1().ServiceExports("shop").Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	joined = all()
	code, out, errOut = unjoin("west", "--dry-run")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	assert.Contains(t, out, row("kept", "CustomResourceDefinition/serviceexports.multicluster.x-k8s.io (objects of it remain: 1 ServiceExport)"))
	assert.Contains(t, out, row("would delete", "CustomResourceDefinition/serviceimports.multicluster.x-k8s.io"))
	assert.Contains(t, out, row("would delete", "context west-1 in Secret/mcs-dns-system/mcs-importer-kubeconfig"))
	assert.Contains(t, out, row("kept", "CustomResourceDefinition/clusterproperties.about.k8s.io (it was there before join)"))
	assert.Equal(t, joined, all(), "--dry-run changed something")
	require.NoError(t, west.MCS.MulticlusterV1beta1().ServiceExports("shop").Delete(ctx, "web", metav1.DeleteOptions{}))

	code, out, errOut = unjoin("east")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	assert.Contains(t, out, row("deleted", "context east in Secret/mcs-dns-system/mcs-importer-kubeconfig"))
	require.ElementsMatch(t, []string{"west-1"}, keys(importerKubeconfig(t, hub).Contexts))
	code, out, errOut = unjoin("west")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	t.Logf("unjoin west:\n%s", out)
	assert.Contains(t, out, row("deleted", "Secret/mcs-dns-system/mcs-importer-kubeconfig (join created it and no context is left)"))
	assert.Contains(t, out, row("deleted", "CustomResourceDefinition/serviceexports.multicluster.x-k8s.io"))
	for _, c := range set.Clusters {
		require.Eventually(t, func() bool { return slices.Equal(before[c.Name], snapshot(t, c, false)) }, time.Minute, 200*time.Millisecond,
			"%s after unjoin:\n%s\nbefore join:\n%s", c.Name, strings.Join(snapshot(t, c, false), "\n"), strings.Join(before[c.Name], "\n"))
	}
	code, out, errOut = unjoin("east")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	assert.Contains(t, out, "nothing to change")

	// dns: printed, applied, applied again, undone.
	const corefile = ".:53 {\n    errors\n    kubernetes cluster.local in-addr.arpa ip6.arpa\n    forward . /etc/resolv.conf\n    cache 30\n    reload\n}"
	_, err = hub.Kube.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns"}, Data: map[string]string{"Corefile": corefile},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	code, _, errOut = run("dns", "--context", "hub")
	require.Equal(t, 1, code)
	assert.Contains(t, errOut, "Service mcs-dns-system/mcs-dns")
	svc, err := hub.Kube.CoreV1().Services("mcs-dns-system").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "mcs-dns"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	ip := svc.Spec.ClusterIP
	readCorefile := func() string {
		cm, err := hub.Kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		require.NoError(t, err)
		return cm.Data["Corefile"]
	}
	code, out, errOut = run("dns", "--context", "hub")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "clusterset.local:53 {\n")
	assert.Contains(t, out, "forward . "+ip+"\n")
	assert.Equal(t, corefile, readCorefile(), "printing changes nothing")
	code, out, errOut = run("dns", "--context", "hub", "--apply")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "now forwards clusterset.local to "+ip)
	applied := readCorefile()
	assert.Contains(t, applied, "forward . "+ip+"\n")
	code, out, errOut = run("dns", "--context", "hub", "--apply")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "nothing to change")
	assert.Equal(t, applied, readCorefile())
	code, out, errOut = run("dns", "--context", "hub", "--undo")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "removed the clusterset.local block")
	assert.Equal(t, corefile, readCorefile(), "byte for byte")
	t.Logf("measured: the whole test took %s", time.Since(start).Round(time.Millisecond))
}

// row is the start of one line of join's or unjoin's report.
func row(action, object string) string { return fmt.Sprintf("%-16s %s", action, object) }

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

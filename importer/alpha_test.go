package importer_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/deploy/crds"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// installAlphaOnly installs the mcs-api CRDs serving only v1alpha1, as
// mcs-api <= v0.4 did.
func installAlphaOnly(t *testing.T, c *cluster.Cluster) {
	all, err := crds.All()
	require.NoError(t, err)
	cs, err := apiextensionsclient.NewForConfig(c.Config)
	require.NoError(t, err)
	for _, crd := range all {
		if crd.Spec.Group != mcsapi.Group {
			continue
		}
		crd = crd.DeepCopy()
		var versions []apiextensionsv1.CustomResourceDefinitionVersion
		for _, v := range crd.Spec.Versions {
			if v.Name == "v1alpha1" {
				v.Storage, v.Served = true, true
				versions = append(versions, v)
			}
		}
		require.Len(t, versions, 1)
		crd.Spec.Versions = versions
		crd.ResourceVersion = ""
		_, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(bg(), crd, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	waitAlphaServed(t, c)
	_, err = c.MCS.MulticlusterV1beta1().ServiceImports("default").List(bg(), metav1.ListOptions{})
	require.True(t, apierrors.IsNotFound(err), "v1beta1 must not be served: %v", err)
}

// waitAlphaServed waits until c serves ServiceImports and ServiceExports
// at v1alpha1.
func waitAlphaServed(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := c.MCS.MulticlusterV1alpha1().ServiceImports("default").List(bg(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		_, err = c.MCS.MulticlusterV1alpha1().ServiceExports("default").List(bg(), metav1.ListOptions{})
		return err == nil
	}, waitFor, tick)
}

// A member serving only v1alpha1 (mcs-api <= v0.4) next to one serving
// v1beta1: exports are read and imports written at each member's version.
func TestAlphaOnlyMember(t *testing.T) {
	set := cluster.Start(t, cluster.Spec{Name: "old", SkipMCSCRDs: true}, cluster.Spec{Name: "new"})
	old, nw := set.Get("old"), set.Get("new")
	installAlphaOnly(t, old)
	r := startImporter(t, baseOptions(set.Kubeconfig, "old", "new"))

	ns := "alpha"
	mkNamespace(t, ns, old, nw)
	mkService(t, old, ns, "web", false, tcpPort("http", 80))
	putSlice(t, old, ns, "web", "web-1", ips(1, "10.90.0")...)
	_, err := old.MCS.MulticlusterV1alpha1().ServiceExports(ns).Create(bg(), &mcsv1alpha1.ServiceExport{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       mcsv1alpha1.ServiceExportSpec{ExportedLabels: map[string]string{"gen": "old"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitEndpoints(t, []*cluster.Cluster{old, nw}, ns, "web", map[string][]string{"old": {"10.90.0.1"}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		si, err := old.MCS.MulticlusterV1alpha1().ServiceImports(ns).Get(bg(), "web", metav1.GetOptions{})
		if assert.NoError(c, err) {
			assert.Equal(c, mcsv1alpha1.ClusterSetIP, si.Spec.Type)
			assert.Equal(c, []mcsv1alpha1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80}}, si.Spec.Ports)
			assert.Equal(c, []mcsv1alpha1.ClusterStatus{{Cluster: "old"}}, si.Status.Clusters)
			assert.Equal(c, "old", si.Labels["gen"])
		}
		si2, err := getImport(nw, ns, "web")
		if assert.NoError(c, err) {
			assert.Equal(c, []mcsv1beta1.ClusterStatus{{Cluster: "old"}}, si2.Status.Clusters)
		}
		e, err := old.MCS.MulticlusterV1alpha1().ServiceExports(ns).Get(bg(), "web", metav1.GetOptions{})
		if assert.NoError(c, err) {
			assert.Equal(c, "True/Valid", condition(e.Status.Conditions, "Valid"))
			assert.Equal(c, "True/Exported", condition(e.Status.Conditions, "Ready"))
		}
	}, waitFor, tick)
	before := r.quiesce(t, 2*time.Second)
	assert.NotEmpty(t, before)
	require.NoError(t, old.MCS.MulticlusterV1alpha1().ServiceExports(ns).Delete(bg(), "web", metav1.DeleteOptions{}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := old.MCS.MulticlusterV1alpha1().ServiceImports(ns).Get(bg(), "web", metav1.GetOptions{})
		assert.True(c, apierrors.IsNotFound(err))
	}, waitFor, tick)
	waitNoImport(t, []*cluster.Cluster{nw}, ns, "web")

	// The old cluster goes away for good (c.Stop): after the grace period
	// its endpoints are withdrawn and new's own export is unaffected.
	for _, c := range []*cluster.Cluster{old, nw} {
		mkService(t, c, ns, "api", false, tcpPort("http", 80))
	}
	putSlice(t, old, ns, "api", "api-1", ips(1, "10.91.0")...)
	putSlice(t, nw, ns, "api", "api-1", ips(1, "10.91.1")...)
	_, err = old.MCS.MulticlusterV1alpha1().ServiceExports(ns).Create(bg(), &mcsv1alpha1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "api"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	mkExport(t, nw, ns, "api")
	waitEndpoints(t, []*cluster.Cluster{nw}, ns, "api", map[string][]string{"old": {"10.91.0.1"}, "new": {"10.91.1.1"}})
	stopped := time.Now()
	require.NoError(t, old.Stop())
	t.Logf("stopping the cluster took %s", time.Since(stopped).Round(time.Millisecond))
	waitEndpoints(t, []*cluster.Cluster{nw}, ns, "api", map[string][]string{"new": {"10.91.1.1"}})
	assert.GreaterOrEqual(t, time.Since(stopped), 3*time.Second, "withdrawn only after the grace period")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		si, err := getImport(nw, ns, "api")
		if assert.NoError(c, err) {
			assert.Equal(c, []mcsv1beta1.ClusterStatus{{Cluster: "new"}}, si.Status.Clusters)
		}
		assert.Equal(c, "down", memberState(t, r, "old"))
	}, waitFor, tick)
}

// A member whose CRDs start serving v1beta1 while the importer runs (it
// joined at v1alpha1, and its caches and writes used it): that member is
// joined again at the new version, the importer keeps running, and
// imports flow both ways at the new version.
func TestMemberVersionChangeRejoins(t *testing.T) {
	set := cluster.Start(t, cluster.Spec{Name: "old", SkipMCSCRDs: true}, cluster.Spec{Name: "new"})
	old, nw := set.Get("old"), set.Get("new")
	installAlphaOnly(t, old)
	r := startImporter(t, baseOptions(set.Kubeconfig, "old", "new"))
	ns := "upgrade"
	mkNamespace(t, ns, old, nw)
	mkService(t, nw, ns, "before", false, tcpPort("http", 80))
	putSlice(t, nw, ns, "before", "before-1", ips(1, "10.92.0")...)
	mkExport(t, nw, ns, "before")
	waitEndpoints(t, []*cluster.Cluster{old, nw}, ns, "before", map[string][]string{"new": {"10.92.0.1"}})

	upgradeToShippedCRDs(t, old)
	// The import written at v1alpha1 is still there, now read at v1beta1,
	// and a new export is imported into the upgraded member.
	mkService(t, nw, ns, "after", false, tcpPort("http", 80))
	putSlice(t, nw, ns, "after", "after-1", ips(1, "10.92.1")...)
	mkExport(t, nw, ns, "after")
	waitEndpoints(t, []*cluster.Cluster{old, nw}, ns, "after", map[string][]string{"new": {"10.92.1.1"}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, name := range []string{"before", "after"} {
			si, err := getImport(old, ns, name)
			if assert.NoError(c, err) {
				assert.Equal(c, []string{"new"}, clusterIDs(si))
			}
		}
		assert.Equal(c, "up", memberState(t, r, "old"))
	}, waitFor, tick)
}

// upgradeToShippedCRDs updates c's MCS CRDs to the shipped ones: v1beta1
// stored, v1alpha1 still served.
func upgradeToShippedCRDs(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	all, err := crds.All()
	require.NoError(t, err)
	cs, err := apiextensionsclient.NewForConfig(c.Config)
	require.NoError(t, err)
	for _, shipped := range all {
		if shipped.Spec.Group != mcsapi.Group {
			continue
		}
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(bg(), shipped.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Versions = shipped.Spec.Versions
			_, err = cs.ApiextensionsV1().CustomResourceDefinitions().Update(bg(), cur, metav1.UpdateOptions{})
			return err
		}))
	}
}

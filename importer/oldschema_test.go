package importer_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/mcs-dns/mcs-dns/importer"
	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// installCRDs installs the CRD manifests of a folder and waits until
// ServiceImports and ServiceExports are served at v1alpha1.
func installCRDs(t *testing.T, c *cluster.Cluster, dir string) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	require.Len(t, files, 2)
	cs, err := apiextensionsclient.NewForConfig(c.Config)
	require.NoError(t, err)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		crd := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, yaml.Unmarshal(raw, crd), f)
		_, err = cs.ApiextensionsV1().CustomResourceDefinitions().Create(bg(), crd, metav1.CreateOptions{})
		require.NoError(t, err, f)
	}
	waitAlphaServed(t, c)
}

// A member with mcs-api v0.1.0's CRDs (no ipFamilies, trafficDistribution,
// internalTrafficPolicy, endpointSliceObjects or import conditions, no
// observedGeneration on export conditions, at most one import IP): the
// importer writes what the member keeps and, once done, nothing more, not
// even on resyncs (comparing what it asks for with what such a member
// stores would otherwise never match, and rewrite every status each time).
func TestOldSchemaMember(t *testing.T) {
	set := cluster.Start(t, cluster.Spec{Name: "old", SkipMCSCRDs: true}, cluster.Spec{Name: "new"})
	old, nw := set.Get("old"), set.Get("new")
	installCRDs(t, old, filepath.Join("testdata", "mcs-api-v0.1.0"))
	o := baseOptions(set.Kubeconfig, "old", "new")
	o.VIPMode = importer.VIPModeDerived // dual-stack: two VIPs, one kept by old
	r := startImporter(t, o)

	ns := "vintage"
	mkNamespace(t, ns, old, nw)
	// A dual-stack Service exported from new, with the fields old lacks.
	itp := corev1.ServiceInternalTrafficPolicyLocal
	_, err := nw.Kube.CoreV1().Services(ns).Create(bg(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{
			Ports:                 []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, AppProtocol: ptrTo("http")}},
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			IPFamilyPolicy:        ptrTo(corev1.IPFamilyPolicyRequireDualStack),
			InternalTrafficPolicy: &itp,
			TrafficDistribution:   ptrTo("PreferClose"),
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	putSlice(t, nw, ns, "web", "web-1", ips(1, "10.93.0")...)
	mkExport(t, nw, ns, "web")
	// And one exported from old (a v0.1.0 ServiceExport has no spec).
	mkService(t, old, ns, "api", false, tcpPort("http", 8080))
	putSlice(t, old, ns, "api", "api-1", ips(1, "10.93.1")...)
	_, err = old.MCS.MulticlusterV1alpha1().ServiceExports(ns).Create(bg(), &mcsv1alpha1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "api"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	waitEndpoints(t, []*cluster.Cluster{old, nw}, ns, "web", map[string][]string{"new": {"10.93.0.1"}})
	waitEndpoints(t, []*cluster.Cluster{old, nw}, ns, "api", map[string][]string{"old": {"10.93.1.1"}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		si, err := old.MCS.MulticlusterV1alpha1().ServiceImports(ns).Get(bg(), "web", metav1.GetOptions{})
		if assert.NoError(c, err) {
			assert.Len(c, si.Spec.IPs, 1, "v0.1.0 keeps one IP")
			assert.Equal(c, []mcsv1alpha1.ClusterStatus{{Cluster: "new"}}, si.Status.Clusters)
		}
		si2, err := getImport(nw, ns, "web")
		if assert.NoError(c, err) {
			assert.Len(c, si2.Spec.IPs, 2, "new keeps both")
			assert.Equal(c, "PreferClose", *si2.Spec.TrafficDistribution)
		}
		e, err := old.MCS.MulticlusterV1alpha1().ServiceExports(ns).Get(bg(), "api", metav1.GetOptions{})
		if assert.NoError(c, err) {
			assert.Equal(c, "True/Valid", condition(e.Status.Conditions, "Valid"))
			assert.Equal(c, "True/Exported", condition(e.Status.Conditions, "Ready"))
		}
	}, waitFor, tick)
	// Resyncs run every second here: three seconds without a write.
	r.quiesce(t, 3*time.Second)
}

package mcs

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/deploy/crds"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/netcut"
)

// TestCRDsRemovedWhileAway: the MCS CRDs are removed (which deletes
// every ServiceImport) while the plugin cannot reach the API server, so
// that its watch never sees those deletions; back in reach, its relist
// finds ServiceImports not served at all. The names must answer
// NXDOMAIN, as the cluster says, not the last known state; when the CRDs
// are installed again the plugin lists them anew by itself.
func TestCRDsRemovedWhileAway(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	set := cluster.Start(t, cluster.Spec{Name: "east", ClusterID: "east"})
	c := set.Clusters[0]
	createNamespace(t, c, "demo")
	createImport(t, c, "demo", "web", mcsv1beta1.ClusterSetIP, []string{"10.96.60.1"}, false, port("http", corev1.ProtocolTCP, 80))

	// CoreDNS reaches the API server through a proxy the test can cut.
	p, err := netcut.Start(strings.TrimPrefix(strings.TrimSuffix(c.Config.Host, "/"), "https://"))
	require.NoError(t, err)
	t.Cleanup(p.Close)
	kc, err := clientcmd.LoadFromFile(set.Kubeconfig)
	require.NoError(t, err)
	kc.Clusters["east"].Server = "https://" + p.Addr()
	kubeconfig := t.TempDir() + "/kubeconfig"
	require.NoError(t, clientcmd.WriteToFile(*kc, kubeconfig))
	srv := startCoreDNS(t, fmt.Sprintf(`clusterset.local:0 {
    mcs {
        kubeconfig %s east
    }
}`, kubeconfig))
	webA := answer("web.demo.svc.clusterset.local. A 10.96.60.1")
	srv.eventually(t, "web.demo.svc.clusterset.local", dns.TypeA, webA)

	p.Cut()
	ext, err := apiextensions.NewForConfig(c.Config)
	require.NoError(t, err)
	all, err := crds.All()
	require.NoError(t, err)
	for _, crd := range all {
		if crd.Spec.Group == mcsapi.Group {
			require.NoError(t, ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctxT(t), crd.Name, metav1.DeleteOptions{}))
		}
	}
	require.Eventually(t, func() bool {
		for _, crd := range all {
			if crd.Spec.Group != mcsapi.Group {
				continue
			}
			if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctxT(t), crd.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false
			}
		}
		return true
	}, time.Minute, 100*time.Millisecond, "the CRDs never went")
	// Away, the last known state is served.
	srv.eventually(t, "web.demo.svc.clusterset.local", dns.TypeA, webA)
	require.NoError(t, p.Resume())
	srv.eventually(t, "web.demo.svc.clusterset.local", dns.TypeA, wantNX)

	// The CRDs come back, and an import with them.
	for _, crd := range all {
		if crd.Spec.Group != mcsapi.Group {
			continue
		}
		crd = crd.DeepCopy()
		require.Eventually(t, func() bool {
			_, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctxT(t), crd, metav1.CreateOptions{})
			return err == nil
		}, time.Minute, 200*time.Millisecond, "re-creating %s", crd.Name)
	}
	require.Eventually(t, func() bool {
		_, err := c.MCS.MulticlusterV1beta1().ServiceImports("demo").Create(ctxT(t), &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.96.60.2"},
				Ports: []mcsv1beta1.ServicePort{port("http", corev1.ProtocolTCP, 80)}},
		}, metav1.CreateOptions{})
		return err == nil
	}, time.Minute, 200*time.Millisecond, "ServiceImports served again")
	srv.eventually(t, "web.demo.svc.clusterset.local", dns.TypeA, answer("web.demo.svc.clusterset.local. A 10.96.60.2"))
}

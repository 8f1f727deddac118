package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// Three clusters are independent: what one holds, the others do not see.
func TestClustersAreIsolated(t *testing.T) {
	set := cluster.Start(t,
		cluster.Spec{Name: "east", ClusterID: "east.example"},
		cluster.Spec{Name: "west"},
		cluster.Spec{Name: "north"},
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	east := set.Get("east")
	require.Equal(t, "east.example", east.ID)
	require.Equal(t, "west", set.Get("west").ID)

	_, err := east.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	svc, err := east.Kube.CoreV1().Services("demo").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Ports:          []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
			IPFamilies:     []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicyRequireDualStack),
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Len(t, svc.Spec.ClusterIPs, 2, "the service CIDR is dual-stack")
	_, err = east.Kube.DiscoveryV1().EndpointSlices("demo").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.2.3"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = east.MCS.MulticlusterV1beta1().ServiceExports("demo").Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	for _, name := range []string{"west", "north"} {
		other := set.Get(name)
		_, err := other.Kube.CoreV1().Services("demo").Get(ctx, "web", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "%s sees east's Service: %v", name, err)
		slices, err := other.Kube.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Empty(t, slices.Items, name)
		exports, err := other.MCS.MulticlusterV1beta1().ServiceExports("").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Empty(t, exports.Items, name)
	}

	// The kubeconfig has one working context per cluster.
	for _, c := range set.Clusters {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: set.Kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: c.Name}).ClientConfig()
		require.NoError(t, err)
		require.Equal(t, c.Config.Host, cfg.Host)
	}
}

// The CRDs serve both versions of the same schema: an object written through
// v1alpha1 reads back through v1beta1.
func TestServiceImportAcrossVersions(t *testing.T) {
	set := cluster.Start(t, cluster.Names("solo")...)
	c := set.Clusters[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.MCS.MulticlusterV1alpha1().ServiceImports("default").Create(ctx, &mcsv1alpha1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: mcsv1alpha1.ServiceImportSpec{
			Type:  mcsv1alpha1.ClusterSetIP,
			IPs:   []string{"10.42.0.1"},
			Ports: []mcsv1alpha1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	got, err := c.MCS.MulticlusterV1beta1().ServiceImports("default").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, mcsv1beta1.ClusterSetIP, got.Spec.Type)
	require.Equal(t, []string{"10.42.0.1"}, got.Spec.IPs)
	require.Equal(t, int32(80), got.Spec.Ports[0].Port)

	gvr, err := mcsapi.ServedVersion(c.Kube.Discovery(), mcsapi.ServiceImports)
	require.NoError(t, err)
	require.Equal(t, "v1beta1", gvr.Version)
}

// A cluster without the mcs-api CRDs is reported clearly.
func TestServedVersionMissing(t *testing.T) {
	set := cluster.Start(t, cluster.Spec{Name: "bare", SkipMCSCRDs: true})
	_, err := mcsapi.ServedVersion(set.Clusters[0].Kube.Discovery(), mcsapi.ServiceImports)
	require.ErrorContains(t, err, "not served")
	require.ErrorIs(t, err, mcsapi.ErrNotServed)

	// A server that cannot be asked is not reported as missing CRDs.
	unreachable, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: "http://127.0.0.1:1"})
	require.NoError(t, err)
	_, err = mcsapi.ServedVersion(unreachable, mcsapi.ServiceImports)
	require.ErrorContains(t, err, "discovering serviceimports.multicluster.x-k8s.io")
	require.NotContains(t, err.Error(), "CRDs")
	require.NotErrorIs(t, err, mcsapi.ErrNotServed)
}

// StopAPIServer stops the real kube-apiserver process and StartAPIServer
// brings it back on the same address, certificates and etcd: what was
// written before is still there and the same clients work again.
func TestAPIServerRestart(t *testing.T) {
	set := cluster.Start(t, cluster.Spec{Name: "east"})
	c := set.Clusters[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	require.NoError(t, c.StopAPIServer())
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	_, err = c.Kube.CoreV1().Namespaces().Get(short, "kept", metav1.GetOptions{})
	cancelShort()
	require.Error(t, err, "the API server answers while stopped")
	require.Error(t, c.StopAPIServer(), "stopping twice")

	require.NoError(t, c.StartAPIServer(ctx))
	_, err = c.Kube.CoreV1().Namespaces().Get(ctx, "kept", metav1.GetOptions{})
	require.NoError(t, err, "etcd kept what was written")
	_, err = c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// Twice: the restarted process stops and starts as well.
	require.NoError(t, c.StopAPIServer())
	require.NoError(t, c.StartAPIServer(ctx))
	_, err = c.Kube.CoreV1().Namespaces().Get(ctx, "after", metav1.GetOptions{})
	require.NoError(t, err)
}

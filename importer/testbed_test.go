package importer_test

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// The tests of importer_test.go share three member clusters, started once
// per test process (starting them is most of a test's cost): east has a
// ClusterProperty (ID "east-1"), west and north fall back to their context
// names. Every test starts from the same world: newTestbed first deletes what
// earlier tests made, so no importer under test sees another test's objects
// and each test passes alone or in any order.
var shared struct {
	once sync.Once
	set  *cluster.Set
	dir  string
	err  error
}

// testLeases are the Leases the tests of importer_test.go make in east's
// kube-system (the API servers' own Leases there are left alone).
var testLeases = []string{"held-elsewhere", "taken-over"}

// builtinNamespaces are the namespaces every API server has; the others
// were made by a test.
var builtinNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// testbed is what one test runs on: the shared clusters, emptied, and a
// kubeconfig of its own in which north is reached through a proxy the test
// can cut, and two more contexts reuse east ("east-again", same cluster
// ID) and west ("Bad_ID", an invalid cluster ID as a context name).
type testbed struct {
	east, west, north *cluster.Cluster
	all               []*cluster.Cluster
	contexts          []string
	kubeconfig        string
	northProxy        *proxy
}

func newTestbed(t *testing.T) *testbed {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real API servers; skipped with -short")
	}
	shared.once.Do(startShared)
	require.NoError(t, shared.err, "starting the shared member clusters")
	set := shared.set
	w := &testbed{east: set.Get("east"), west: set.Get("west"), north: set.Get("north"), contexts: []string{"east", "west", "north"}}
	w.all = []*cluster.Cluster{w.east, w.west, w.north}
	for _, c := range w.all {
		emptyCluster(t, c)
	}
	northURL, err := url.Parse(w.north.Config.Host)
	require.NoError(t, err)
	t.Logf("north API at %s", w.north.Config.Host)
	w.northProxy = startProxy(t, northURL.Host)
	w.kubeconfig = kubeconfigVia(t, set, map[string]*proxy{"north": w.northProxy}, map[string]string{
		"east-again": "east", "Bad_ID": "west",
	})
	return w
}

func startShared() {
	shared.set, shared.err = cluster.StartClusters(
		cluster.Spec{Name: "east", ClusterID: "east-1"},
		cluster.Spec{Name: "west"},
		cluster.Spec{Name: "north"},
	)
	if shared.err != nil {
		return
	}
	if shared.dir, shared.err = os.MkdirTemp("", "mcs-importer-test-"); shared.err != nil {
		return
	}
	shared.err = shared.set.WriteKubeconfig(filepath.Join(shared.dir, "kubeconfig"))
}

// stopShared stops the shared clusters, if a test started them.
func stopShared() {
	if shared.set != nil {
		shared.set.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}

// emptyCluster deletes every namespace a test made, with what is in it,
// and the tests' Leases: the cluster is as it was started. No importer
// runs meanwhile (the tests of this file run one at a time, and each
// stops its importers when it ends).
func emptyCluster(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	nss, err := c.Kube.CoreV1().Namespaces().List(bg(), metav1.ListOptions{})
	require.NoError(t, err)
	all := metav1.ListOptions{}
	del := metav1.DeleteOptions{}
	for _, n := range nss.Items {
		ns := n.Name
		if slices.Contains(builtinNamespaces, ns) {
			continue
		}
		require.NoError(t, c.MCS.MulticlusterV1beta1().ServiceExports(ns).DeleteCollection(bg(), del, all))
		require.NoError(t, c.MCS.MulticlusterV1beta1().ServiceImports(ns).DeleteCollection(bg(), del, all))
		require.NoError(t, c.Kube.DiscoveryV1().EndpointSlices(ns).DeleteCollection(bg(), del, all))
		// Services have no DeleteCollection.
		svcs, err := c.Kube.CoreV1().Services(ns).List(bg(), all)
		require.NoError(t, err)
		for _, s := range svcs.Items {
			if err := c.Kube.CoreV1().Services(ns).Delete(bg(), s.Name, del); !apierrors.IsNotFound(err) {
				require.NoError(t, err)
			}
		}
		// Without a namespace controller the namespace goes once its
		// finalizer is removed by hand.
		if err := c.Kube.CoreV1().Namespaces().Delete(bg(), ns, del); !apierrors.IsNotFound(err) {
			require.NoError(t, err)
		}
		cur, err := c.Kube.CoreV1().Namespaces().Get(bg(), ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		require.NoError(t, err)
		cur.Spec.Finalizers = []corev1.FinalizerName{}
		if _, err := c.Kube.CoreV1().Namespaces().Finalize(bg(), cur, metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
			require.NoError(t, err)
		}
	}
	for _, name := range testLeases {
		if err := c.Kube.CoordinationV1().Leases("kube-system").Delete(bg(), name, del); !apierrors.IsNotFound(err) {
			require.NoError(t, err)
		}
	}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		nss, err := c.Kube.CoreV1().Namespaces().List(bg(), all)
		if !assert.NoError(ct, err) {
			return
		}
		for _, n := range nss.Items {
			assert.Contains(ct, builtinNamespaces, n.Name, "namespace left in %s", c.Name)
		}
	}, waitFor, tick)
}

// importing is newTestbed with one importer (the default options) running
// until the test ends.
func importing(t *testing.T) (*testbed, *running) {
	t.Helper()
	w := newTestbed(t)
	return w, startImporter(t, baseOptions(w.kubeconfig, w.contexts...))
}

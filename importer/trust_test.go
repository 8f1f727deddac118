package importer_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// forgeSlice writes a source EndpointSlice of Service svc that the
// endpointslice controller did not make (manager "" or another), as
// anyone who may create EndpointSlices in the namespace can.
func forgeSlice(t *testing.T, c *cluster.Cluster, ns, svc, name, manager, ip string) {
	t.Helper()
	labels := map[string]string{discoveryv1.LabelServiceName: svc}
	if manager != "" {
		labels[discoveryv1.LabelManagedBy] = manager
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints:   endpoints([]ep{{ip: ip, ready: true, hostname: "web-0"}}),
	}
	cl := c.Kube.DiscoveryV1().EndpointSlices(ns)
	if cur, err := cl.Get(bg(), name, metav1.GetOptions{}); err == nil {
		s.ResourceVersion = cur.ResourceVersion
		_, err = cl.Update(bg(), s, metav1.UpdateOptions{})
		require.NoError(t, err)
		return
	}
	_, err := cl.Create(bg(), s, metav1.CreateOptions{})
	require.NoError(t, err)
}

// Source EndpointSlices that no trusted manager wrote are never mirrored:
// an address someone forged next to an exported Service's real endpoints
// reaches no other member (and so no answer there). Each version of such
// a slice is counted once; --endpointslice-managers trusts more managers.
func TestForgedSourceSlicesIgnored(t *testing.T) {
	w := newTestbed(t)
	const ns = "trust"
	mkNamespace(t, ns, w.all...)
	mkService(t, w.west, ns, "web", false, tcpPort("http", 8080))
	putSlice(t, w.west, ns, "web", "web-real", ep{ip: "10.71.0.1", ready: true})
	forgeSlice(t, w.west, ns, "web", "web-nomanager", "", "10.71.0.66")
	forgeSlice(t, w.west, ns, "web", "web-evil", "evil.example.com", "10.71.0.67")
	mkExport(t, w.west, ns, "web")

	r := startImporter(t, baseOptions(w.kubeconfig, w.contexts...))
	want := map[string][]string{"west": {"10.71.0.1"}}
	for _, c := range []*cluster.Cluster{w.east, w.north, w.west} {
		require.Eventually(t, func() bool {
			got, err := endpointsBySource(c, ns, "web")
			return err == nil && assert.ObjectsAreEqual(want, got)
		}, waitFor, tick, "%s: only the endpointslice controller's endpoints", c.Name)
	}
	ignored := func() map[string]float64 { return r.counters(t, "mcs_importer_ignored_objects_total") }
	require.Eventually(t, func() bool {
		return ignored()["west/EndpointSlice/no_manager"] == 1 && ignored()["west/EndpointSlice/untrusted_manager"] == 1
	}, waitFor, tick, "counted: %v", ignored())

	// A new version is counted once more, however often the key is
	// reconciled (resync every second here); the real endpoints follow.
	forgeSlice(t, w.west, ns, "web", "web-evil", "evil.example.com", "10.71.0.68")
	putSlice(t, w.west, ns, "web", "web-real", ep{ip: "10.71.0.2", ready: true})
	want = map[string][]string{"west": {"10.71.0.2"}}
	require.Eventually(t, func() bool {
		got, err := endpointsBySource(w.east, ns, "web")
		return err == nil && assert.ObjectsAreEqual(want, got)
	}, waitFor, tick)
	time.Sleep(3 * time.Second)
	assert.Equal(t, 2.0, ignored()["west/EndpointSlice/untrusted_manager"], "counted: %v", ignored())
	assert.Equal(t, 1.0, ignored()["west/EndpointSlice/no_manager"], "counted: %v", ignored())
	got, err := endpointsBySource(w.east, ns, "web")
	require.NoError(t, err)
	assert.Equal(t, want, got, "never mirrored")
	r.stop()

	// Trusted by flag: its endpoints are mirrored too.
	o := baseOptions(w.kubeconfig, w.contexts...)
	o.EndpointSliceManagers = []string{"endpointslice-controller.k8s.io", "evil.example.com"}
	startImporter(t, o)
	want = map[string][]string{"west": {"10.71.0.2", "10.71.0.68"}}
	require.Eventually(t, func() bool {
		got, err := endpointsBySource(w.east, ns, "web")
		return err == nil && assert.ObjectsAreEqual(want, got)
	}, waitFor, tick)
}

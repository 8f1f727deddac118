package importer_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer"
	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// exportService creates Service + slice + ServiceExport ns/name in c.
func exportService(t *testing.T, c *cluster.Cluster, ns, name string, mutate ...func(*mcsv1beta1.ServiceExport)) {
	t.Helper()
	mkService(t, c, ns, name, false, tcpPort("http", 80))
	putSlice(t, c, ns, name, name+"-1", ep{ip: "10.1.0.1", ready: true})
	mkExport(t, c, ns, name, mutate...)
}

func ptrTo[T any](v T) *T { return &v }

func ptrDeref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func annotate(v string) func(*mcsv1beta1.ServiceExport) {
	return func(e *mcsv1beta1.ServiceExport) {
		e.Annotations = map[string]string{mcsapi.AnnotationUseClusterSetIP: v}
	}
}

// importIPs waits until ns/name is imported in every cluster with ips that
// pass check, and returns them by cluster.
func importIPs(t *testing.T, cs []*cluster.Cluster, ns, name string, check func(c *cluster.Cluster, si *mcsv1beta1.ServiceImport) error) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	var last error
	ok := assert.Eventually(t, func() bool {
		for _, c := range cs {
			si, err := getImport(c, ns, name)
			if err == nil {
				err = check(c, si)
			}
			if err != nil {
				last = fmt.Errorf("%s: %w", c.Name, err)
				return false
			}
			out[c.Name] = si.Spec.IPs
		}
		return true
	}, waitFor, tick)
	require.True(t, ok, "import %s/%s: %v", ns, name, last)
	return out
}

// TestDerivedServiceRefused: when an importing cluster refuses the derived
// Service (a count/services quota here; a webhook alike), the import is
// written all the same, without a VIP and Ready=False, its endpoints keep
// following the exporting cluster, it never names an address the cluster
// released, and the VIP comes once the refusal ends.
func TestDerivedServiceRefused(t *testing.T) {
	set := cluster.Start(t, cluster.Names("east", "north")...)
	cs := set.Clusters
	east, north := cs[0], cs[1]
	const ns = "quota"
	mkNamespace(t, ns, cs...)
	o := baseOptions(set.Kubeconfig, "east", "north")
	o.VIPMode = importer.VIPModeDerived
	imp := startImporter(t, o)
	exportService(t, east, ns, "web")
	withVIP := func(_ *cluster.Cluster, si *mcsv1beta1.ServiceImport) error {
		if len(si.Spec.IPs) == 0 {
			return fmt.Errorf("no ips yet")
		}
		return nil
	}
	before := importIPs(t, cs, ns, "web", withVIP)

	// No more Services in north's namespace.
	q, err := north.Kube.CoreV1().ResourceQuotas(ns).Create(bg(), &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-services"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")}}
	_, err = north.Kube.CoreV1().ResourceQuotas(ns).UpdateStatus(bg(), q, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = north.Kube.CoreV1().Services(ns).Create(bg(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{tcpPort("http", 80)}},
	}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "the quota refuses Services: %v", err)

	refused := func(c *assert.CollectT, name string) {
		si, err := getImport(north, ns, name)
		if !assert.NoError(c, err, "the import is written although its VIP cannot be made") {
			return
		}
		assert.Empty(c, si.Spec.IPs, "no address the cluster does not hold")
		ready := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
		if assert.NotNil(c, ready) {
			assert.Equal(c, metav1.ConditionFalse, ready.Status)
			assert.Contains(c, ready.Message, "quota")
		}
	}
	// The derived Service goes (deleted by hand: its ClusterIP is released
	// and may go to another Service) and cannot come back.
	require.NoError(t, north.Kube.CoreV1().Services(ns).Delete(bg(), vip.DerivedName(ns, "web"), metav1.DeleteOptions{}))
	require.EventuallyWithT(t, func(c *assert.CollectT) { refused(c, "web") }, waitFor, tick)
	assert.Positive(t, imp.counters(t, "mcs_importer_errors_total")["north/assign VIP"], "the failure is counted")
	// Endpoints keep flowing meanwhile.
	putSlice(t, east, ns, "web", "web-1", ep{ip: "10.1.0.9", ready: true})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		eps, err := endpointsBySource(north, ns, "web")
		assert.NoError(c, err)
		assert.Equal(c, []string{"10.1.0.9"}, eps["east"])
	}, waitFor, tick)
	// A new export is imported, endpoints and all.
	exportService(t, east, ns, "api")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		refused(c, "api")
		eps, err := endpointsBySource(north, ns, "api")
		assert.NoError(c, err)
		assert.Equal(c, []string{"10.1.0.1"}, eps["east"])
	}, waitFor, tick)
	assert.Equal(t, before["east"], importIPs(t, []*cluster.Cluster{east}, ns, "web", withVIP)["east"], "the other cluster's VIP is untouched")

	// The quota goes: the VIPs come (the import is retried with backoff).
	require.NoError(t, north.Kube.CoreV1().ResourceQuotas(ns).Delete(bg(), "no-services", metav1.DeleteOptions{}))
	for _, name := range []string{"web", "api"} {
		importIPs(t, cs, ns, name, func(c *cluster.Cluster, si *mcsv1beta1.ServiceImport) error {
			if err := withVIP(c, si); err != nil {
				return err
			}
			if ready := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady)); ready == nil || ready.Status != metav1.ConditionTrue {
				return fmt.Errorf("ready %v", ready)
			}
			return nil
		})
	}
}

func TestDerivedServiceVIPs(t *testing.T) {
	top := t // importers started in subtests outlive them
	set := cluster.Start(t, cluster.Names("east", "west", "north")...)
	cs := set.Clusters
	east, west, north := cs[0], cs[1], cs[2]
	mkNamespace(t, "shop", cs...)
	o := baseOptions(set.Kubeconfig, "east", "west", "north")
	require.Equal(t, importer.VIPModeDerived, importer.DefaultOptions().VIPMode, "derived-service is the default")
	o.VIPMode = importer.VIPModeDerived
	imp := startImporter(t, o)

	exportService(t, east, "shop", "web")
	derived := vip.DerivedName("shop", "web")
	withDerived := func(c *cluster.Cluster, si *mcsv1beta1.ServiceImport) error {
		svc, err := c.Kube.CoreV1().Services("shop").Get(bg(), derived, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(si.Spec.IPs) == 0 || !slices.Equal(si.Spec.IPs, svc.Spec.ClusterIPs) {
			return fmt.Errorf("import ips %v, derived Service ClusterIPs %v", si.Spec.IPs, svc.Spec.ClusterIPs)
		}
		if si.Annotations[mcsapi.AnnotationDerivedService] != derived {
			return fmt.Errorf("annotation %v", si.Annotations)
		}
		if svc.Spec.Selector != nil || svc.Spec.Ports[0].Port != 80 || svc.Spec.Type != corev1.ServiceTypeClusterIP {
			return fmt.Errorf("derived Service spec %+v", svc.Spec)
		}
		slices, err := mirrored(c, "shop", "web")
		if err != nil || len(slices) != 1 || slices[0].Labels[mcsapi.LabelKubeServiceName] != derived {
			return fmt.Errorf("mirrored slices %v (err %v) lack kubernetes.io/service-name=%s", slices, err, derived)
		}
		return nil
	}
	first := importIPs(t, cs, "shop", "web", withDerived)
	require.NotEqual(t, first["east"], first["west"], "the derived model gives each cluster its own VIP")
	for _, c := range cs {
		assert.GreaterOrEqual(t, imp.writes(t)[c.Name+"/Service/create"], 1.0, "derived Service creates counted in mcs_importer_writes_total")
	}

	t.Run("stable across restarts", func(t *testing.T) {
		imp.stop()
		imp = startImporter(top, o)
		imp.quiesce(t, 2*time.Second)
		again := importIPs(t, cs, "shop", "web", withDerived)
		require.Equal(t, first, again)
	})

	t.Run("a derived Service deleted by hand is recreated", func(t *testing.T) {
		require.NoError(t, west.Kube.CoreV1().Services("shop").Delete(bg(), derived, metav1.DeleteOptions{}))
		importIPs(t, cs, "shop", "web", withDerived) // recreated, ips follow the new ClusterIP
	})

	t.Run("the derived Service carries the import's session affinity", func(t *testing.T) {
		affinity := func(want corev1.ServiceAffinity, timeout int32) {
			t.Helper()
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				for _, cl := range cs {
					svc, err := cl.Kube.CoreV1().Services("shop").Get(bg(), derived, metav1.GetOptions{})
					if !assert.NoError(c, err) {
						return
					}
					assert.Equal(c, want, svc.Spec.SessionAffinity, cl.Name)
					if want == corev1.ServiceAffinityClientIP && assert.NotNil(c, svc.Spec.SessionAffinityConfig) {
						assert.Equal(c, timeout, *svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds, cl.Name)
					}
				}
			}, waitFor, tick)
		}
		before := importIPs(t, cs, "shop", "web", withDerived)
		src, err := east.Kube.CoreV1().Services("shop").Get(bg(), "web", metav1.GetOptions{})
		require.NoError(t, err)
		src.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		src.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptrTo[int32](600)}}
		_, err = east.Kube.CoreV1().Services("shop").Update(bg(), src, metav1.UpdateOptions{})
		require.NoError(t, err)
		affinity(corev1.ServiceAffinityClientIP, 600)
		imp.quiesce(t, 2*time.Second) // and not rewritten once it is so
		src, err = east.Kube.CoreV1().Services("shop").Get(bg(), "web", metav1.GetOptions{})
		require.NoError(t, err)
		src.Spec.SessionAffinity, src.Spec.SessionAffinityConfig = corev1.ServiceAffinityNone, nil
		_, err = east.Kube.CoreV1().Services("shop").Update(bg(), src, metav1.UpdateOptions{})
		require.NoError(t, err)
		affinity(corev1.ServiceAffinityNone, 0)
		require.Equal(t, before, importIPs(t, cs, "shop", "web", withDerived), "changed in place: the VIPs stay")
	})

	t.Run("dual-stack: one VIP per family, in ipFamilies order", func(t *testing.T) {
		_, err := east.Kube.CoreV1().Services("shop").Create(bg(), &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "dual"},
			Spec: corev1.ServiceSpec{
				Ports:          []corev1.ServicePort{tcpPort("http", 80)},
				IPFamilies:     []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol},
				IPFamilyPolicy: ptrTo(corev1.IPFamilyPolicyRequireDualStack),
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		mkExport(t, east, "shop", "dual")
		got := importIPs(t, cs, "shop", "dual", func(_ *cluster.Cluster, si *mcsv1beta1.ServiceImport) error {
			if len(si.Spec.IPs) != 2 || !slices.Equal(si.Spec.IPFamilies, []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}) {
				return fmt.Errorf("ips %v families %v", si.Spec.IPs, si.Spec.IPFamilies)
			}
			return nil
		})
		for c, ips := range got {
			require.True(t, netip.MustParseAddr(ips[0]).Is6() && netip.MustParseAddr(ips[1]).Is4(), "%s: %v", c, ips)
		}
	})

	t.Run("the derived Service follows the oldest export's IP families", func(t *testing.T) {
		mk := func(fams []corev1.IPFamily, policy corev1.IPFamilyPolicy) {
			_, err := east.Kube.CoreV1().Services("shop").Create(bg(), &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "fam"},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{tcpPort("http", 80)}, IPFamilies: fams, IPFamilyPolicy: &policy},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		families := func(want ...bool) func(*cluster.Cluster, *mcsv1beta1.ServiceImport) error { // true: IPv6
			return func(c *cluster.Cluster, si *mcsv1beta1.ServiceImport) error {
				if len(si.Spec.IPs) != len(want) {
					return fmt.Errorf("ips %v families %v", si.Spec.IPs, si.Spec.IPFamilies)
				}
				for i, v6 := range want {
					if netip.MustParseAddr(si.Spec.IPs[i]).Is6() != v6 {
						return fmt.Errorf("ips %v families %v", si.Spec.IPs, si.Spec.IPFamilies)
					}
				}
				svc, err := c.Kube.CoreV1().Services("shop").Get(bg(), vip.DerivedName("shop", "fam"), metav1.GetOptions{})
				if err != nil || !slices.Equal(svc.Spec.ClusterIPs, si.Spec.IPs) {
					return fmt.Errorf("derived Service %v (err %v), import ips %v", svc.Spec.ClusterIPs, err, si.Spec.IPs)
				}
				return nil
			}
		}
		mk([]corev1.IPFamily{corev1.IPv4Protocol}, corev1.IPFamilyPolicySingleStack)
		mkExport(t, east, "shop", "fam")
		importIPs(t, cs, "shop", "fam", families(false))
		// The owner recreates the Service as IPv6 (a Service's primary
		// family cannot change in place).
		require.NoError(t, east.Kube.CoreV1().Services("shop").Delete(bg(), "fam", metav1.DeleteOptions{}))
		mk([]corev1.IPFamily{corev1.IPv6Protocol}, corev1.IPFamilyPolicySingleStack)
		importIPs(t, cs, "shop", "fam", families(true))
		// ... then makes it dual-stack: the derived Service gains an IPv4 VIP in place.
		svc, err := east.Kube.CoreV1().Services("shop").Get(bg(), "fam", metav1.GetOptions{})
		require.NoError(t, err)
		svc.Spec.IPFamilyPolicy = ptrTo(corev1.IPFamilyPolicyPreferDualStack)
		svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
		_, err = east.Kube.CoreV1().Services("shop").Update(bg(), svc, metav1.UpdateOptions{})
		require.NoError(t, err)
		importIPs(t, cs, "shop", "fam", families(true, false))
		imp.quiesce(t, 2*time.Second)
		// Someone (or an admission policy) makes a derived Service
		// RequireDualStack: left so, not rewritten on every pass.
		d, err := north.Kube.CoreV1().Services("shop").Get(bg(), vip.DerivedName("shop", "fam"), metav1.GetOptions{})
		require.NoError(t, err)
		d.Spec.IPFamilyPolicy = ptrTo(corev1.IPFamilyPolicyRequireDualStack)
		_, err = north.Kube.CoreV1().Services("shop").Update(bg(), d, metav1.UpdateOptions{})
		require.NoError(t, err)
		imp.quiesce(t, 3*time.Second)
		importIPs(t, cs, "shop", "fam", families(true, false))
	})

	t.Run("mirrored slices name their ports as the derived Service does", func(t *testing.T) {
		// east (oldest): one unnamed port; west: "http" (the same port)
		// and "metrics". The import has "" and "metrics"; its derived
		// Service must name the unnamed port ("tcp-80"), and proxies
		// match slice ports by name.
		slice := func(c *cluster.Cluster, ports ...discoveryv1.EndpointPort) {
			_, err := c.Kube.DiscoveryV1().EndpointSlices("shop").Create(bg(), &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "mp-1", Labels: map[string]string{
					discoveryv1.LabelServiceName: "mp", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       ports,
				Endpoints:   endpoints([]ep{{ip: "10.1.7.1", ready: true}}),
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		mkService(t, east, "shop", "mp", false, tcpPort("", 80))
		slice(east, discoveryv1.EndpointPort{Port: ptrTo[int32](8080), Protocol: ptrTo(corev1.ProtocolTCP)})
		mkExport(t, east, "shop", "mp")
		mkService(t, west, "shop", "mp", false, tcpPort("http", 80), tcpPort("metrics", 9090))
		slice(west, discoveryv1.EndpointPort{Name: ptrTo("http"), Port: ptrTo[int32](8080), Protocol: ptrTo(corev1.ProtocolTCP)},
			discoveryv1.EndpointPort{Name: ptrTo("metrics"), Port: ptrTo[int32](9090), Protocol: ptrTo(corev1.ProtocolTCP)})
		mkExport(t, west, "shop", "mp")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			svc, err := north.Kube.CoreV1().Services("shop").Get(bg(), vip.DerivedName("shop", "mp"), metav1.GetOptions{})
			if !assert.NoError(c, err) {
				return
			}
			served := map[string]bool{}
			for _, p := range svc.Spec.Ports {
				served[p.Name] = true
			}
			assert.Equal(c, map[string]bool{"tcp-80": true, "metrics": true}, served)
			items, err := mirrored(north, "shop", "mp")
			if !assert.NoError(c, err) || !assert.Len(c, items, 2) {
				return
			}
			bySource := map[string][]string{}
			for _, s := range items {
				for _, p := range s.Ports {
					bySource[s.Labels[mcsapi.LabelSourceCluster]] = append(bySource[s.Labels[mcsapi.LabelSourceCluster]], ptrDeref(p.Name))
				}
			}
			assert.Equal(c, map[string][]string{"east": {"tcp-80"}, "west": {"tcp-80", "metrics"}}, bySource)
		}, waitFor, tick)
		imp.quiesce(t, 2*time.Second)
	})

	t.Run("headless imports have no derived Service", func(t *testing.T) {
		mkService(t, east, "shop", "db", true, tcpPort("pg", 5432))
		putSlice(t, east, "shop", "db", "db-1", ep{ip: "10.1.0.9", ready: true, hostname: "db-0"})
		mkExport(t, east, "shop", "db")
		importIPs(t, cs, "shop", "db", func(_ *cluster.Cluster, si *mcsv1beta1.ServiceImport) error {
			if si.Spec.Type != mcsv1beta1.Headless || len(si.Spec.IPs) != 0 {
				return fmt.Errorf("type %s ips %v", si.Spec.Type, si.Spec.IPs)
			}
			return nil
		})
		_, err := west.Kube.CoreV1().Services("shop").Get(bg(), vip.DerivedName("shop", "db"), metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "derived Service for a headless import: %v", err)
	})

	t.Run("a Service not ours holding the derived name: the import is served without a VIP there", func(t *testing.T) {
		held := vip.DerivedName("shop", "taken")
		theirs, err := west.Kube.CoreV1().Services("shop").Create(bg(), &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: held},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{tcpPort("other", 81)}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		exportService(t, east, "shop", "taken")
		putSlice(t, east, "shop", "taken", "taken-1", ips(1, "10.6.0")...)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			si, err := getImport(west, "shop", "taken")
			if !assert.NoError(c, err) {
				return
			}
			assert.Empty(c, si.Spec.IPs)
			if r := findCond(si.Status.Conditions, "Ready"); assert.NotNil(c, r) {
				assert.Equal(c, "False/Pending", string(r.Status)+"/"+r.Reason)
				assert.Contains(c, r.Message, "Service shop/"+held)
			}
			eps, err := endpointsBySource(west, "shop", "taken")
			assert.NoError(c, err)
			assert.Equal(c, map[string][]string{"east": {"10.6.0.1"}}, eps, "the endpoints are mirrored")
			e, err := getExport(east, "shop", "taken")
			if assert.NoError(c, err) {
				if r := findCond(e.Status.Conditions, "Ready"); assert.NotNil(c, r) {
					assert.Equal(c, "False/Failed", string(r.Status)+"/"+r.Reason)
					assert.Contains(c, r.Message, "west: Service shop/"+held)
				}
			}
		}, waitFor, tick)
		for _, c := range []*cluster.Cluster{east, north} {
			si, err := getImport(c, "shop", "taken")
			require.NoError(t, err)
			require.Len(t, si.Spec.IPs, 1, "served with a VIP in %s", c.Name)
		}
		svc, err := west.Kube.CoreV1().Services("shop").Get(bg(), held, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, theirs.ResourceVersion, svc.ResourceVersion, "their Service is left alone")

		// Their Service goes: ours takes the name, the import its VIP.
		require.NoError(t, west.Kube.CoreV1().Services("shop").Delete(bg(), held, metav1.DeleteOptions{}))
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			si, err := getImport(west, "shop", "taken")
			if assert.NoError(c, err) {
				assert.Len(c, si.Spec.IPs, 1)
				assert.Equal(c, "True/Ready", condition(si.Status.Conditions, "Ready"))
			}
			_, ready, _, err := exportConditions(east, "shop", "taken")
			assert.NoError(c, err)
			assert.Equal(c, "True/Exported", ready)
		}, waitFor, tick)
		rmExport(t, east, "shop", "taken")
	})

	t.Run("derived Services of no import of ours are deleted after a restart", func(t *testing.T) {
		// While no importer runs: a derived Service is left behind with
		// no export or import (a crash between deleting an import and its
		// Service), and in west a foreign ServiceImport takes the name of
		// an import of ours, whose derived Service stays.
		imp.stop()
		ghost := vip.DerivedName("shop", "ghost")
		_, err := north.Kube.CoreV1().Services("shop").Create(bg(), &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: ghost, Labels: map[string]string{
				mcsapi.LabelAppManagedBy: mcsapi.ManagedByImporter, mcsapi.LabelDerivedFor: "ghost"}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{tcpPort("http", 80)}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, west.MCS.MulticlusterV1beta1().ServiceImports("shop").Delete(bg(), "dual", metav1.DeleteOptions{}))
		_, err = west.MCS.MulticlusterV1beta1().ServiceImports("shop").Create(bg(), &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "dual"},
			Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = west.Kube.CoreV1().Services("shop").Get(bg(), vip.DerivedName("shop", "dual"), metav1.GetOptions{})
		require.NoError(t, err, "the derived Service of dual is still there")

		imp = startImporter(top, o)
		require.Eventually(t, func() bool {
			_, err1 := north.Kube.CoreV1().Services("shop").Get(bg(), ghost, metav1.GetOptions{})
			_, err2 := west.Kube.CoreV1().Services("shop").Get(bg(), vip.DerivedName("shop", "dual"), metav1.GetOptions{})
			return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2)
		}, waitFor, tick)
		// dual keeps its derived Service where the import is ours.
		_, err = east.Kube.CoreV1().Services("shop").Get(bg(), vip.DerivedName("shop", "dual"), metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, west.MCS.MulticlusterV1beta1().ServiceImports("shop").Delete(bg(), "dual", metav1.DeleteOptions{}))
	})

	t.Run("switched to another --vip-mode: the derived Services go", func(t *testing.T) {
		exportService(t, east, "shop", "switch")
		dn := vip.DerivedName("shop", "switch")
		importIPs(t, cs, "shop", "switch", func(c *cluster.Cluster, si *mcsv1beta1.ServiceImport) error {
			if len(si.Spec.IPs) == 0 {
				return fmt.Errorf("no VIP yet")
			}
			return nil
		})
		imp.stop()
		no := o
		no.VIPMode = importer.VIPModeNone
		imp = startImporter(top, no)
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			for _, c := range cs {
				_, err := c.Kube.CoreV1().Services("shop").Get(bg(), dn, metav1.GetOptions{})
				assert.True(ct, apierrors.IsNotFound(err), "derived Service in %s: %v", c.Name, err)
				si, err := getImport(c, "shop", "switch")
				if assert.NoError(ct, err) {
					assert.Empty(ct, si.Spec.IPs, "in %s", c.Name)
				}
				ss, err := mirrored(c, "shop", "switch")
				if assert.NoError(ct, err) && assert.Len(ct, ss, 1) {
					assert.NotContains(ct, ss[0].Labels, mcsapi.LabelKubeServiceName, "in %s", c.Name)
				}
			}
		}, waitFor, tick)
		imp.stop()
		imp = startImporter(top, o)
		rmExport(t, east, "shop", "switch")
	})

	t.Run("unexport deletes the derived Services", func(t *testing.T) {
		rmExport(t, east, "shop", "web")
		require.Eventually(t, func() bool {
			for _, c := range cs {
				_, err := c.Kube.CoreV1().Services("shop").Get(bg(), derived, metav1.GetOptions{})
				_, ierr := getImport(c, "shop", "web")
				if !apierrors.IsNotFound(err) || !apierrors.IsNotFound(ierr) {
					return false
				}
			}
			return true
		}, waitFor, tick)
	})
}

func TestClusterSetCIDRVIPs(t *testing.T) {
	top := t // importers started in subtests outlive them
	set := cluster.Start(t, cluster.Names("east", "west", "north")...)
	cs := set.Clusters
	east, west := cs[0], cs[1]
	mkNamespace(t, "shop", cs...)
	pool := netip.MustParsePrefix("10.250.0.0/29") // 6 usable addresses: .1 to .6
	o := baseOptions(set.Kubeconfig, "east", "west", "north")
	o.VIPMode = importer.VIPModeCIDR
	o.ClusterSetCIDRs = []string{pool.String()}
	imp := startImporter(t, o)

	// sameVIP: one VIP, the same everywhere, in the pool, recorded on the import.
	sameVIP := func(c *cluster.Cluster, si *mcsv1beta1.ServiceImport) error {
		if len(si.Spec.IPs) != 1 || !pool.Contains(netip.MustParseAddr(si.Spec.IPs[0])) {
			return fmt.Errorf("ips %v", si.Spec.IPs)
		}
		if si.Annotations[mcsapi.AnnotationClusterSetIP] != si.Spec.IPs[0] {
			return fmt.Errorf("annotation %v", si.Annotations)
		}
		return nil
	}
	vipOf := func(ns, name string) string {
		got := importIPs(t, cs, ns, name, sameVIP)
		require.Equal(t, got["east"], got["west"])
		require.Equal(t, got["east"], got["north"])
		return got["east"][0]
	}

	exportService(t, east, "shop", "a", annotate("true"))
	exportService(t, east, "shop", "plain")
	va := vipOf("shop", "a")
	// Not opted in: each cluster's derived Service's VIP, outside the pool.
	importIPs(t, cs, "shop", "plain", func(c *cluster.Cluster, si *mcsv1beta1.ServiceImport) error {
		if len(si.Spec.IPs) != 1 || si.Spec.Type != mcsv1beta1.ClusterSetIP || pool.Contains(netip.MustParseAddr(si.Spec.IPs[0])) {
			return fmt.Errorf("not opted in: want the derived Service's VIP, have ips %v", si.Spec.IPs)
		}
		svc, err := c.Kube.CoreV1().Services("shop").Get(bg(), vip.DerivedName("shop", "plain"), metav1.GetOptions{})
		if err != nil || svc.Spec.ClusterIP != si.Spec.IPs[0] {
			return fmt.Errorf("derived Service: %v %v", svc, err)
		}
		return nil
	})

	t.Run("exports that disagree: the oldest decides, all get ClusterSetIPConflict", func(t *testing.T) {
		exportService(t, east, "shop", "mixed", annotate("true"))
		time.Sleep(1100 * time.Millisecond) // creationTimestamp has one-second resolution
		exportService(t, west, "shop", "mixed", annotate("false"))
		vipOf("shop", "mixed")
		for _, c := range []*cluster.Cluster{east, west} {
			require.Eventually(t, func() bool {
				e, err := getExport(c, "shop", "mixed")
				if err != nil {
					return false
				}
				cond := meta.FindStatusCondition(e.Status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict))
				return cond != nil && cond.Status == metav1.ConditionTrue && strings.Contains(cond.Reason, "ClusterSetIPConflict")
			}, waitFor, tick, c.Name)
		}
	})

	t.Run("stable across restarts", func(t *testing.T) {
		imp.stop()
		imp = startImporter(top, o)
		imp.quiesce(t, 2*time.Second)
		require.Equal(t, va, vipOf("shop", "a"))
	})

	t.Run("the allocating cluster leaves the clusterset", func(t *testing.T) {
		exportService(t, east, "shop", "shared", annotate("true"))
		v := vipOf("shop", "shared")
		exportService(t, west, "shop", "shared", annotate("true"))
		imp.stop()
		// east (whose export allocated the VIP) is no longer a member.
		wo := o
		wo.Contexts = []string{"west", "north"}
		imp = startImporter(top, wo)
		got := importIPs(t, cs[1:], "shop", "shared", sameVIP)
		require.Equal(t, v, got["west"][0])
		require.Equal(t, v, got["north"][0])
		imp.stop()
		imp = startImporter(top, o)
		rmExport(t, west, "shop", "shared")
		rmExport(t, east, "shop", "shared")
	})

	var racers []*running
	t.Run("racing importers, one per cluster, converge without sharing a VIP", func(t *testing.T) {
		imp.stop()
		for _, c := range cs {
			ro := o
			ro.ImportInto = []string{c.Name}
			racers = append(racers, startImporter(top, ro))
		}
		for _, n := range []string{"r1", "r2"} {
			exportService(t, east, "shop", n, annotate("true"))
		}
		seen := map[string]string{}
		for _, n := range []string{"a", "mixed", "r1", "r2"} {
			v := vipOf("shop", n)
			require.NotContains(t, seen, v, "%s and %s share %s", n, seen[v], v)
			seen[v] = n
		}
		require.Equal(t, va, vipOf("shop", "a"))
	})

	t.Run("exhaustion: Ready=False on the import that gets none, the others unaffected", func(t *testing.T) {
		// a, mixed, r1, r2 hold four of six addresses.
		for _, n := range []string{"x1", "x2", "x3"} {
			exportService(t, east, "shop", n, annotate("true"))
		}
		var starved string
		require.Eventually(t, func() bool {
			starved = ""
			with := 0
			for _, n := range []string{"x1", "x2", "x3"} {
				si, err := getImport(east, "shop", n)
				if err != nil {
					return false
				}
				if len(si.Spec.IPs) == 1 {
					with++
					continue
				}
				c := meta.FindStatusCondition(si.Status.Conditions, "Ready")
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != vip.ReasonClusterSetIPExhausted {
					return false
				}
				starved = n
			}
			return with == 2 && starved != ""
		}, waitFor, tick)
		require.Equal(t, va, vipOf("shop", "a"))

		// Unexporting one frees its address for the starved import.
		rmExport(t, east, "shop", "r1")
		vipOf("shop", starved)
	})

	t.Run("a freed address goes to the waiting import at once, not at the next resync", func(t *testing.T) {
		for _, r := range racers {
			r.stop()
		}
		lo := o
		lo.Resync = time.Hour
		imp = startImporter(top, lo)
		// a, mixed, r2, x1, x2, x3 hold all six addresses.
		exportService(t, east, "shop", "late", annotate("true"))
		require.Eventually(t, func() bool {
			si, err := getImport(east, "shop", "late")
			if err != nil {
				return false
			}
			c := meta.FindStatusCondition(si.Status.Conditions, "Ready")
			return len(si.Spec.IPs) == 0 && c != nil && c.Reason == vip.ReasonClusterSetIPExhausted
		}, waitFor, tick)
		imp.quiesce(t, 3*time.Second) // nothing of late's left to do
		rmExport(t, east, "shop", "r2")
		vipOf("shop", "late")
	})
}

// An IPv4-only importing cluster (default --vip-mode=derived-service): a
// dual-stack export gets an IPv4 VIP there (asking for both families would
// be refused), and an IPv6-only export an import without a VIP whose Ready
// condition says IPFamilyNotSupported, not a retried failing create.
func TestDerivedServiceIPv4OnlyMember(t *testing.T) {
	set := cluster.Start(t, cluster.Spec{Name: "east"}, cluster.Spec{Name: "west", IPv4Only: true})
	cs := set.Clusters
	east, west := cs[0], cs[1]
	mkNamespace(t, "shop", cs...)
	o := baseOptions(set.Kubeconfig, "east", "west")
	o.VIPMode = importer.VIPModeDerived
	o.Resync = 0
	imp := startImporter(t, o)
	mk := func(name string, fams []corev1.IPFamily, policy corev1.IPFamilyPolicy) {
		_, err := east.Kube.CoreV1().Services("shop").Create(bg(), &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{tcpPort("http", 80)}, IPFamilies: fams, IPFamilyPolicy: &policy},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		mkExport(t, east, "shop", name)
	}
	mk("dual", []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, corev1.IPFamilyPolicyPreferDualStack)
	mk("six", []corev1.IPFamily{corev1.IPv6Protocol}, corev1.IPFamilyPolicySingleStack)
	mk("sixfour", []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, corev1.IPFamilyPolicyPreferDualStack)

	got := importIPs(t, cs, "shop", "dual", func(c *cluster.Cluster, si *mcsv1beta1.ServiceImport) error {
		want := map[string][]corev1.IPFamily{"east": {corev1.IPv4Protocol, corev1.IPv6Protocol}, "west": {corev1.IPv4Protocol}}[c.Name]
		if len(si.Spec.IPs) != len(want) || !slices.Equal(si.Spec.IPFamilies, want) || condition(si.Status.Conditions, "Ready") != "True/Ready" {
			return fmt.Errorf("ips %v families %v, Ready %s", si.Spec.IPs, si.Spec.IPFamilies, condition(si.Status.Conditions, "Ready"))
		}
		return nil
	})
	assert.True(t, netip.MustParseAddr(got["west"][0]).Is4(), "west's VIP is IPv4: %v", got["west"])
	importIPs(t, cs, "shop", "six", func(c *cluster.Cluster, si *mcsv1beta1.ServiceImport) error {
		ready := condition(si.Status.Conditions, "Ready")
		switch {
		case c == east && (len(si.Spec.IPs) != 1 || !netip.MustParseAddr(si.Spec.IPs[0]).Is6() || ready != "True/Ready"):
			return fmt.Errorf("ips %v, Ready %s", si.Spec.IPs, ready)
		case c == west && (len(si.Spec.IPs) != 0 || ready != "False/IPFamilyNotSupported"):
			return fmt.Errorf("ips %v, Ready %s", si.Spec.IPs, ready)
		}
		return nil
	})
	// IPv6 first, IPv4 too: west has no IPv6 range, so its derived
	// Service is IPv4, and stays so (not replaced) across a restart.
	sixfour := importIPs(t, cs, "shop", "sixfour", func(c *cluster.Cluster, si *mcsv1beta1.ServiceImport) error {
		want := map[string][]corev1.IPFamily{"east": {corev1.IPv6Protocol, corev1.IPv4Protocol}, "west": {corev1.IPv4Protocol}}[c.Name]
		if len(si.Spec.IPs) != len(want) || !slices.Equal(si.Spec.IPFamilies, want) || condition(si.Status.Conditions, "Ready") != "True/Ready" {
			return fmt.Errorf("ips %v families %v, Ready %s", si.Spec.IPs, si.Spec.IPFamilies, condition(si.Status.Conditions, "Ready"))
		}
		return nil
	})
	// Settled, not retrying (no resync here): no write, the refused
	// derived-Service creates included, for 3 s.
	imp.quiesce(t, 3*time.Second)

	// A change to the IPv6-only export passes its key again: the refused
	// family is not asked for again (no create sent).
	before := imp.writes(t)["west/Service/create"]
	svc, err := east.Kube.CoreV1().Services("shop").Get(bg(), "six", metav1.GetOptions{})
	require.NoError(t, err)
	svc.Spec.Ports = append(svc.Spec.Ports, tcpPort("metrics", 9090))
	_, err = east.Kube.CoreV1().Services("shop").Update(bg(), svc, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		si, err := getImport(west, "shop", "six")
		return err == nil && len(si.Spec.Ports) == 2
	}, waitFor, tick)
	imp.quiesce(t, 2*time.Second)
	assert.Equal(t, before, imp.writes(t)["west/Service/create"], "no create for a family west refused")

	imp.stop()
	imp = startImporter(t, o)
	imp.quiesce(t, 3*time.Second)
	again := importIPs(t, cs, "shop", "sixfour", func(*cluster.Cluster, *mcsv1beta1.ServiceImport) error { return nil })
	assert.Equal(t, sixfour, again, "VIPs stable across a restart")
}

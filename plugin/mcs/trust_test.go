package mcs

import (
	"fmt"
	"testing"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/compact"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
)

func TestUntrusted(t *testing.T) {
	for _, tc := range []struct {
		managers []string
		manager  string
		source   string
		want     string
	}{
		{nil, "", "", compact.UntrustedNoManager},
		{nil, compact.KubeEndpointSliceManager, "", compact.UntrustedKubeController},
		{nil, mcsapi.ManagedByImporter, "", ""},
		{nil, mcsapi.ManagedByImporter, "anyone", ""},
		{nil, "other-importer.example", "", ""},
		{[]string{mcsapi.ManagedByImporter}, mcsapi.ManagedByImporter, "", ""},
		{[]string{mcsapi.ManagedByImporter}, mcsapi.ManagedByImporter, "anyone", ""},
		{[]string{mcsapi.ManagedByImporter}, "other-importer.example", "", compact.UntrustedManagerNotListed},
		{[]string{mcsapi.ManagedByImporter}, "", "", compact.UntrustedNoManager},
		{[]string{mcsapi.ManagedByImporter}, compact.KubeEndpointSliceManager, "", compact.UntrustedManagerNotListed},
		// MANAGER/SOURCE: copies by MANAGER of SOURCE's slices only.
		{[]string{mcsapi.ManagedByImporter + "/" + compact.KubeEndpointSliceManager}, mcsapi.ManagedByImporter, compact.KubeEndpointSliceManager, ""},
		{[]string{mcsapi.ManagedByImporter + "/" + compact.KubeEndpointSliceManager}, mcsapi.ManagedByImporter, "anyone", compact.UntrustedSourceManager},
		{[]string{mcsapi.ManagedByImporter + "/" + compact.KubeEndpointSliceManager}, mcsapi.ManagedByImporter, "", compact.UntrustedSourceManager},
		{[]string{mcsapi.ManagedByImporter + "/" + compact.KubeEndpointSliceManager}, compact.KubeEndpointSliceManager, "", compact.UntrustedManagerNotListed},
		{[]string{mcsapi.ManagedByImporter + "/" + compact.KubeEndpointSliceManager}, "other-importer.example", compact.KubeEndpointSliceManager, compact.UntrustedManagerNotListed},
		{[]string{mcsapi.ManagedByImporter + "/a", mcsapi.ManagedByImporter + "/b"}, mcsapi.ManagedByImporter, "b", ""},
		{[]string{mcsapi.ManagedByImporter + "/a", mcsapi.ManagedByImporter}, mcsapi.ManagedByImporter, "c", ""},
	} {
		assert.Equal(t, tc.want, compact.Untrusted(tc.managers, tc.manager, tc.source), "%v %q %q", tc.managers, tc.manager, tc.source)
	}
}

// Forged EndpointSlices next to the importer's, on a real API server: one
// without a manager, one claiming the Kubernetes endpointslice controller,
// one of another manager. None of the first two is ever served; the third
// only where the stanza does not name its trusted managers; and a copy by
// the importer of a slice another manager wrote, served only where the
// stanza trusts the importer's copies whatever their source (not with
// MANAGER/SOURCE). Checked in A,
// per-endpoint, SRV and PTR answers, over UDP and TCP.
func TestForgedSlices(t *testing.T) {
	set := cluster.Start(t, cluster.Spec{Name: "main"})
	c := set.Clusters[0]
	createNamespace(t, c, "trust")
	createImport(t, c, "trust", "db", mcsv1beta1.Headless, nil, false, port("pg", corev1.ProtocolTCP, 5432))
	mk := func(name, manager, clusterID, host, ip string) {
		labels := map[string]string{mcsapi.LabelServiceName: "db", mcsapi.LabelSourceCluster: clusterID}
		if manager != "" {
			labels[discoveryv1.LabelManagedBy] = manager
		}
		if manager == mcsapi.ManagedByImporter {
			labels[mcsapi.LabelSourceManagedBy] = compact.KubeEndpointSliceManager
			if host == "db-6" {
				labels[mcsapi.LabelSourceManagedBy] = "hand-written.example"
			}
		}
		_, err := c.Kube.DiscoveryV1().EndpointSlices("trust").Create(ctxT(t), &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: labels},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("pg"), Port: ptr.To[int32](5432), Protocol: ptr.To(corev1.ProtocolTCP)}},
			Endpoints:   []discoveryv1.Endpoint{endpoint(host, nil, ip)},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	before := map[string]float64{}
	for _, r := range []string{compact.UntrustedNoManager, compact.UntrustedKubeController, compact.UntrustedManagerNotListed, compact.UntrustedSourceManager} {
		before[r] = testutil.ToFloat64(ignoredObjects.WithLabelValues(r))
	}
	mk("db-real", mcsapi.ManagedByImporter, "east", "db-0", "10.50.0.1")
	mk("db-none", "", "east", "db-9", "6.6.6.6")
	mk("db-kube", compact.KubeEndpointSliceManager, "evil", "db-8", "6.6.6.7")
	mk("db-other", "other-importer.example", "other", "db-7", "10.50.0.7")
	mk("db-copied", mcsapi.ManagedByImporter, "west", "db-6", "10.50.0.6")

	stanza := func(extra string) string {
		return fmt.Sprintf(`.:0 {
    mcs clusterset.local in-addr.arpa {
        kubeconfig %s main
%s    }
}
`, set.Kubeconfig, extra)
	}
	lax := startCoreDNS(t, stanza(""))
	strict := startCoreDNS(t, stanza("        endpointslice_managers "+mcsapi.ManagedByImporter+"\n"))
	bySource := startCoreDNS(t, stanza("        endpointslice_managers "+mcsapi.ManagedByImporter+"/"+compact.KubeEndpointSliceManager+"\n"))

	lax.eventually(t, "db.trust.svc.clusterset.local", dns.TypeA, answer(
		"db.trust.svc.clusterset.local. A 10.50.0.1", "db.trust.svc.clusterset.local. A 10.50.0.6", "db.trust.svc.clusterset.local. A 10.50.0.7"))
	strict.eventually(t, "db.trust.svc.clusterset.local", dns.TypeA, answer(
		"db.trust.svc.clusterset.local. A 10.50.0.1", "db.trust.svc.clusterset.local. A 10.50.0.6"))
	bySource.eventually(t, "db.trust.svc.clusterset.local", dns.TypeA, answer("db.trust.svc.clusterset.local. A 10.50.0.1"))
	bySource.eventually(t, "db-6.west.db.trust.svc.clusterset.local", dns.TypeA, wantNX)
	bySource.eventually(t, reverse(t, "10.50.0.6"), dns.TypePTR, negative(dns.RcodeNameError, "in-addr.arpa."))
	strict.eventually(t, "db-6.west.db.trust.svc.clusterset.local", dns.TypeA, answer("db-6.west.db.trust.svc.clusterset.local. A 10.50.0.6"))
	for _, srv := range []*server{lax, strict, bySource} {
		srv.eventually(t, "db-0.east.db.trust.svc.clusterset.local", dns.TypeA, answer("db-0.east.db.trust.svc.clusterset.local. A 10.50.0.1"))
		srv.eventually(t, "db-9.east.db.trust.svc.clusterset.local", dns.TypeA, wantNX)
		srv.eventually(t, "db-8.evil.db.trust.svc.clusterset.local", dns.TypeA, wantNX)
		srv.eventually(t, "evil.db.trust.svc.clusterset.local", dns.TypeA, wantNX)
		srv.eventually(t, reverse(t, "6.6.6.6"), dns.TypePTR, negative(dns.RcodeNameError, "in-addr.arpa."))
		srv.eventually(t, reverse(t, "6.6.6.7"), dns.TypePTR, negative(dns.RcodeNameError, "in-addr.arpa."))
		srv.eventually(t, reverse(t, "10.50.0.1"), dns.TypePTR, answer(reverse(t, "10.50.0.1")+" PTR db-0.east.db.trust.svc.clusterset.local."))
	}
	bySource.eventually(t, "_pg._tcp.db.trust.svc.clusterset.local", dns.TypeSRV, func(r *dns.Msg) error {
		if len(r.Answer) != 1 || r.Answer[0].(*dns.SRV).Target != "db-0.east.db.trust.svc.clusterset.local." {
			return fmt.Errorf("SRV %v, want only db-0.east", r.Answer)
		}
		return nil
	})
	strict.eventually(t, "db-7.other.db.trust.svc.clusterset.local", dns.TypeA, wantNX)
	bySource.eventually(t, "db-7.other.db.trust.svc.clusterset.local", dns.TypeA, wantNX)
	lax.eventually(t, "db-7.other.db.trust.svc.clusterset.local", dns.TypeA, answer("db-7.other.db.trust.svc.clusterset.local. A 10.50.0.7"))

	// Counted (each stanza's controller saw them).
	for r, min := range map[string]float64{compact.UntrustedNoManager: 3, compact.UntrustedKubeController: 1, compact.UntrustedManagerNotListed: 3, compact.UntrustedSourceManager: 1} {
		assert.GreaterOrEqual(t, testutil.ToFloat64(ignoredObjects.WithLabelValues(r))-before[r], min, r)
	}
}

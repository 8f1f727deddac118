package importer_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// An admission policy (a ValidatingAdmissionPolicy, as a webhook would)
// denies the derived Service in one member: the import and its mirrored
// slices are written there all the same, endpoints keep flowing, the
// import names no address, its Ready condition names the denial, and
// mcs_importer_errors_total{operation="assign VIP"} counts it. When the
// policy goes, the VIP comes.
func TestDerivedServiceDeniedByPolicy(t *testing.T) {
	set := cluster.Start(t, cluster.Names("east", "north")...)
	cs := set.Clusters
	east, north := cs[0], cs[1]
	const ns, policy = "denied", "no-derived-services"
	mkNamespace(t, ns, cs...)
	_, err := north.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(bg(), &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf(`!has(object.metadata.labels) || !('%s' in object.metadata.labels)`, mcsapi.LabelDerivedFor),
				Message:    "derived Services are not allowed here",
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = north.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(bg(), &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The policy acts once the API server has loaded it.
	require.Eventually(t, func() bool {
		_, err := north.Kube.CoreV1().Services(ns).Create(bg(), &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Labels: map[string]string{mcsapi.LabelDerivedFor: "probe"}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{tcpPort("http", 80)}},
		}, metav1.CreateOptions{})
		return err != nil
	}, waitFor, 200*time.Millisecond, "the policy never acted")

	o := baseOptions(set.Kubeconfig, "east", "north")
	o.VIPMode = importer.VIPModeDerived
	imp := startImporter(t, o)
	exportService(t, east, ns, "web")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		si, err := getImport(north, ns, "web")
		if !assert.NoError(c, err, "the import is written although its VIP cannot be made") {
			return
		}
		assert.Empty(c, si.Spec.IPs, "no address the cluster does not hold")
		ready := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
		if assert.NotNil(c, ready) {
			assert.Equal(c, metav1.ConditionFalse, ready.Status)
			assert.Equal(c, string(mcsv1beta1.ServiceImportReasonPending), ready.Reason)
			assert.Contains(c, ready.Message, "derived Services are not allowed here")
		}
		eps, err := endpointsBySource(north, ns, "web")
		assert.NoError(c, err)
		assert.Equal(c, []string{"10.1.0.1"}, eps["east"])
	}, waitFor, tick)
	assert.Positive(t, imp.counters(t, "mcs_importer_errors_total")["north/assign VIP"], "the denial is counted")
	// Endpoints keep flowing.
	putSlice(t, east, ns, "web", "web-1", ep{ip: "10.1.0.9", ready: true})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		eps, err := endpointsBySource(north, ns, "web")
		assert.NoError(c, err)
		assert.Equal(c, []string{"10.1.0.9"}, eps["east"])
	}, waitFor, tick)

	// The policy goes: the VIP comes (the key is retried with backoff).
	require.NoError(t, north.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(bg(), policy, metav1.DeleteOptions{}))
	importIPs(t, []*cluster.Cluster{north}, ns, "web", func(_ *cluster.Cluster, si *mcsv1beta1.ServiceImport) error {
		if len(si.Spec.IPs) == 0 {
			return fmt.Errorf("no ips yet")
		}
		return nil
	})
}

package importer_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// installTouchPolicies installs, in c, MutatingAdmissionPolicies that add
// the label policy.example/touched=yes to every EndpointSlice and
// ServiceImport written, and the annotation policy.example/note to every
// ServiceImport (as organisations' policies add owner or cost labels), and
// waits until they act.
func installTouchPolicies(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	add := func(name, group, resource, patch string) {
		_, err := c.Kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(bg(), &admissionv1.MutatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionv1.MutatingAdmissionPolicySpec{
				MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
						Rule:       admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
					},
				}}},
				Mutations: []admissionv1.Mutation{{PatchType: admissionv1.PatchTypeJSONPatch,
					JSONPatch: &admissionv1.JSONPatch{Expression: patch}}},
				ReinvocationPolicy: admissionv1.NeverReinvocationPolicy,
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = c.Kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(bg(), &admissionv1.MutatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       admissionv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	label := `JSONPatch{op: "add", path: "/metadata/labels/policy.example~1touched", value: "yes"}`
	add("touch-slices", "discovery.k8s.io", "endpointslices", "has(object.metadata.labels) ? ["+label+"] : []")
	add("touch-imports", mcsapi.Group, "serviceimports", "(has(object.metadata.labels) ? ["+label+"] : []) + "+
		`(has(object.metadata.annotations) ? [JSONPatch{op: "add", path: "/metadata/annotations/policy.example~1note", value: "added"}] : [])`)
	// Policies act once the API server has loaded them.
	mkNamespace(t, "policy-probe", c)
	require.Eventually(t, func() bool {
		name := fmt.Sprintf("probe-%d", time.Now().UnixNano())
		s, err := c.Kube.DiscoveryV1().EndpointSlices("policy-probe").Create(bg(), &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{"probe": "1"}},
			AddressType: discoveryv1.AddressTypeIPv4,
		}, metav1.CreateOptions{})
		return err == nil && s.Labels["policy.example/touched"] == "yes"
	}, waitFor, 200*time.Millisecond, "the policy never acted")
}

// A member whose admission policies add a label to every EndpointSlice and
// ServiceImport, and an annotation to every ServiceImport: the importer
// leaves those keys alone. After convergence it writes nothing there at
// steady state (resyncs every second); an endpoint change costs that member
// no more writes than the one without the policy; an exported label the
// export drops is removed, the policy's stay.
func TestAdmissionPolicyAddedKeys(t *testing.T) {
	set := cluster.Start(t, cluster.Names("east", "west", "north")...)
	east, west, north := set.Get("east"), set.Get("west"), set.Get("north")
	installTouchPolicies(t, west)
	ns := "adm"
	mkNamespace(t, ns, east, west, north)
	mkService(t, east, ns, "web", false, tcpPort("http", 80))
	putSlice(t, east, ns, "web", "web-1", ips(1, "10.81.0")...)
	mkExport(t, east, ns, "web", func(e *mcsv1beta1.ServiceExport) {
		e.Spec.ExportedLabels = map[string]string{"tier": "web"}
		e.Spec.ExportedAnnotations = map[string]string{"team": "a"}
	})
	a := startImporter(t, baseOptions(set.Kubeconfig, "east", "west", "north"))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		si, err := getImport(west, ns, "web")
		if assert.NoError(c, err) {
			assert.Equal(c, "yes", si.Labels["policy.example/touched"])
			assert.Equal(c, "web", si.Labels["tier"])
			assert.Equal(c, "added", si.Annotations["policy.example/note"])
		}
		sl, err := mirrored(west, ns, "web")
		if assert.NoError(c, err) && assert.Len(c, sl, 1) {
			assert.Equal(c, "yes", sl[0].Labels["policy.example/touched"])
		}
	}, waitFor, tick)

	before := a.quiesce(t, 3*time.Second)
	time.Sleep(4 * time.Second) // four resyncs
	steady := diff(before, a.writes(t))
	t.Logf("measured: %v writes in 4 s of resyncs after convergence", steady)
	assert.Empty(t, steady, "writes at steady state with the policy in west")

	before, conflictsBefore := a.writes(t), a.conflicts(t)
	putSlice(t, east, ns, "web", "web-1", ips(2, "10.81.0")...)
	waitEndpoints(t, []*cluster.Cluster{west, north}, ns, "web", map[string][]string{"east": {"10.81.0.1", "10.81.0.2"}})
	after := a.quiesce(t, 3*time.Second)
	sent, refused := diff(before, after), diff(conflictsBefore, a.conflicts(t))
	t.Logf("measured: writes after one endpoint change: %v; refused with a conflict: %v", sent, refused)
	// Writes that took, by cluster: a write refused with a conflict (the
	// importer's cache a step behind its own last write, under load) is
	// retried, and can land in any member.
	took := map[string]float64{}
	for k, v := range sent {
		cluster, _, _ := strings.Cut(k, "/")
		took[cluster] += v
	}
	for k, v := range refused {
		cluster, _, _ := strings.Cut(k, "/")
		took[cluster] -= v
	}
	t.Logf("measured: writes that took after one endpoint change, by cluster: %v", took)
	assert.Equal(t, 1.0, took["north"], "one slice changed in the member without the policy")
	assert.Equal(t, took["north"], took["west"], "the member with the policy paid more")

	// The export stops exporting "tier": removed from the import; the
	// policy's label and annotation stay.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		e, err := getExport(east, ns, "web")
		if err != nil {
			return err
		}
		e.Spec.ExportedLabels = nil
		_, err = east.MCS.MulticlusterV1beta1().ServiceExports(ns).Update(bg(), e, metav1.UpdateOptions{})
		return err
	}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		si, err := getImport(west, ns, "web")
		if assert.NoError(c, err) {
			assert.NotContains(c, si.Labels, "tier")
			assert.Equal(c, "yes", si.Labels["policy.example/touched"])
			assert.Equal(c, "added", si.Annotations["policy.example/note"])
			assert.Equal(c, "a", si.Annotations["team"])
		}
	}, waitFor, tick)
	before = a.quiesce(t, 3*time.Second)
	time.Sleep(3 * time.Second)
	assert.Empty(t, diff(before, a.writes(t)), "writes at steady state after the change")
}

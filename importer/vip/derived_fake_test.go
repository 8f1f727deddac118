package vip

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// Derived.Assign against a fake clientset whose cache is empty (behind the
// API server): the answers a real API server gives rarely, injected.

var servicesResource = schema.GroupResource{Resource: "services"}

func derivedImport() *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP,
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
}

// liveService is a Service named as web's derived one, with labels, VIP
// 10.96.0.10 and port.
func liveService(labels map[string]string, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: DerivedName("ns", "web"), UID: "svc-uid", Labels: labels},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: port}}},
	}
}

var ourLabels = map[string]string{mcsapi.LabelAppManagedBy: mcsapi.ManagedByImporter, mcsapi.LabelDerivedFor: "web"}

// derivedOver returns the provider over one member "east" whose API server
// holds objs and whose cache holds nothing.
func derivedOver(objs ...runtime.Object) (*Derived, *fake.Clientset) {
	kube := fake.NewClientset(objs...)
	m := &members.Member{ID: "east", Kube: kube, Importing: true}
	m.UseFixedCaches()
	return NewDerived(members.Static{m}), kube
}

func writes(f *k8stesting.Fake) []string {
	var out []string
	for _, a := range f.Actions() {
		if v := a.GetVerb(); v == "create" || v == "update" || v == "delete" {
			out = append(out, v)
		}
	}
	return out
}

func TestDerivedAssignInjectedFaults(t *testing.T) {
	t.Run("ours exists already: adopted, its VIP kept, its ports brought up to date", func(t *testing.T) {
		d, kube := derivedOver(liveService(ourLabels, 8080))
		a, err := d.Assign(t.Context(), "east", derivedImport())
		require.NoError(t, err)
		assert.Equal(t, []string{"10.96.0.10"}, a.IPs)
		assert.Equal(t, []string{"create", "update"}, writes(&kube.Fake), "one refused create, one update, no second create")
		got, err := kube.CoreV1().Services("ns").Get(t.Context(), DerivedName("ns", "web"), metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, int32(80), got.Spec.Ports[0].Port)
	})
	t.Run("someone else's Service has the name: yielded, never written", func(t *testing.T) {
		d, kube := derivedOver(liveService(map[string]string{"app": "theirs"}, 8080))
		a, err := d.Assign(t.Context(), "east", derivedImport())
		var no *members.NotOwnedError
		require.ErrorAs(t, err, &no)
		assert.Empty(t, a.IPs, "no address the import does not hold")
		assert.Equal(t, []string{"create"}, writes(&kube.Fake))
	})
	t.Run("a quota refuses the create: no VIP, the slices' label kept, the error returned", func(t *testing.T) {
		d, kube := derivedOver()
		quota := apierrors.NewForbidden(servicesResource, DerivedName("ns", "web"), errors.New("exceeded quota: count/services"))
		kube.PrependReactor("create", "services", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, quota })
		a, err := d.Assign(t.Context(), "east", derivedImport())
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.Empty(t, a.IPs)
		assert.Equal(t, DerivedName("ns", "web"), a.SliceLabels[mcsapi.LabelKubeServiceName])
	})
	t.Run("a webhook denies the update: the VIP the Service holds stays, the error returned", func(t *testing.T) {
		d, kube := derivedOver(liveService(ourLabels, 8080))
		denied := apierrors.NewForbidden(servicesResource, DerivedName("ns", "web"), errors.New("admission webhook denied the request"))
		kube.PrependReactor("update", "services", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, denied })
		a, err := d.Assign(t.Context(), "east", derivedImport())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "ports and session affinity")
		assert.Equal(t, []string{"10.96.0.10"}, a.IPs)
	})
	t.Run("a conflict on update: read again and written once more", func(t *testing.T) {
		d, kube := derivedOver(liveService(ourLabels, 8080))
		conflicts := 1
		kube.PrependReactor("update", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
			if conflicts > 0 {
				conflicts--
				return true, nil, apierrors.NewConflict(servicesResource, DerivedName("ns", "web"), errors.New("modified"))
			}
			return false, nil, nil
		})
		a, err := d.Assign(t.Context(), "east", derivedImport())
		require.NoError(t, err)
		assert.Equal(t, []string{"10.96.0.10"}, a.IPs)
		assert.Equal(t, []string{"create", "update", "update"}, writes(&kube.Fake))
	})
}

package members_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// TestHandlerFreedClusterSetIP: the events that may free a clusterset-CIDR
// address (an import that recorded one deleted, or no longer recording
// it) say so to the VIP provider (they carry the import before and after);
// the others do not.
func TestHandlerFreedClusterSetIP(t *testing.T) {
	imp := func(rv, vip string) *mcsv1beta1.ServiceImport {
		si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: rv}}
		if vip != "" {
			si.Annotations = map[string]string{mcsapi.AnnotationClusterSetIP: vip}
		}
		return si
	}
	var got []members.Event
	h := members.Handler(&members.Member{ID: "east"}, members.KindImport, func(ev members.Event) { got = append(got, ev) })
	freed := func(f func()) bool {
		got = nil
		f()
		if assert.Len(t, got, 1) {
			assert.Equal(t, "ns", got[0].Namespace)
			assert.Equal(t, "web", got[0].Name)
			return vip.FreedClusterSetIP(got[0])
		}
		return false
	}
	assert.False(t, freed(func() { h.OnAdd(imp("1", "10.250.0.1"), false) }), "add")
	assert.False(t, freed(func() { h.OnUpdate(imp("1", "10.250.0.1"), imp("2", "10.250.0.1")) }), "same VIP")
	assert.True(t, freed(func() { h.OnUpdate(imp("1", "10.250.0.1"), imp("2", "10.250.0.2")) }), "VIP moved")
	assert.True(t, freed(func() { h.OnUpdate(imp("1", "10.250.0.1"), imp("2", "")) }), "VIP dropped")
	assert.False(t, freed(func() { h.OnUpdate(imp("1", ""), imp("2", "10.250.0.1")) }), "VIP gained")
	assert.True(t, freed(func() { h.OnDelete(imp("1", "10.250.0.1")) }), "deleted")
	assert.True(t, freed(func() {
		h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: imp("1", "10.250.0.1")})
	}), "deleted, final state unknown")
	assert.False(t, freed(func() { h.OnDelete(imp("1", "")) }), "deleted without a VIP")

	// Other kinds never free one.
	got = nil
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web",
		Annotations: map[string]string{mcsapi.AnnotationClusterSetIP: "10.250.0.1"}}}
	members.Handler(&members.Member{ID: "east"}, members.KindService, func(ev members.Event) { got = append(got, ev) }).OnDelete(svc)
	if assert.Len(t, got, 1) {
		assert.False(t, vip.FreedClusterSetIP(got[0]))
	}
}

// An update of a slice tells its service once; a slice whose service label
// changed tells both the service it left and the one it joined. (Telling
// the service an update stays in twice made every one of the importer's
// own slice writes, coming back, queue its service once more as a change
// that is not an echo.)
func TestHandlerSliceUpdateTellsItsServices(t *testing.T) {
	for _, tc := range []struct {
		kind  members.Kind
		label string
	}{
		{members.KindSourceSlice, discoveryv1.LabelServiceName},
		{members.KindMirroredSlice, mcsapi.LabelServiceName},
	} {
		slice := func(rv, svc string) *discoveryv1.EndpointSlice {
			return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-abc", ResourceVersion: rv,
				Labels: map[string]string{tc.label: svc, mcsapi.LabelManagedBy: mcsapi.ManagedByImporter}}}
		}
		var got []string
		h := members.Handler(&members.Member{ID: "east"}, tc.kind, func(ev members.Event) { got = append(got, ev.Namespace+"/"+ev.Name) })
		h.OnUpdate(slice("1", "web"), slice("2", "web"))
		assert.Equal(t, []string{"ns/web"}, got, "kind %v: an update within one service", tc.kind)
		got = nil
		h.OnUpdate(slice("2", "web"), slice("3", "api"))
		assert.ElementsMatch(t, []string{"ns/web", "ns/api"}, got, "kind %v: the service label changed", tc.kind)
		got = nil
		h.OnUpdate(slice("3", "api"), slice("3", "api"))
		assert.Empty(t, got, "kind %v: a resync of the same version", tc.kind)
	}
}

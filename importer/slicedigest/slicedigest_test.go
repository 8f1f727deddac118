package slicedigest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func digestSlice(eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "s", Namespace: "ns", Annotations: map[string]string{"keep": "me"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80)}},
	}
}

func TestEndpointsDigestFollowsSemanticEquality(t *testing.T) {
	ready := discoveryv1.EndpointConditions{Ready: ptr.To(true)}
	a := discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, Conditions: ready}
	b := discoveryv1.Endpoint{Addresses: []string{"10.0.0.2"}, Conditions: ready}

	// Equal: nil and empty lists, empty and absent addresses.
	assert.Equal(t, Of(digestSlice()), Of(&discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{}}))
	assert.Equal(t,
		Of(digestSlice(discoveryv1.Endpoint{Addresses: []string{}})),
		Of(digestSlice(discoveryv1.Endpoint{})))
	assert.Equal(t, Of(digestSlice(a, b)), Of(digestSlice(a, b)))

	// Different: order, a condition, a field, an address.
	for name, other := range map[string]*discoveryv1.EndpointSlice{
		"order":     digestSlice(b, a),
		"condition": digestSlice(discoveryv1.Endpoint{Addresses: a.Addresses, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}}, b),
		"hostname":  digestSlice(discoveryv1.Endpoint{Addresses: a.Addresses, Conditions: ready, Hostname: ptr.To("h")}, b),
		"zone":      digestSlice(discoveryv1.Endpoint{Addresses: a.Addresses, Conditions: ready, Zone: ptr.To("z")}, b),
		"address":   digestSlice(discoveryv1.Endpoint{Addresses: []string{"10.0.0.3"}, Conditions: ready}, b),
		"fewer":     digestSlice(a),
		"none":      digestSlice(),
	} {
		assert.NotEqual(t, Of(digestSlice(a, b)), Of(other), name)
	}
}

func TestSlimAndForWrite(t *testing.T) {
	ready := discoveryv1.EndpointConditions{Ready: ptr.To(true)}
	full := digestSlice(discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, Conditions: ready})
	want := Of(full)

	slim := Slim(full)
	assert.Nil(t, slim.Endpoints, "a slim copy holds no endpoints")
	assert.Len(t, full.Endpoints, 1, "Slim leaves its argument alone")
	assert.NotContains(t, full.Annotations, Annotation, "Slim leaves its argument alone")
	assert.Equal(t, want, Of(slim), "the slim copy keeps the digest")
	assert.Same(t, slim, Slim(slim), "slimming twice is free")
	assert.Equal(t, Of(full), Of(slim))

	changed := full.DeepCopy()
	changed.Endpoints[0].Conditions.Ready = ptr.To(false)
	assert.NotEqual(t, Of(changed), Of(slim), "a slim copy of other endpoints is out of date")

	// Stamped desired slices keep their endpoints and compare by digest.
	stamped := full.DeepCopy()
	Stamp(stamped)
	assert.Equal(t, want, stamped.Annotations[Annotation])
	assert.Len(t, stamped.Endpoints, 1)
	assert.Equal(t, Of(stamped), Of(slim))

	// What is written never carries the digest, and keeps the rest.
	w := ForWrite(stamped)
	require.NotSame(t, stamped, w)
	assert.Equal(t, map[string]string{"keep": "me"}, w.Annotations)
	assert.Contains(t, stamped.Annotations, Annotation, "ForWrite leaves its argument alone")
	assert.Same(t, full, ForWrite(full), "nothing to take off: no copy")
	bare := digestSlice()
	bare.Annotations = nil
	Stamp(bare)
	assert.Nil(t, ForWrite(bare).Annotations)
}

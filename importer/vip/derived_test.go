package vip

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestDerivedPortNamesUnique: the name made for an unnamed port of a
// multi-port import never repeats another port's name (the API server
// rejects such a Service).
func TestDerivedPortNamesUnique(t *testing.T) {
	got := derivedPorts([]mcsv1beta1.ServicePort{{Name: "", Protocol: "TCP", Port: 80}, {Name: "tcp-80", Protocol: "TCP", Port: 81}})
	require.Len(t, got, 2)
	assert.Equal(t, "tcp-80-2", got[0].Name)
	assert.Equal(t, "tcp-80", got[1].Name)
	got = derivedPorts([]mcsv1beta1.ServicePort{{Name: "", Protocol: "UDP", Port: 53}, {Name: "metrics", Protocol: "TCP", Port: 9153}})
	assert.Equal(t, "udp-53", got[0].Name)
	got = derivedPorts([]mcsv1beta1.ServicePort{{Name: "", Protocol: "TCP", Port: 80}})
	assert.Equal(t, "", got[0].Name, "a lone port keeps no name")
}

// TestDerivedAffinity: the derived Service asks for the import's session
// affinity as the API server stores it (a ClientIP timeout defaulted, no
// config with None), and such a Service counts as up to date.
func TestDerivedAffinity(t *testing.T) {
	imp := &mcsv1beta1.ServiceImport{Spec: mcsv1beta1.ServiceImportSpec{SessionAffinity: corev1.ServiceAffinityClientIP}}
	want := derivedSpec(imp, "d")
	assert.Equal(t, corev1.ServiceAffinityClientIP, want.Spec.SessionAffinity)
	assert.Equal(t, int32(10800), *want.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds)

	imp.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
	want = derivedSpec(imp, "d")
	assert.Equal(t, int32(60), *want.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds)
	have := want.DeepCopy()
	assert.True(t, mutableSpecEqual(want, have))
	have.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = ptr.To[int32](61)
	assert.False(t, mutableSpecEqual(want, have))
	have.Spec.SessionAffinity, have.Spec.SessionAffinityConfig = corev1.ServiceAffinityNone, nil
	assert.False(t, mutableSpecEqual(want, have))

	none := derivedSpec(&mcsv1beta1.ServiceImport{}, "d")
	assert.Equal(t, corev1.ServiceAffinityNone, none.Spec.SessionAffinity)
	assert.Nil(t, none.Spec.SessionAffinityConfig)
	have = none.DeepCopy()
	have.Spec.SessionAffinity = "" // as a hand-made Service read back before defaulting
	assert.True(t, mutableSpecEqual(none, have))
}

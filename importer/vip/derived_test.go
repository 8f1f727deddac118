package vip

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

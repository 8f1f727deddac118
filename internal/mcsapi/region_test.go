package mcsapi

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A region is a label value (every mirrored slice carries it in one);
// its ClusterProperty's name an object name.
func TestValidateRegion(t *testing.T) {
	for _, r := range []string{"eu-west-1", "EU_West.1", "a", strings.Repeat("a", 63)} {
		assert.NoError(t, ValidateRegion(r), r)
	}
	for _, r := range []string{"", "eu west", "-eu", "eu/west", strings.Repeat("a", 64)} {
		assert.Error(t, ValidateRegion(r), r)
	}
	assert.NoError(t, ValidateRegionProperty(RegionProperty))
	assert.NoError(t, ValidateRegionProperty("region.example.com"))
	for _, n := range []string{"", "topology.kubernetes.io/region", "Region"} {
		assert.Error(t, ValidateRegionProperty(n), n)
	}
}

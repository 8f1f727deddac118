package mcsapi

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// One rule for every program: a DNS-1123 subdomain (an ID may span
// labels in DNS names) that fits in a label value (every mirrored slice
// carries it in one).
func TestValidateClusterID(t *testing.T) {
	for _, id := range []string{"east", "east-1", "cluster-1.eu-west.prod", "a", strings.Repeat("a", 63), strings.Repeat("a", 61) + ".b"} {
		assert.NoError(t, ValidateClusterID(id), id)
	}
	for _, id := range []string{"", "East", "east_1", "-east", "east-", "east..west", ".east",
		strings.Repeat("a", 64), strings.Repeat("a", 62) + ".b", "x." + strings.Repeat("a", 64)} {
		assert.Error(t, ValidateClusterID(id), id)
	}
}

package mcs

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLowerGCUntilSynced: the target is lowered while any controller is
// syncing and restored when the last one is done, each done counting
// once; an operator's GOGC is left alone.
func TestLowerGCUntilSynced(t *testing.T) {
	t.Setenv("GOGC", "") // restored after the test
	require.NoError(t, os.Unsetenv("GOGC"))
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	a := lowerGCUntilSynced()
	b := lowerGCUntilSynced()
	assert.Equal(t, syncGCPercent, gcPercent())
	a()
	a()
	assert.Equal(t, syncGCPercent, gcPercent(), "one controller still syncing")
	b()
	assert.Equal(t, 100, gcPercent())

	t.Setenv("GOGC", "200")
	debug.SetGCPercent(200)
	c := lowerGCUntilSynced()
	assert.Equal(t, 200, gcPercent(), "GOGC set by the operator")
	c()
	assert.Equal(t, 200, gcPercent())
}

func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

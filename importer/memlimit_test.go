package importer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcs-dns/mcs-dns/importer"
)

// TestApplyMemoryLimit: the soft memory limit is the ratio of the
// container's, unless the ratio is 0, GOMEMLIMIT is set or there is no
// limit. Not parallel: the limit is the process's.
func TestApplyMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var container uint64 = 512 << 20
	want := int64(0.9 * float64(container))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got, err := importer.ApplyMemoryLimit(ctx, 0.9, memlimit.Limit(container), log)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, want, debug.SetMemoryLimit(-1), "the runtime's limit")

	debug.SetMemoryLimit(math.MaxInt64)
	got, err = importer.ApplyMemoryLimit(ctx, 0, memlimit.Limit(container), log)
	require.NoError(t, err)
	assert.Equal(t, int64(math.MaxInt64), got, "ratio 0: off")
	assert.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1))

	got, err = importer.ApplyMemoryLimit(ctx, 0.9, func() (uint64, error) { return 0, memlimit.ErrNoLimit }, log)
	require.NoError(t, err)
	assert.Equal(t, int64(math.MaxInt64), got, "no container limit: none set")

	_, err = importer.ApplyMemoryLimit(ctx, 0.9, func() (uint64, error) { return 0, errors.New("no cgroup here") }, log)
	require.ErrorContains(t, err, "no cgroup here", "a limit that cannot be read is an error the caller logs")
	assert.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1), "and nothing is set")

	t.Setenv("GOMEMLIMIT", "100MiB")
	got, err = importer.ApplyMemoryLimit(ctx, 0.9, memlimit.Limit(container), log)
	require.NoError(t, err)
	assert.Equal(t, int64(math.MaxInt64), got, "GOMEMLIMIT set: it wins, nothing applied over it")
}

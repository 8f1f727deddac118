package main

import (
	"os"
	"path/filepath"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cold start's consecutive CPU profiles become one, holding every
// sample of each, and the pieces go.
func TestMergeProfiles(t *testing.T) {
	dir := t.TempDir()
	cpuOf := func(p *profile.Profile) (total int64) {
		for _, s := range p.Sample {
			total += s.Value[1]
		}
		return total
	}
	var paths []string
	var want int64
	for _, name := range []string{"a.pprof", "b.pprof"} {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		require.NoError(t, err)
		require.NoError(t, pprof.StartCPUProfile(f))
		for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); {
		}
		pprof.StopCPUProfile()
		require.NoError(t, f.Close())
		f, err = os.Open(path)
		require.NoError(t, err)
		p, err := profile.Parse(f)
		f.Close()
		require.NoError(t, err)
		want += cpuOf(p)
		paths = append(paths, path)
	}
	out := filepath.Join(dir, "merged.pprof")
	require.NoError(t, mergeProfiles(out, paths))
	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	merged, err := profile.Parse(f)
	require.NoError(t, err)
	assert.Equal(t, want, cpuOf(merged))
	for _, p := range paths {
		assert.NoFileExists(t, p)
	}
	assert.Error(t, mergeProfiles(out, nil), "nothing to merge")
}

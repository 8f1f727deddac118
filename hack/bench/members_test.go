package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
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

// The importer's part of the churn: the histogram's counts since before
// it, each quantile bounded by its bucket.
func TestHistogramQuantileBound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `# TYPE mcs_importer_propagation_seconds histogram
mcs_importer_propagation_seconds_bucket{source_cluster="a",le="0.01"} 50
mcs_importer_propagation_seconds_bucket{source_cluster="a",le="0.02"} 90
mcs_importer_propagation_seconds_bucket{source_cluster="a",le="+Inf"} 100
mcs_importer_propagation_seconds_sum{source_cluster="a"} 3
mcs_importer_propagation_seconds_count{source_cluster="a"} 100
mcs_importer_propagation_seconds_bucket{source_cluster="b",le="0.01"} 0
mcs_importer_propagation_seconds_bucket{source_cluster="b",le="0.02"} 0
mcs_importer_propagation_seconds_bucket{source_cluster="b",le="+Inf"} 0
mcs_importer_propagation_seconds_sum{source_cluster="b"} 0
mcs_importer_propagation_seconds_count{source_cluster="b"} 0
`)
	}))
	defer srv.Close()
	h, err := importerHistogram(context.Background(), srv.URL, "mcs_importer_propagation_seconds")
	require.NoError(t, err)
	assert.Equal(t, 100.0, h.total)
	assert.Equal(t, 0.01, h.quantileBound(0.5))
	assert.Equal(t, 0.02, h.quantileBound(0.9))
	assert.Equal(t, -1.0, h.quantileBound(0.99), "past the last bound")

	before := histogram{upper: h.upper, count: []float64{50, 50, 50}, total: 50}
	d := h.since(before)
	assert.Equal(t, 50.0, d.total)
	assert.Equal(t, 0.02, d.quantileBound(0.5), "of the 50 since, 40 took 10-20 ms")
	assert.Equal(t, 0.0, histogram{}.quantileBound(0.5), "nothing counted")
	_, err = importerHistogram(context.Background(), srv.URL, "absent")
	assert.Error(t, err)
}

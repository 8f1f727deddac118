package controller

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPropagation: a change is timed from its first event to the last
// write of the reconcile that carried it, per source and per member; a
// failed reconcile keeps it for the retry; a reconcile that writes
// nothing observes nothing; a change seen during a reconcile waits for
// the next one.
func TestPropagation(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := newPropagation(reg)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	read := func(h *prometheus.HistogramVec, label string) *dto.Histogram {
		var m dto.Metric
		require.NoError(t, h.WithLabelValues(label).(prometheus.Metric).Write(&m))
		return m.GetHistogram()
	}
	count := func(h *prometheus.HistogramVec, label string) uint64 { return read(h, label).GetSampleCount() }
	sum := func(h *prometheus.HistogramVec, label string) float64 { return read(h, label).GetSampleSum() }

	p.wrote("ns/a", "east", at(1)) // no change waiting: not recorded
	assert.Empty(t, p.writes)

	p.changed("ns/a", "east", at(0))
	p.changed("ns/a", "east", at(5)) // the first one counts
	carried := p.started("ns/a")
	p.wrote("ns/a", "west", at(20))
	p.finished("ns/a", carried, false) // failed: kept
	require.Contains(t, p.seen, "ns/a")

	carried = p.started("ns/a")
	p.wrote("ns/a", "west", at(40))
	p.wrote("ns/a", "north", at(60))
	p.changed("ns/a", "north", at(50)) // during the reconcile
	p.finished("ns/a", carried, true)
	assert.Equal(t, uint64(1), count(p.source, "east"))
	assert.InDelta(t, 0.060, sum(p.source, "east"), 1e-9, "to the last write, retries included")
	assert.InDelta(t, 0.040, sum(p.member, "west"), 1e-9)
	assert.InDelta(t, 0.060, sum(p.member, "north"), 1e-9)
	assert.Equal(t, map[string]time.Time{"north": at(50)}, p.seen["ns/a"], "seen during the reconcile: left for the next")

	carried = p.started("ns/a")
	p.finished("ns/a", carried, true) // nothing written
	assert.Equal(t, 0.0, sum(p.source, "north"))
	assert.Empty(t, p.seen)
	assert.Empty(t, p.writes)
}

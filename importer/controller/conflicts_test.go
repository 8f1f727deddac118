package controller

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mcs-dns/mcs-dns/importer/members"
)

// Every write sent is counted; only a 409 (Conflict, AlreadyExists)
// counts as refused: success, a missing object and other failures do not.
func TestWroteCountsConflicts(t *testing.T) {
	zero := func() float64 { return 0 }
	c := &Controller{metrics: newMetrics(prometheus.NewRegistry(), zero, zero, zero), log: slog.New(slog.DiscardHandler)}
	m := &members.Member{ID: "east"}
	gr := schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}
	c.wrote(m, kindSlice, "update", "a", "web", "web-1", nil)
	c.wrote(m, kindSlice, "update", "a", "web", "web-1", apierrors.NewNotFound(gr, "web-1"))
	c.wrote(m, kindSlice, "update", "a", "web", "web-1", errors.New("connection refused"))
	c.wrote(m, kindSlice, "update", "a", "web", "web-1", apierrors.NewConflict(gr, "web-1", errors.New("the object has been modified")))
	c.wrote(m, kindImport, "update", "a", "web", "web", apierrors.NewConflict(gr, "web", errors.New("the object has been modified")))
	assert.Equal(t, 4.0, testutil.ToFloat64(c.metrics.Writes.WithLabelValues("east", kindSlice, "update")))
	assert.Equal(t, 1.0, testutil.ToFloat64(c.metrics.WriteConflicts.WithLabelValues("east", kindSlice)))
	c.wrote(m, kindImport, "create", "a", "web", "web", apierrors.NewAlreadyExists(gr, "web"))
	assert.Equal(t, 2.0, testutil.ToFloat64(c.metrics.WriteConflicts.WithLabelValues("east", kindImport)), "an update conflict and a create of what exists")
	assert.Equal(t, 0.0, testutil.ToFloat64(c.metrics.WriteConflicts.WithLabelValues("east", kindExportStatus)))
}

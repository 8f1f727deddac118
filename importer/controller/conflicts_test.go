package controller

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mcs-dns/mcs-dns/importer/members"
)

// Only a 409 Conflict counts as a refused write: success, a missing object
// and other failures do not.
func TestRefusedWriteCountsConflictsOnly(t *testing.T) {
	zero := func() float64 { return 0 }
	c := &Controller{metrics: newMetrics(prometheus.NewRegistry(), zero, zero, zero)}
	m := &members.Member{ID: "east"}
	gr := schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}
	c.refusedWrite(m, kindSlice, nil)
	c.refusedWrite(m, kindSlice, apierrors.NewNotFound(gr, "web-1"))
	c.refusedWrite(m, kindSlice, errors.New("connection refused"))
	c.refusedWrite(m, kindSlice, apierrors.NewConflict(gr, "web-1", errors.New("the object has been modified")))
	c.refusedWrite(m, kindImport, apierrors.NewConflict(gr, "web", errors.New("the object has been modified")))
	assert.Equal(t, 1.0, testutil.ToFloat64(c.metrics.WriteConflicts.WithLabelValues("east", kindSlice)))
	assert.Equal(t, 1.0, testutil.ToFloat64(c.metrics.WriteConflicts.WithLabelValues("east", kindImport)))
	assert.Equal(t, 0.0, testutil.ToFloat64(c.metrics.WriteConflicts.WithLabelValues("east", kindExportStatus)))
}

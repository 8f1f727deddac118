package controller

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the importer's Prometheus metrics (namespace mcs_importer).
type Metrics struct {
	// Reconciles counts reconciles of one key, by result (success, error,
	// unfinished: a member's part ran out of time and goes on in the next pass).
	Reconciles *prometheus.CounterVec
	// ReconcileSeconds is the duration of one key's reconcile.
	ReconcileSeconds prometheus.Histogram
	// Writes counts write requests sent to member APIs, by cluster, kind
	// (ServiceImport, ServiceImportStatus, EndpointSlice,
	// ServiceExportStatus) and verb (create, update, delete). In a steady
	// state it does not move.
	Writes *prometheus.CounterVec
	// WriteConflicts counts the writes counted in Writes that the API
	// server refused with 409, by cluster and kind: an update of an
	// object that had changed since it was read (Conflict), or a create of
	// one that exists (AlreadyExists); most often this importer's own last
	// write, not yet in its cache. Each is retried on the object read
	// again, so Writes minus WriteConflicts is the writes that took.
	WriteConflicts *prometheus.CounterVec
	// Errors counts failed operations, by cluster and operation.
	Errors *prometheus.CounterVec
	// MemberState is 1 for each member's current state (up, unreachable,
	// down, unknown), 0 for the others, by cluster ID (the kubeconfig
	// context of a member not joined yet) and context.
	MemberState *prometheus.GaugeVec
	// Withdrawals counts members withdrawn after the grace period.
	Withdrawals *prometheus.CounterVec
	// Ignored counts what is left out, by cluster, kind and reason, each
	// source slice version once: EndpointSlices of exported Services whose
	// manager is not trusted (--endpointslice-managers), and endpoint
	// addresses outside the export policy's ranges.
	Ignored *prometheus.CounterVec
	// SlicePlans counts the plans of one key's mirrored slices in one
	// member, by mode: full (every slice compared with the member's
	// copy) or changes (only the slices whose wanted content changed
	// since the previous pass, the member holding that pass's slices).
	SlicePlans *prometheus.CounterVec
	// Leader is 1 while this process does the work (it holds the leader
	// Lease, or runs without leader election), 0 while it stands by.
	Leader prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, queueDepth, statusesOwed, conflicts func() float64) *Metrics {
	m := &Metrics{
		Reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mcs_importer", Name: "reconciles_total",
			Help: "Reconciles of one exported namespace/name, by result.",
		}, []string{"result"}),
		ReconcileSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "mcs_importer", Name: "reconcile_duration_seconds",
			Help:    "Duration of one reconcile.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mcs_importer", Name: "writes_total",
			Help: "Write requests sent to member cluster APIs, by cluster, kind (ServiceImport, ServiceImportStatus, EndpointSlice, ServiceExportStatus, Service) and verb. Flat in a steady state.",
		}, []string{"cluster", "kind", "verb"}),
		WriteConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mcs_importer", Name: "write_conflicts_total",
			Help: "Writes counted in mcs_importer_writes_total that the API server refused with 409: an update of an object changed since it was read (Conflict), or a create of one that exists (AlreadyExists); each is retried on the object read again. By cluster and kind.",
		}, []string{"cluster", "kind"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mcs_importer", Name: "errors_total",
			Help: "Failed operations, by cluster and operation.",
		}, []string{"cluster", "operation"}),
		MemberState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "mcs_importer", Name: "member_state",
			Help: "1 for the current state (up, unreachable, down, unknown) of each member cluster, 0 for the others; cluster is the cluster ID (the kubeconfig context of a member not joined yet), context the member's kubeconfig context.",
		}, []string{"cluster", "context", "state"}),
		Withdrawals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mcs_importer", Name: "member_withdrawals_total",
			Help: "Member clusters withdrawn (their exports no longer imported) after the grace period, by cluster.",
		}, []string{"cluster"}),
		Ignored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mcs_importer", Name: "ignored_objects_total",
			Help: "Objects of member clusters left out, by cluster, kind and reason, each source slice version once: EndpointSlices of exported Services without a manager (no_manager) or with one --endpointslice-managers does not list (untrusted_manager); endpoint addresses outside the export policy's addressRanges (kind Endpoint, address_not_allowed).",
		}, []string{"cluster", "kind", "reason"}),
		SlicePlans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mcs_importer", Name: "slice_plans_total",
			Help: "Plans of one import's mirrored slices in one member, by mode: full (every slice compared with the member's copy; after a change nothing else explains, a failed pass, a new cache, and at each resync) or changes (only the slices whose content changed since the pass the member is known to hold).",
		}, []string{"mode"}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "mcs_importer", Name: "leader",
			Help: "1 while this process does the work (holds the leader Lease, or runs without leader election), 0 while it stands by.",
		}),
	}
	reg.MustRegister(m.Reconciles, m.ReconcileSeconds, m.Writes, m.WriteConflicts, m.Errors, m.MemberState, m.Withdrawals, m.Ignored, m.SlicePlans, m.Leader,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "mcs_importer", Name: "queue_depth",
			Help: "Passes (serve and full) ready to run in the work queue.",
		}, queueDepth),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "mcs_importer", Name: "statuses_owed",
			Help: "Keys whose serve pass wrote their answers and whose full pass (statuses) has not run since.",
		}, statusesOwed),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "mcs_importer", Name: "conflicts",
			Help: "Exported namespace/names whose exports conflict (a Conflict condition is True on them), as of their last reconcile.",
		}, conflicts))
	return m
}

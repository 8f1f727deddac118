package mcs

import (
	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics of the plugin. No label grows with services, pods or IPs.
var (
	importsServed = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "mcs",
		Name:      "imports",
		Help:      "ServiceImports with answers, by type (ClusterSetIP, Headless).",
	}, []string{"type"})

	endpointsServed = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "mcs",
		Name:      "endpoints",
		Help:      "Ready endpoints of headless ServiceImports with answers.",
	})

	rejectedObjects = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "mcs",
		Name:      "rejected_objects_total",
		Help:      "Malformed objects skipped, by kind (serviceimport, endpointslice, endpoint).",
	}, []string{"kind"})

	ignoredObjects = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "mcs",
		Name:      "ignored_objects_total",
		Help:      "EndpointSlices not served because their endpointslice.kubernetes.io/managed-by is not trusted (endpointslice_managers), by reason (no_manager, kubernetes_endpointslice_controller, untrusted_manager, untrusted_source_manager).",
	}, []string{"reason"})

	programmingLatency = promauto.NewHistogram(prometheus.HistogramOpts{
		Namespace:                   plugin.Namespace,
		Subsystem:                   "mcs",
		Name:                        "programming_duration_seconds",
		Help:                        "Time from a watch event arriving to its answers being served.",
		Buckets:                     prometheus.ExponentialBuckets(0.0001, 2, 18), // 100µs .. 13s
		NativeHistogramBucketFactor: plugin.NativeHistogramBucketFactor,
	})

	_ = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "mcs",
		Name:      "last_sync_age_seconds",
		Help:      "How long the answers have been served without the API server: 0 while it answers, else the seconds since it last did (the largest over the plugin's connections).",
	}, lastSyncAge)

	lists = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "mcs",
		Name:      "lists_total",
		Help:      "Reads of a resource's whole state from the API server (a list, or a watch that starts with the state), by resource: one at start, one more each time a watch expired (410 Gone) or failed.",
	}, []string{"resource"})

	watchErrors = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "mcs",
		Name:      "watch_errors_total",
		Help:      "Errors listing or watching the API server, by resource.",
	}, []string{"resource"})
)

// Rejected-object kinds.
const (
	kindServiceImport = "serviceimport"
	kindEndpointSlice = "endpointslice"
	kindEndpoint      = "endpoint"
	kindImportEntry   = "serviceimport-entry" // one ips or ports entry
)

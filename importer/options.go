package importer

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// Options are mcs-importer's settings; ParseFlags fills them from the
// command line.
type Options struct {
	// Kubeconfig is the kubeconfig file ("" = the usual loading rules:
	// $KUBECONFIG, then ~/.kube/config).
	Kubeconfig string
	// Contexts are the kubeconfig contexts of the member clusters.
	Contexts []string
	// ImportInto lists the contexts to write imports into; empty = all.
	ImportInto []string
	// ExportConditionsIn lists the contexts whose ServiceExports get
	// their conditions from this importer; empty = the ImportInto ones
	// (every member when that is empty too): with one importer per
	// cluster each export has one writer.
	ExportConditionsIn []string
	// MetricsAddr serves /healthz, /readyz and /metrics ("" = off).
	MetricsAddr string
	// Profiling also serves Go's /debug/pprof/ on MetricsAddr.
	Profiling bool
	// MemoryLimitRatio is the fraction of the process's container memory
	// limit (its cgroup's) the Go runtime's soft memory limit is set to
	// (0: none is set); see ApplyMemoryLimit.
	MemoryLimitRatio float64
	// EndpointGracePeriod is how long an unreachable member's last known
	// endpoints stay served.
	EndpointGracePeriod time.Duration
	// Resync is the period of full resyncs (0 = none).
	Resync time.Duration
	// Workers is the number of reconcile workers.
	Workers int
	// QPS and Burst set a client-side limit on each member client's
	// requests. QPS 0 (the default) means none against an API server with
	// API Priority and Fairness, which queues the importer's requests as
	// it does any client's, and 100/s (burst 200) against one without.
	// Burst 0 with a QPS means twice the QPS.
	QPS   float32
	Burst int
	// ProbeInterval is how often each member's API is probed.
	ProbeInterval time.Duration
	// AccessCheckInterval is how often a probe also checks the importer's
	// access to each member in full.
	AccessCheckInterval time.Duration
	// CacheSyncTimeout bounds the wait for a member's caches to sync.
	CacheSyncTimeout time.Duration
	// ConnectTimeout bounds one attempt to join a member (cluster ID and
	// API discovery); attempts are retried with back-off.
	ConnectTimeout time.Duration
	// RegionProperty is the ClusterProperty each member's region is read
	// from (mcsapi.RegionProperty by default).
	RegionProperty string
	// LogFormat is "text" or "json"; Verbosity 0 logs info and up, 1 and
	// more also debug.
	LogFormat string
	Verbosity int

	// VIPMode is how ClusterSetIP imports get VIPs: "derived-service" (a
	// per-cluster derived Service), "clusterset-cidr" (one VIP clusterset-
	// wide from ClusterSetCIDRs for exports that opt in, a derived
	// Service's for the others) or "none".
	VIPMode string
	// ClusterSetCIDRs are the ranges clusterset-wide VIPs come from (at
	// most one IPv4 and one IPv6).
	ClusterSetCIDRs []string
	// ClusterSetIPDefault opts every export into a clusterset-wide VIP
	// unless its mcs-dns.io/use-clusterset-ip annotation says "false".
	ClusterSetIPDefault bool
	// ExportPolicy is the export policy file (policy.File; "": the
	// default rules), read again when it changes.
	ExportPolicy string
	// EndpointSliceManagers are the endpointslice.kubernetes.io/managed-by
	// values of the source EndpointSlices mirrored; the others are ignored
	// and counted (nil: controller.DefaultTrustedManagers).
	EndpointSliceManagers []string

	// LeaderElect makes this importer one of several replicas, of which
	// only the holder of a Lease works.
	LeaderElect bool
	// The Lease lives in the cluster of LeaderElectKubeconfig (default
	// Kubeconfig) and LeaderElectContext (default: that file's current
	// context) when either is set; else, in a pod, in the cluster the pod
	// runs in; else in the first of Contexts. LeaderElectNamespace/Name
	// name it.
	LeaderElectKubeconfig string
	LeaderElectContext    string
	LeaderElectNamespace  string
	LeaderElectName       string
	// LeaseDuration, RenewDeadline and RetryPeriod tune the election.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// MemberRecord names the ConfigMap ("namespace/name") that keeps the
	// members' states for the next process or leader term, in the
	// cluster the Lease lives in: "" is LeaderElectNamespace/
	// LeaderElectName-members with LeaderElect and none without; "none"
	// keeps nothing (every hold then starts with the process).
	MemberRecord string
	// MaxDisruption bounds how long a disruption (most members unreachable
	// at once) stops withdrawals (0: no bound).
	MaxDisruption time.Duration

	// Log, if set, is used instead of a logger built from LogFormat.
	Log *slog.Logger
	// Registry, if set, receives the metrics (a new one otherwise).
	Registry *prometheus.Registry
	// VIP assigns ClusterSetIP VIPs (vip.None when nil).
	VIP vip.Provider
	// OnReady, if set, is called once every member has been tried once
	// (joined with its caches synced, or found unusable and reported),
	// with the address the health/metrics server listens on ("" if off).
	OnReady func(metricsAddr string)
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{
		MetricsAddr:          ":8080",
		EndpointGracePeriod:  2 * time.Minute,
		Resync:               10 * time.Minute,
		Workers:              16,
		ProbeInterval:        5 * time.Second,
		AccessCheckInterval:  members.DefaultAccessCheckInterval,
		CacheSyncTimeout:     2 * time.Minute,
		ConnectTimeout:       30 * time.Second,
		RegionProperty:       mcsapi.RegionProperty,
		LogFormat:            "text",
		VIPMode:              VIPModeDerived,
		LeaderElectNamespace: "kube-system",
		LeaderElectName:      "mcs-importer",
		LeaseDuration:        15 * time.Second,
		RenewDeadline:        10 * time.Second,
		RetryPeriod:          2 * time.Second,
		MaxDisruption:        time.Hour,
		MemoryLimitRatio:     0.9,
	}
}

// The VIP models (--vip-mode).
const (
	VIPModeDerived = vip.ModeDerived
	VIPModeCIDR    = vip.ModeCIDR
	VIPModeNone    = vip.ModeNone
)

type listFlag struct{ dst *[]string }

func (l listFlag) String() string {
	if l.dst == nil {
		return ""
	}
	return strings.Join(*l.dst, ",")
}

func (l listFlag) Set(s string) error {
	*l.dst = nil
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l.dst = append(*l.dst, p)
		}
	}
	return nil
}

// ParseFlags parses mcs-importer's command line. Usage and errors go to
// output. It returns flag.ErrHelp for -h/--help.
func ParseFlags(args []string, output io.Writer) (Options, error) {
	o := DefaultOptions()
	fs := flag.NewFlagSet("mcs-importer", flag.ContinueOnError)
	// Errors are returned, not printed; only --help prints the usage.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	usage := func() {
		fs.SetOutput(output)
		fmt.Fprint(output, `Usage: mcs-importer --contexts east,west,north [flags]

mcs-importer implements the Multi-Cluster Services API (mcs-api v0.5.2) for a
clusterset: it reads the ServiceExports, Services and EndpointSlices of every
member cluster and writes ServiceImports and mirrored EndpointSlices into the
importing clusters. One kubeconfig, one context per member cluster. A
cluster's ID is its About API ClusterProperty cluster.clusterset.k8s.io if
present, else its context name. Cluster IDs must be DNS-1123 subdomains and
distinct. A member that cannot be reached or used (at start-up or later) is
reported and retried; the others keep importing. SIGTERM or SIGINT stops it
cleanly.

Flags (one or two leading dashes):
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig `file` holding one context per member cluster (default: $KUBECONFIG, then ~/.kube/config)")
	fs.Var(listFlag{&o.Contexts}, "contexts", "comma-separated kubeconfig `contexts`, one per member cluster (required)")
	fs.Var(listFlag{&o.ImportInto}, "import-into", "comma-separated `contexts` to write ServiceImports and EndpointSlices into (default: every member); e.g. one importer per cluster, each reading all members")
	fs.Var(listFlag{&o.ExportConditionsIn}, "export-conditions-in", "comma-separated `contexts` whose ServiceExports this importer writes conditions on (default: the --import-into contexts, or every member); set it when some members run no importer of their own")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", o.MetricsAddr, "`address` serving /healthz, /readyz and Prometheus /metrics (empty: off)")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "also serve Go's /debug/pprof/ profiles on --metrics-addr (off by default: anyone who reaches the address may profile the process)")
	fs.Float64Var(&o.MemoryLimitRatio, "auto-gomemlimit-ratio", o.MemoryLimitRatio, "set the Go runtime's soft memory limit (GOMEMLIMIT) to this fraction of the container's memory limit (its cgroup's), followed when the limit is resized, so that the garbage collector works harder near the limit instead of the process being killed for memory (a cold start over many members makes garbage faster than the live heap grows); 0: off; a GOMEMLIMIT environment variable wins")
	fs.DurationVar(&o.EndpointGracePeriod, "endpoint-grace-period", o.EndpointGracePeriod, "how long the last known endpoints of a member that cannot be used (unreachable, credentials or RBAC refused, CRDs gone) stay served before they are withdrawn; also how long after start-up what may have come from a member not reached yet is left untouched")
	fs.DurationVar(&o.Resync, "resync", o.Resync, "period of full resyncs: a full pass of every service, behind any change, which compares desired with actual state and writes only differences (0: none)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "number of reconcile workers")
	fs.Func("kube-api-qps", "client-side `rate` limit, in requests per second, to each member cluster's API (default 0: none where the API server has API Priority and Fairness, which queues the importer's requests like any client's; 100/s, burst 200, where it has not)", func(v string) error {
		f, err := strconv.ParseFloat(v, 32)
		o.QPS = float32(f)
		return err
	})
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "burst of the client-side limit (default: twice --kube-api-qps)")
	fs.DurationVar(&o.ProbeInterval, "health-probe-interval", o.ProbeInterval, "how often each member cluster is probed (a one-item list of its ServiceExports, and the full access check every --health-access-check-interval) to notice it, its credentials or its CRDs going away and coming back")
	fs.DurationVar(&o.AccessCheckInterval, "health-access-check-interval", o.AccessCheckInterval, "how often a probe also checks the importer's access to each member cluster in full (one-item lists of every resource it reads, and every call it makes matched against one SelfSubjectRulesReview, or asked in a SelfSubjectAccessReview each where the authorizer cannot list its rules); a write refused with 403 or a cache's list or watch refused has it checked at the next probe")
	fs.DurationVar(&o.CacheSyncTimeout, "cache-sync-timeout", o.CacheSyncTimeout, "how long to wait for a member cluster's informer caches to sync")
	fs.StringVar(&o.RegionProperty, "region-property", o.RegionProperty, "`name` of the About API ClusterProperty holding each member cluster's region, read when the member joins; every EndpointSlice mirrored from a member with one carries it in the mcs-dns.io/source-region label (a member without the property has no region)")
	fs.DurationVar(&o.ConnectTimeout, "connect-timeout", o.ConnectTimeout, "how long one attempt to join a member cluster (cluster ID and API discovery) may take; failed attempts are retried with back-off")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "log `format`: text or json (structured logs on stderr)")
	fs.IntVar(&o.Verbosity, "v", o.Verbosity, "log `level`: 0 logs info and above, 1 or more adds debug (every write)")
	fs.StringVar(&o.VIPMode, "vip-mode", o.VIPMode, "how ClusterSetIP imports get their VIP: derived-service (a derived ClusterIP Service per importing cluster; kube-proxy routes it), clusterset-cidr (one VIP clusterset-wide from --clusterset-cidr for exports that opt in, a derived Service's for the others), or none")
	fs.Var(listFlag{&o.ClusterSetCIDRs}, "clusterset-cidr", "comma-separated `CIDRs` (at most one IPv4 and one IPv6) clusterset-wide VIPs come from (--vip-mode=clusterset-cidr)")
	fs.BoolVar(&o.ClusterSetIPDefault, "clusterset-ip-default", o.ClusterSetIPDefault, "with --vip-mode=clusterset-cidr: give every export a clusterset-wide VIP unless its annotation mcs-dns.io/use-clusterset-ip is \"false\" (otherwise only exports annotated \"true\" get one)")
	fs.StringVar(&o.ExportPolicy, "export-policy", o.ExportPolicy, "export policy `file` (kind ExportPolicy, apiVersion mcs-dns.io/v1alpha1): per source cluster ID, the namespaces it may export from, the endpoints one export may carry, the address ranges of its endpoints; read again every 2s, so a change to the file applies without a restart (a ConfigMap mounted as a volume, without subPath, works, but the kubelet updates the file only at its periodic sync, a minute or two after the ConfigMap changes), a policy that does not parse is refused and the last good one stays (default: every namespace but kube-system, kube-public and kube-node-lease, any number of endpoints, any address)")
	fs.Var(listFlag{&o.EndpointSliceManagers}, "endpointslice-managers", "comma-separated endpointslice.kubernetes.io/managed-by `values` whose EndpointSlices of exported Services are mirrored; any other slice (no manager, or another) is ignored and counted in mcs_importer_ignored_objects_total (default: endpointslice-controller.k8s.io, the Kubernetes endpointslice controller; endpointslice-mirroring-controller.k8s.io copies Endpoints objects, so listing it trusts anyone who may write Endpoints)")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "run as one of several replicas: only the holder of a Lease works; the others take over when it goes away (while the Lease's cluster is unreachable no replica works)")
	fs.StringVar(&o.LeaderElectKubeconfig, "leader-elect-kubeconfig", o.LeaderElectKubeconfig, "kubeconfig `file` of the cluster holding the leader Lease (default: --kubeconfig); see --leader-elect-context")
	fs.StringVar(&o.LeaderElectContext, "leader-elect-context", o.LeaderElectContext, "kubeconfig `context` of the cluster holding the leader Lease (default: when neither this nor --leader-elect-kubeconfig is set, the cluster the importer's pod runs in, or outside a pod the first of --contexts; with only --leader-elect-kubeconfig, its current context)")
	fs.StringVar(&o.LeaderElectNamespace, "leader-elect-namespace", o.LeaderElectNamespace, "`namespace` of the leader Lease")
	fs.StringVar(&o.LeaderElectName, "leader-elect-name", o.LeaderElectName, "`name` of the leader Lease")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "how long a leader's Lease lasts without renewal: a standby takes over about this long (plus up to two retry periods) after the leader stops renewing")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "how long the leader keeps trying to renew before it gives up leading")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "how often candidates try to acquire or renew the Lease")
	fs.StringVar(&o.MemberRecord, "member-record", o.MemberRecord, "`namespace/name` of the ConfigMap, in the cluster holding the leader Lease, that keeps each member's state (unreachable since, withdrawn, cluster ID) and a disruption's start for the next process or leader term, so that grace periods and --max-disruption run from when a member went away, not from a restart (default: <leader-elect-namespace>/<leader-elect-name>-members with --leader-elect, none without; \"none\": keep nothing)")
	fs.DurationVar(&o.MaxDisruption, "max-disruption", o.MaxDisruption, "how long a disruption (more than half the members unreachable at once: nothing is withdrawn) may stop withdrawals; after it, grace periods run again and members away longer are withdrawn (0: no bound)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
		}
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return o, o.Validate()
}

// vipConfig is what the VIP flags say.
func (o *Options) vipConfig() vip.Config {
	return vip.Config{Mode: o.VIPMode, CIDRs: o.ClusterSetCIDRs, ClusterSetIPDefault: o.ClusterSetIPDefault}
}

// Validate checks the options that need no cluster.
func (o *Options) Validate() error {
	var errs []error
	if len(o.Contexts) == 0 {
		errs = append(errs, errors.New("--contexts is required: list the kubeconfig context of every member cluster"))
	}
	seen := map[string]bool{}
	for _, c := range o.Contexts {
		if seen[c] {
			errs = append(errs, fmt.Errorf("--contexts lists %q twice", c))
		}
		seen[c] = true
	}
	for _, c := range o.ImportInto {
		if !seen[c] {
			errs = append(errs, fmt.Errorf("--import-into %q is not one of --contexts", c))
		}
	}
	for _, c := range o.ExportConditionsIn {
		if !seen[c] {
			errs = append(errs, fmt.Errorf("--export-conditions-in %q is not one of --contexts", c))
		}
	}
	if o.EndpointGracePeriod < 0 {
		errs = append(errs, errors.New("--endpoint-grace-period must not be negative"))
	}
	for _, m := range o.EndpointSliceManagers {
		if m == mcsapi.ManagedByImporter {
			errs = append(errs, fmt.Errorf("--endpointslice-managers must not list %s: the importer never mirrors its own copies", m))
		} else if msgs := validation.IsValidLabelValue(m); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--endpointslice-managers: %q is not a label value: %s", m, strings.Join(msgs, "; ")))
		}
	}
	if math.IsNaN(o.MemoryLimitRatio) || o.MemoryLimitRatio < 0 || o.MemoryLimitRatio > 1 {
		errs = append(errs, fmt.Errorf("--auto-gomemlimit-ratio must be between 0 (off) and 1, not %v", o.MemoryLimitRatio))
	}
	if o.Resync < 0 {
		errs = append(errs, errors.New("--resync must not be negative"))
	}
	if o.Workers < 1 {
		errs = append(errs, errors.New("--workers must be at least 1"))
	}
	switch {
	case o.QPS < 0 || o.Burst < 0:
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must not be negative"))
	case o.QPS == 0 && o.Burst > 0:
		errs = append(errs, errors.New("--kube-api-burst needs --kube-api-qps"))
	case o.QPS > 0 && o.Burst == 0:
		o.Burst = max(1, int(2*o.QPS))
	}
	if o.AccessCheckInterval <= 0 {
		errs = append(errs, errors.New("--health-access-check-interval must be positive"))
	}
	if o.ProbeInterval <= 0 {
		errs = append(errs, errors.New("--health-probe-interval must be positive"))
	}
	if o.RegionProperty == "" {
		o.RegionProperty = mcsapi.RegionProperty
	} else if err := mcsapi.ValidateRegionProperty(o.RegionProperty); err != nil {
		errs = append(errs, fmt.Errorf("--region-property: %w", err))
	}
	if o.CacheSyncTimeout <= 0 || o.ConnectTimeout <= 0 {
		errs = append(errs, errors.New("--cache-sync-timeout and --connect-timeout must be positive"))
	}
	errs = append(errs, o.vipConfig().Validate()...)
	if o.LeaderElect {
		if o.LeaderElectNamespace == "" || o.LeaderElectName == "" {
			errs = append(errs, errors.New("--leader-elect-namespace and --leader-elect-name must not be empty"))
		}
		// client-go's own checks (it retries with up to 1.2x jitter), made
		// here so that a bad setting fails before any member is contacted.
		if o.RetryPeriod <= 0 || float64(o.RenewDeadline) <= 1.2*float64(o.RetryPeriod) || o.LeaseDuration <= o.RenewDeadline {
			errs = append(errs, errors.New("leader election needs 0 < 1.2 x --leader-elect-retry-period < --leader-elect-renew-deadline < --leader-elect-lease-duration"))
		}
	}
	if o.MaxDisruption < 0 {
		errs = append(errs, errors.New("--max-disruption must not be negative"))
	}
	if o.MemberRecord != "" && o.MemberRecord != "none" {
		ns, name, ok := strings.Cut(o.MemberRecord, "/")
		if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
			errs = append(errs, fmt.Errorf("--member-record must be none or namespace/name of a ConfigMap, not %q", o.MemberRecord))
		}
	}
	if o.LogFormat != "text" && o.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format must be text or json, not %q", o.LogFormat))
	}
	return errors.Join(errs...)
}

// NewLogger builds the logger the options describe.
func NewLogger(o Options, w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	if o.Verbosity > 0 {
		level = slog.LevelDebug
	}
	ho := &slog.HandlerOptions{Level: level}
	if o.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}

// Package members connects mcs-importer to its member clusters: one set of
// clients per kubeconfig context, cluster-ID discovery (About API
// ClusterProperty, else the context name), the served MCS API version,
// shared informers whose caches the reconcile reads, and a health probe
// that tells the controller when a member's API goes away and comes back.
package members

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/internal/memberconn"
	"github.com/mcs-dns/mcs-dns/internal/tokenfile"
)

// Member is one member cluster.
type Member struct {
	// Context is the kubeconfig context the member was reached through.
	Context string
	// ID is the cluster ID (ClusterProperty cluster.clusterset.k8s.io, else
	// the context name).
	ID string
	// IDSource says where ID came from ("ClusterProperty", "context", or
	// "kept": the ClusterProperty it joined with before is gone, and the
	// ID it had then is kept).
	IDSource string
	// Region is the member's region: the value of its region
	// ClusterProperty (SetOptions.RegionProperty), read when it joins;
	// "" none. Every slice mirrored from it carries it.
	Region string
	// Importing is true when the importer writes imports into this member.
	Importing bool
	// ExportConditions is true when the importer writes the conditions of
	// this member's ServiceExports.
	ExportConditions bool
	// ExportVersion and ImportVersion are the served MCS API versions.
	ExportVersion, ImportVersion string
	// Schema is what the member's MCS CRDs keep of what the importer
	// writes; SchemaErr why it could not be read (then all is kept).
	Schema    Schema
	SchemaErr error

	Config  *rest.Config
	Kube    kubernetes.Interface
	MCS     mcsclient.Interface
	Dynamic dynamic.Interface

	health health
	access accessCheck
	// accessEvery: see SetOptions.AccessCheckInterval.
	accessEvery time.Duration
	// answered is when the member last answered a request of the
	// importer's or sent one of its caches an event (UnixNano): a probe
	// that times out while the member answers other requests finds it
	// slow, not gone.
	answered atomic.Int64
	// cachesDone is the Done channel of the context of the latest cache
	// generation started (nil before the first): a watch the caches made
	// stops waiting for a refusing API server when they are stopped.
	cachesDone atomic.Pointer[<-chan struct{}]
	// limiter is the clients' limit when the operator set none (nil
	// otherwise).
	limiter *apfLimiter
}

// LoadConfig reads one context of a kubeconfig file (the default loading
// rules when path is empty).
func LoadConfig(path, contextName string) (*rest.Config, error) {
	cfg, err := memberconn.LoadKubeconfig(path, contextName)
	if err != nil {
		return nil, err
	}
	// A token replaced and the old one revoked must not keep a member
	// away for a minute (longer than a short grace period).
	tokenfile.RereadOnRefusal(cfg)
	return cfg, nil
}

// Connect builds the clients of the member reached through contextName
// and asks it for its cluster ID and served MCS API versions.
func Connect(ctx context.Context, cfg *rest.Config, contextName string) (*Member, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "mcs-importer"
	// No gzip: each of the importer's watches (five per member) would
	// keep a decompressor of its own, and decompressing costs CPU on
	// every event; what the importer reads is small objects, one at a
	// time, after the initial lists.
	cfg.DisableCompression = true
	m := &Member{Context: contextName, Config: cfg}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return noteAnswers(rt, &m.answered) })
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return retryWhileAway(rt, m.cachesStopped) })
	// One limiter for every client of the member (kube, MCS, dynamic,
	// discovery): none when its API server has API Priority and Fairness
	// and the operator set no rate.
	m.limiter = limitClients(cfg)
	var err error
	// Services, EndpointSlices and the rest of the built-in types in
	// protobuf: encoding and decoding them is a fraction of JSON's CPU and
	// garbage, and the importer writes and watches them in every member.
	// (ServiceImports and ServiceExports are CRDs: JSON only.)
	kcfg := rest.CopyConfig(cfg)
	kcfg.ContentType = runtime.ContentTypeProtobuf
	kcfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	if m.Kube, err = kubernetes.NewForConfig(kcfg); err != nil {
		return nil, fmt.Errorf("context %q: %w", contextName, err)
	}
	if m.MCS, err = mcsclient.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("context %q: %w", contextName, err)
	}
	if m.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("context %q: %w", contextName, err)
	}
	// Discovery takes no context: bound it by the context's deadline.
	dcfg := rest.CopyConfig(cfg)
	if dl, ok := ctx.Deadline(); ok {
		dcfg.Timeout = time.Until(dl)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(dcfg)
	if err != nil {
		return nil, fmt.Errorf("context %q: %w", contextName, err)
	}
	// One attempt: the Set retries with backoff, and reports why.
	if err := m.discover(ctx, dc); err != nil {
		return nil, fmt.Errorf("context %q: %w", contextName, err)
	}
	return m, nil
}

func (m *Member) discover(ctx context.Context, dc discovery.DiscoveryInterface) error {
	var err error
	if m.ID, m.IDSource, err = memberconn.MemberClusterID(ctx, m.Dynamic, m.Context); err != nil {
		return err
	}
	gvrs, err := mcsapi.ServedVersions(dc, mcsapi.ServiceExports, mcsapi.ServiceImports)
	if err != nil {
		return err
	}
	m.ExportVersion, m.ImportVersion = gvrs[0].Version, gvrs[1].Version
	// A CRD's OpenAPI v3 document is published a moment after the CRD is
	// served: retry for a while before keeping all fields (a member with
	// older CRDs would then refuse or drop what it is asked for).
	deadline := time.Now().Add(schemaWait)
	for {
		m.Schema, m.SchemaErr = DetectSchema(dc, m.ExportVersion, m.ImportVersion)
		if m.SchemaErr == nil || !time.Now().Before(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// schemaWait bounds how long connecting waits for a member's MCS CRDs to
// appear in its OpenAPI v3 documents.
const schemaWait = 15 * time.Second

// Reason says in a few words why a member cannot be used, for logs,
// /readyz and the member-state metric: what an operator should look at.
func Reason(err error) string {
	var idErr *IDError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &idErr):
		return "cluster ID rejected: " + err.Error()
	case apierrors.IsUnauthorized(err):
		return "unauthorized (credentials rejected or expired): " + err.Error()
	case apierrors.IsForbidden(err):
		return "forbidden (the importer's RBAC role or binding is missing): " + err.Error()
	case apierrors.IsNotFound(err) || errors.Is(err, mcsapi.ErrNotServed):
		return "MCS API not served (CRDs not installed, deleted, or at another version): " + err.Error()
	case errors.Is(err, memberconn.ErrNoClusterIDValue):
		return "bad ClusterProperty: " + err.Error()
	}
	return "unreachable: " + err.Error()
}

// Reached reports whether err came back from the member's API server (an
// HTTP status below 500: the server answered and refused), as opposed to a
// failure to reach it (no connection, timeout, TLS, 5xx). Only the latter
// counts towards a disruption (see Set).
func Reached(err error) bool {
	var idErr *IDError
	if errors.As(err, &idErr) || errors.Is(err, memberconn.ErrNoClusterIDValue) || errors.Is(err, mcsapi.ErrNotServed) {
		return true
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		code := st.Status().Code
		return code > 0 && code < 500
	}
	return false
}

// Where a member's cluster ID came from (Member.IDSource).
const (
	idFromProperty = memberconn.MemberIDFromProperty
	idFromContext  = memberconn.MemberIDFromContext
	idKept         = "kept"
)

// ValidateID checks a member's cluster ID with the rule the plugin applies
// too (mcsapi.ValidateClusterID); an ID that breaks it keeps the member out.
func ValidateID(id string) error {
	if err := mcsapi.ValidateClusterID(id); err != nil {
		return &IDError{msg: err.Error()}
	}
	return nil
}

// IDError is a cluster ID that keeps a member out: not valid, or another
// member's.
type IDError struct{ msg string }

func (e *IDError) Error() string { return e.msg }

// ValidateIDs checks every member's ID and that no two members share one.
func ValidateIDs(ms []*Member) error {
	var errs []error
	seen := map[string]string{}
	for _, m := range ms {
		if err := ValidateID(m.ID); err != nil {
			errs = append(errs, fmt.Errorf("context %q: %w", m.Context, err))
			continue
		}
		if other, dup := seen[m.ID]; dup {
			errs = append(errs, duplicateID(other, m.Context, m.ID))
			continue
		}
		seen[m.ID] = m.Context
	}
	return errors.Join(errs...)
}

func duplicateID(other, context, id string) error {
	return &IDError{msg: fmt.Sprintf("contexts %q and %q have the same cluster ID %q: cluster IDs must be distinct", other, context, id)}
}

// cachesStopped returns the channel closed when the latest cache
// generation is stopped (nil before the first).
func (m *Member) cachesStopped() <-chan struct{} {
	if p := m.cachesDone.Load(); p != nil {
		return *p
	}
	return nil
}

package cmd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/internal/memberconn"
	"github.com/mcs-dns/mcs-dns/internal/tokenfile"
)

// member is one member cluster as this tool reaches it: through one
// kubeconfig context, with the cluster ID and served MCS API versions
// found the way mcs-importer finds them. Err, when set, says why the
// member could not be used; the other fields are then partly empty.
type member struct {
	Context  string
	ID       string
	IDSource string
	Exports  schema.GroupVersionResource
	Imports  schema.GroupVersionResource
	Kube     kubernetes.Interface
	Dyn      dynamic.Interface
	Err      error
}

// op is one API request, named for error messages: the verb, the
// resource (resource.group) and the namespace ("" for all namespaces,
// or none for a cluster-scoped resource).
type op struct {
	verb, resource, namespace string
	clusterScoped             bool
}

func (o op) String() string {
	switch {
	case o.clusterScoped:
		return o.verb + " " + o.resource
	case o.namespace == "":
		return o.verb + " " + o.resource + " in all namespaces"
	}
	return o.verb + " " + o.resource + " in namespace " + o.namespace
}

// memberError is why a member could not be used, in words a user can act
// on: Kind is "unreachable", "forbidden", "unauthorized" or "no MCS CRDs".
type memberError struct {
	Context string
	Kind    string
	Op      op
	Err     error
}

func (e *memberError) Error() string {
	switch e.Kind {
	case kindForbidden:
		return fmt.Sprintf("member %q: RBAC denied: cannot %s (%v)", e.Context, e.Op, e.Err)
	case kindUnauthorized:
		return fmt.Sprintf("member %q: credentials rejected (%s): %v", e.Context, e.Op, e.Err)
	case kindNoCRDs:
		return fmt.Sprintf("member %q: no MCS CRDs: %v (install them: kubectl apply -k deploy/crds)", e.Context, e.Err)
	}
	return fmt.Sprintf("member %q: unreachable (%s): %v", e.Context, e.Op, e.Err)
}

func (e *memberError) Unwrap() error { return e.Err }

const (
	kindUnreachable  = "unreachable"
	kindForbidden    = "forbidden"
	kindUnauthorized = "unauthorized"
	kindNoCRDs       = "no MCS CRDs"
)

// classify wraps err, returned by o in the member of context ctxName.
func classify(ctxName string, o op, err error) error {
	if err == nil {
		return nil
	}
	var me *memberError
	if errors.As(err, &me) {
		return err
	}
	kind := kindUnreachable
	switch {
	case apierrors.IsForbidden(err):
		kind = kindForbidden
	case apierrors.IsUnauthorized(err):
		kind = kindUnauthorized
	case errors.Is(err, mcsapi.ErrNotServed):
		kind = kindNoCRDs
	}
	return &memberError{Context: ctxName, Kind: kind, Op: o, Err: err}
}

// short is a member error in a few words, for a table cell.
func short(err error) string {
	var me *memberError
	if errors.As(err, &me) {
		switch me.Kind {
		case kindForbidden:
			return "forbidden: " + me.Op.verb + " " + me.Op.resource
		case kindNoCRDs:
			return "no MCS CRDs"
		}
		return me.Kind
	}
	return "error"
}

// contexts returns the member contexts: want, checked against the
// kubeconfig, or all of its contexts (sorted) when want is empty.
func contexts(path string, want []string) ([]string, error) {
	raw, err := memberconn.RawKubeconfig(path)
	if err != nil {
		return nil, err
	}
	var all []string
	for name := range raw.Contexts {
		all = append(all, name)
	}
	slices.Sort(all)
	if len(all) == 0 {
		return nil, fmt.Errorf("kubeconfig %s has no contexts", memberconn.KubeconfigName(path))
	}
	if len(want) == 0 {
		return all, nil
	}
	var missing []string
	for _, c := range want {
		if !slices.Contains(all, c) {
			missing = append(missing, fmt.Sprintf("%q", c))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no context %s in kubeconfig %s; available contexts: %s",
			strings.Join(missing, ", "), memberconn.KubeconfigName(path), strings.Join(all, ", "))
	}
	return want, nil
}

// connect reaches every context in parallel; a member that cannot be
// used comes back with Err set, never as an error of the whole call.
func connect(ctx context.Context, f *memberFlags, names []string) []*member {
	out := make([]*member, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { out[i] = connectOne(ctx, f, name) })
	}
	wg.Wait()
	return out
}

// connectOne builds the clients of one member and, as mcs-importer does,
// reads its cluster ID (About API ClusterProperty, else the context name)
// and the MCS API versions it serves.
func connectOne(ctx context.Context, f *memberFlags, name string) *member {
	m := &member{Context: name, ID: name}
	cfg, err := memberconn.LoadKubeconfig(f.kubeconfig, name)
	if err != nil {
		m.Err = err
		return m
	}
	// A token file replaced under a running command is read again.
	tokenfile.RereadOnRefusal(cfg)
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "kubectl-mcs"
	// One short bound per request: a member that is down costs its
	// column, not the whole command.
	cfg.Timeout = f.requestTimeout
	cfg.QPS, cfg.Burst = 50, 100
	if m.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		m.Err = err
		return m
	}
	if m.Dyn, err = dynamic.NewForConfig(cfg); err != nil {
		m.Err = err
		return m
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		m.Err = err
		return m
	}
	ctx, cancel := context.WithTimeout(ctx, f.requestTimeout)
	defer cancel()
	if m.ID, m.IDSource, err = memberconn.MemberClusterID(ctx, m.Dyn, name); err != nil {
		m.ID = name
		m.Err = classify(name, op{verb: "get", resource: mcsapi.ClusterPropertyGVR.Resource + "." + mcsapi.AboutGroup, clusterScoped: true}, err)
		return m
	}
	if m.Exports, err = mcsapi.ServedVersion(dc, mcsapi.ServiceExports); err != nil {
		m.Err = classify(name, op{verb: "discover", resource: mcsapi.ServiceExports + "." + mcsapi.Group, clusterScoped: true}, err)
		return m
	}
	if m.Imports, err = mcsapi.ServedVersion(dc, mcsapi.ServiceImports); err != nil {
		m.Err = classify(name, op{verb: "discover", resource: mcsapi.ServiceImports + "." + mcsapi.Group, clusterScoped: true}, err)
		return m
	}
	return m
}

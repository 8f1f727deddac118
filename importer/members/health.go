package members

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// State is what the importer knows about a member's API.
type State int

const (
	// Up: the API answers; its caches are live and it can be written to.
	Up State = iota
	// Unreachable: the API stopped answering (or stopped letting the
	// importer read) less than the grace period ago, or during a
	// disruption. Its last known exports and endpoints stay served;
	// nothing is written to it.
	Unreachable
	// Down: unreachable for longer than the grace period. Its exports are
	// withdrawn and its caches dropped; when it answers again a fresh
	// full list is taken before it counts again. A member never seen
	// since the process started goes Down (is withdrawn) when the grace
	// period has passed since the start.
	Down
	// Unknown: not seen since the process started (it has not answered
	// yet, or its cluster ID keeps it out). Nothing that may have come
	// from it is withdrawn or rewritten (see Set.Hold).
	Unknown
)

func (s State) String() string { return [...]string{"up", "unreachable", "down", "unknown"}[s] }

// States lists every state, for metrics.
var States = []State{Up, Unreachable, Down, Unknown}

type health struct {
	mu     sync.Mutex
	state  State
	since  time.Time
	caches *Caches
}

// Start starts the member's first cache generation and waits (at most
// syncTimeout) for it to sync; the member is then Up.
func (m *Member) Start(ctx context.Context, notify func(Event), syncTimeout time.Duration) error {
	c, err := m.startCaches(ctx, notify, nil)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", m.ID, err)
	}
	if !c.waitSynced(ctx, syncTimeout) {
		c.stop()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("cluster %s (context %q): caches did not sync within %s", m.ID, m.Context, syncTimeout)
	}
	m.health.mu.Lock()
	m.health.caches, m.health.state = c, Up
	m.health.mu.Unlock()
	return nil
}

// Stop stops the member's caches.
func (m *Member) Stop() {
	m.health.mu.Lock()
	c := m.health.caches
	m.health.caches = nil
	m.health.mu.Unlock()
	if c != nil {
		c.stop()
	}
}

// Caches returns the member's current cache generation, nil while Down.
func (m *Member) Caches() *Caches {
	m.health.mu.Lock()
	defer m.health.mu.Unlock()
	return m.health.caches
}

// State returns the member's state.
func (m *Member) State() State {
	m.health.mu.Lock()
	defer m.health.mu.Unlock()
	return m.health.state
}

// Probe checks that the importer can still do its work in the member: it
// lists one ServiceExport at the version the member was joined with, and
// checks the importer's access (checkAccess: one object of every other
// resource it reads, and whether it may make every call it makes there;
// at the access check interval, sooner after a refusal). That fails when
// the API is unreachable, when the importer's credentials or RBAC
// binding are gone or lack any one of those calls (401/403; a bare
// /readyz would still answer), and when the MCS CRDs were deleted or
// stopped serving those versions (404).
func (m *Member) Probe(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The answer is not decoded: that it came, or which refusal it was,
	// is all a probe needs, and every member is probed every few
	// seconds (decoding was an eighth of the importer's idle CPU).
	rc := m.MCS.MulticlusterV1beta1().RESTClient()
	if m.alphaExports() {
		rc = m.MCS.MulticlusterV1alpha1().RESTClient()
	}
	if err := rc.Get().Resource(mcsapi.ServiceExports).Param("limit", "1").Do(ctx).Error(); err != nil {
		return err
	}
	return m.checkAccess(ctx)
}

// VersionsChanged says how the member's served MCS API versions differ
// from those read when it connected; "" when they do not, or cannot be
// told now (an error, or no version served: CRDs being replaced, or
// discovery behind; the member could not be joined again yet).
// timeout bounds each discovery request.
func (m *Member) VersionsChanged(timeout time.Duration) string {
	cfg := rest.CopyConfig(m.Config)
	cfg.Timeout = timeout
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return ""
	}
	served, err := mcsapi.ServedVersions(dc, mcsapi.ServiceExports, mcsapi.ServiceImports)
	if err != nil {
		return "" // cannot tell now; asked again later
	}
	var changes []string
	for i, had := range []string{m.ExportVersion, m.ImportVersion} {
		if gvr := served[i]; gvr.Version != had {
			changes = append(changes, fmt.Sprintf("%s served at %s, was %s", gvr.Resource, gvr.Version, had))
		}
	}
	return strings.Join(changes, "; ")
}

func (m *Member) setState(s State, since time.Time) {
	m.health.mu.Lock()
	defer m.health.mu.Unlock()
	m.health.state, m.health.since = s, since
}

// unreachableSince is when the member last became Unreachable (as moved
// on by disruptions).
func (m *Member) unreachableSince() time.Time {
	m.health.mu.Lock()
	defer m.health.mu.Unlock()
	return m.health.since
}

func (m *Member) setCaches(c *Caches) {
	m.health.mu.Lock()
	defer m.health.mu.Unlock()
	m.health.caches = c
}

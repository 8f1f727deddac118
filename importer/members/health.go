package members

import (
	"context"
	"fmt"
	"log/slog"
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
	// Unreachable: the API stopped answering less than the grace period
	// ago. Its last known exports and endpoints stay served; nothing is
	// written to it.
	Unreachable
	// Down: unreachable for longer than the grace period. Its exports are
	// withdrawn and its caches dropped; when it answers again a fresh
	// full list is taken before it counts again.
	Down
)

func (s State) String() string { return [...]string{"up", "unreachable", "down"}[s] }

type health struct {
	mu     sync.Mutex
	state  State
	since  time.Time
	caches *Caches
}

// HealthOptions configure Start and Watch.
type HealthOptions struct {
	// ProbeInterval is how often the API is probed (GET /readyz).
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe.
	ProbeTimeout time.Duration
	// Grace is how long an unreachable member's last known state stays served.
	Grace time.Duration
	// SyncTimeout bounds the wait for a fresh cache generation to sync.
	SyncTimeout time.Duration
	// Notify receives every informer event.
	Notify func(Event)
	// OnChange is called after every state change. When the member goes
	// Down, dropped is the cache generation being discarded (still
	// readable during the call), so the caller can find the keys that
	// need reconciling.
	OnChange func(m *Member, state State, dropped *Caches)
	// OnVersionChange, when set, is told when a member's served MCS API
	// versions differ from those read when it connected: on two checks in
	// a row of an Up member (every versionCheckProbes probes), or once
	// before a Down member's caches are listed again. Its caches and
	// writes use the old versions, so the importer restarts to read the
	// new.
	OnVersionChange func(m *Member, change string)
	Log             *slog.Logger
}

// versionCheckProbes: the served versions are read again every this many
// probes of an Up member (30 s at the default 5 s probe interval).
const versionCheckProbes = 6

// Start starts the member's first cache generation and waits for it to sync.
func (m *Member) Start(ctx context.Context, o HealthOptions) error {
	c, err := m.startCaches(ctx, o.Notify)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", m.ID, err)
	}
	if !c.waitSynced(ctx, o.SyncTimeout) {
		c.stop()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("cluster %s (context %q): caches did not sync within %s", m.ID, m.Context, o.SyncTimeout)
	}
	m.health.mu.Lock()
	m.health.caches, m.health.state = c, Up
	m.health.mu.Unlock()
	return nil
}

// Stop stops the member's caches (Watch does it too when it returns).
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

// Probe asks the member's API whether it is ready.
func (m *Member) Probe(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return m.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
}

// Watch probes the member until ctx is done, moving it between Up,
// Unreachable and Down. It stops the member's caches when it returns.
func (m *Member) Watch(ctx context.Context, o HealthOptions) {
	log := o.Log.With("cluster", m.ID)
	t := time.NewTicker(o.ProbeInterval)
	defer t.Stop()
	defer m.Stop()
	// upProbes counts the probes since the member was last seen Up;
	// seen is the change the last version check found ("" none).
	upProbes, seen := 0, ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := m.Probe(ctx, o.ProbeTimeout)
		if ctx.Err() != nil {
			return
		}
		m.health.mu.Lock()
		state, since := m.health.state, m.health.since
		m.health.mu.Unlock()
		if err != nil || state != Up {
			upProbes, seen = 0, ""
		}
		switch {
		case err != nil && state == Up:
			log.Warn("member cluster API unreachable; serving its last known state for the grace period", "grace", o.Grace, "err", err)
			m.setState(Unreachable, time.Now())
			o.OnChange(m, Unreachable, nil)
		case err != nil && state == Unreachable && time.Since(since) >= o.Grace:
			log.Warn("member cluster API unreachable for longer than the grace period; withdrawing its exports", "grace", o.Grace, "err", err)
			dropped := m.Caches()
			m.setState(Down, since)
			m.setCaches(nil)
			o.OnChange(m, Down, dropped)
			if dropped != nil {
				dropped.stop()
			}
		case err == nil && state == Unreachable:
			log.Info("member cluster API reachable again within the grace period")
			m.setState(Up, time.Time{})
			o.OnChange(m, Up, nil)
		case err == nil && state == Down:
			if o.OnVersionChange != nil {
				// Its caches would list the versions of start-up.
				if change := m.VersionsChanged(o.ProbeTimeout); change != "" {
					o.OnVersionChange(m, change)
					continue
				}
			}
			log.Info("member cluster API reachable again; relisting")
			c, err := m.startCaches(ctx, o.Notify)
			if err != nil {
				log.Error("starting caches", "err", err)
				continue
			}
			if !c.waitSynced(ctx, o.SyncTimeout) {
				c.stop()
				log.Warn("caches did not sync; will retry", "timeout", o.SyncTimeout)
				continue
			}
			m.setCaches(c)
			m.setState(Up, time.Time{})
			log.Info("member cluster back; full resync")
			o.OnChange(m, Up, nil)
		case err == nil && state == Up && o.OnVersionChange != nil:
			if upProbes++; upProbes%versionCheckProbes == 0 {
				// Twice in a row: discovery right after a CRD change
				// can be ahead of or behind what is served.
				change := m.VersionsChanged(o.ProbeTimeout)
				if change != "" && change == seen {
					o.OnVersionChange(m, change)
				}
				seen = change
			}
		}
	}
}

// VersionsChanged says how the member's served MCS API versions differ
// from those read when it connected; "" when they do not, or cannot be
// told now (an error, or no version served: CRDs being replaced, or
// discovery behind; a restart would not connect to such a member).
// timeout bounds each discovery request.
func (m *Member) VersionsChanged(timeout time.Duration) string {
	cfg := rest.CopyConfig(m.Config)
	cfg.Timeout = timeout
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return ""
	}
	var changes []string
	for _, r := range []struct{ resource, had string }{
		{mcsapi.ServiceExports, m.ExportVersion},
		{mcsapi.ServiceImports, m.ImportVersion},
	} {
		gvr, err := mcsapi.ServedVersion(dc, r.resource)
		if err != nil {
			return "" // cannot tell now; asked again later
		}
		if gvr.Version != r.had {
			changes = append(changes, fmt.Sprintf("%s served at %s, was %s", r.resource, gvr.Version, r.had))
		}
	}
	return strings.Join(changes, "; ")
}

func (m *Member) setState(s State, since time.Time) {
	m.health.mu.Lock()
	defer m.health.mu.Unlock()
	m.health.state, m.health.since = s, since
}

func (m *Member) setCaches(c *Caches) {
	m.health.mu.Lock()
	defer m.health.mu.Unlock()
	m.health.caches = c
}

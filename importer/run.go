package importer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mcs-dns/mcs-dns/importer/controller"
	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/internal/policy"
)

// policyPoll is how often the --export-policy file is read for changes.
var policyPoll = 2 * time.Second

// startWait bounds how long reconciling waits, at a start or a new leader
// term, for every member's first join attempt.
const startWait = 5 * time.Second

// Run runs the importer until ctx is done. It returns an error when
// start-up fails for a reason no retry mends (bad options, a kubeconfig
// context that does not exist, a metrics address in use),
// errLostLeadership when another replica took the Lease over, and nil
// after a clean shutdown. Member clusters that cannot be used (at
// start-up or later) never end it: each is joined in the background,
// reported, and retried with back-off (members.Set).
func Run(ctx context.Context, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	log := o.Log
	if log == nil {
		log = NewLogger(o, io.Discard)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	cfgs, err := memberConfigs(o)
	if err != nil {
		return err
	}
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	// The Set calls the controller, which reads the Set: ctrl is set
	// before the Set runs.
	var ctrl *controller.Controller
	store, storeWhere, err := memberRecord(o)
	if err != nil {
		return err
	}
	set := members.NewSet(members.SetOptions{
		Members:             cfgs,
		ConnectTimeout:      o.ConnectTimeout,
		SyncTimeout:         o.CacheSyncTimeout,
		ProbeInterval:       o.ProbeInterval,
		ProbeTimeout:        max(o.ProbeInterval, 5*time.Second),
		AccessCheckInterval: o.AccessCheckInterval,
		Grace:               o.EndpointGracePeriod,
		Notify:              func(ev members.Event) { ctrl.Notify(ev) },
		OnChange:            func(ch members.Change) { ctrl.OnChange(ch) },
		Log:                 log,
		Store:               store,
		OnRecordError:       func(error) { ctrl.Metrics().Errors.WithLabelValues(storeWhere, "member record").Inc() },
		MaxDisruption:       o.MaxDisruption,
		RegionProperty:      o.RegionProperty,
	})
	reg.MustRegister(newHoldCollector(set))
	provider, leftovers, err := vip.ForMode(o.vipConfig(), set)
	if err != nil {
		return err
	}
	if o.VIP != nil {
		provider, leftovers = o.VIP, nil
	}
	// The export policy: refused at start-up when it does not parse,
	// then read again whenever it changes.
	var pol atomic.Pointer[policy.Policy]
	var polData []byte
	policyOK := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "mcs_importer", Name: "export_policy_valid",
		Help: "1 when the --export-policy file last read is in force, 0 when it was refused (it does not parse, or cannot be read) and the last good policy stays.",
	})
	policyOK.Set(1)
	reg.MustRegister(policyOK)
	if o.ExportPolicy != "" {
		p, data, err := policy.Load(o.ExportPolicy)
		if err != nil {
			return fmt.Errorf("--export-policy: %w", err)
		}
		pol.Store(p)
		polData = data
	}
	ctrl = controller.New(controller.Options{Members: set, VIP: provider, Leftovers: leftovers, Log: log, Registerer: reg,
		TrustedManagers: o.EndpointSliceManagers, Policy: pol.Load})
	// Its queue runs goroutines from here on, whether or not Run is
	// reached (leadership never won).
	defer ctrl.ShutDown()

	var working atomic.Bool // leading (or not electing) and every member tried once
	var wg sync.WaitGroup
	defer wg.Wait()
	// Before the wait (defers run last first): the metrics server's
	// goroutines end with ctx, and Run can return on its own (leadership
	// lost) while the caller's ctx lives on.
	defer cancel()
	if o.ExportPolicy != "" {
		wg.Go(func() {
			policy.Watch(ctx, o.ExportPolicy, policyPoll, polData, func(p *policy.Policy) {
				pol.Store(p)
				policyOK.Set(1)
				log.Info("export policy changed; every export is reconciled again", "file", o.ExportPolicy)
				ctrl.EnqueueAll()
			}, func(err error) {
				policyOK.Set(0)
				log.Error("export policy refused; the last good one stays in force", "err", err)
			})
		})
	}
	addr := ""
	if o.MetricsAddr != "" {
		ln, err := net.Listen("tcp", o.MetricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		addr = ln.Addr().String()
		srv := &http.Server{Handler: healthMux(reg, &working, set, o.Profiling), ReadHeaderTimeout: 10 * time.Second}
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("health/metrics server", "err", err)
			}
		}()
		go func() {
			defer wg.Done()
			<-ctx.Done()
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			_ = srv.Shutdown(sctx)
		}()
		log.Info("serving /healthz, /readyz and /metrics", "addr", addr)
	}

	work := func(ctx context.Context) error {
		ctrl.Metrics().Leader.Set(1)
		defer ctrl.Metrics().Leader.Set(0)
		var wwg sync.WaitGroup
		defer wwg.Wait()
		wwg.Go(func() { set.Run(ctx) })
		// Reconciling waits for every member's first join attempt (at most
		// startWait): members join one by one, and a reconcile that saw
		// only some of them would write imports from part of the
		// clusterset (another type, fewer endpoints) to be rewritten a
		// moment later. A member slower than that is unseen: the hold
		// covers what may have come from it.
		started := make(chan struct{})
		wwg.Go(func() {
			defer close(started)
			select {
			case <-ctx.Done():
			case <-set.Settled():
			case <-time.After(startWait):
				log.Warn("not every member cluster has been tried yet; reconciling with those that have", "after", startWait)
			}
		})
		wwg.Go(func() {
			select {
			case <-ctx.Done():
				return
			case <-set.Settled():
			}
			working.Store(true)
			up := 0
			for _, st := range set.Statuses() {
				if st.State == members.Up {
					up++
				}
			}
			log.Info("every member cluster tried once; reconciling", "members", len(cfgs), "up", up, "workers", o.Workers)
			if o.OnReady != nil {
				o.OnReady(addr)
			}
		})
		<-started
		ctrl.Run(ctx, o.Workers, o.Resync)
		return nil
	}
	if o.LeaderElect {
		err = runElected(ctx, o, log, work)
	} else {
		err = work(ctx)
	}
	log.Info("shutting down")
	return err
}

// memberConfigs loads every member's kubeconfig context: a context that is
// missing or broken is a configuration error, reported at once.
func memberConfigs(o Options) ([]members.Config, error) {
	out := make([]members.Config, len(o.Contexts))
	var errs []error
	for i, name := range o.Contexts {
		cfg, err := members.LoadConfig(o.Kubeconfig, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cfg.QPS, cfg.Burst = o.QPS, o.Burst // 0: see members.Connect
		c := members.Config{Context: name, REST: cfg}
		c.Importing = len(o.ImportInto) == 0 || slices.Contains(o.ImportInto, name)
		c.ExportConditions = c.Importing
		if len(o.ExportConditionsIn) > 0 {
			c.ExportConditions = slices.Contains(o.ExportConditionsIn, name)
		}
		out[i] = c
	}
	return out, errors.Join(errs...)
}

package mcs

// Following the served ServiceImport version: which version of
// multicluster.x-k8s.io the cluster serves, found at start-up and again
// whenever the watched one stops being served, with a new generation of
// informers swapped in once it has synced.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"

	"github.com/mcs-dns/mcs-dns/internal/listwatchjson"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// importGeneration is a set of ServiceImport informers, one per scope,
// for one served version.
type importGeneration struct {
	gvr     schema.GroupVersionResource
	byScope map[string]*importInformer
	// gone is told when a list finds the version not served (404): a CRD
	// upgrade that drops v1alpha1, say.
	gone chan struct{}
}

// start runs the generation's informers in wg, each until its stop (or
// the controller's context) ends.
func (g *importGeneration) start(wg *sync.WaitGroup) {
	for _, inf := range g.byScope {
		wg.Go(func() { inf.RunWithContext(inf.ctx) })
	}
}

// synced reports whether every informer of the generation has synced.
func (g *importGeneration) synced() bool {
	for _, inf := range g.byScope {
		if !inf.synced() {
			return false
		}
	}
	return true
}

func (g *importGeneration) stop() {
	for _, inf := range g.byScope {
		inf.stop()
	}
}

// importInformers creates (not starts) the ServiceImport informers of
// version gvr for scopes, wired to the controller's handler.
func (c *controller) importInformers(ctx context.Context, gvr schema.GroupVersionResource, scopes []string) (*importGeneration, error) {
	client, err := newImportClient(c.rest, gvr)
	if err != nil {
		return nil, fmt.Errorf("ServiceImport client: %w", err)
	}
	g := &importGeneration{gvr: gvr, byScope: map[string]*importInformer{}, gone: make(chan struct{}, 1)}
	for _, ns := range scopes {
		inf := cache.NewSharedIndexInformerWithOptions(client.listWatch(ns), &listwatchjson.ServiceImport{},
			cache.SharedIndexInformerOptions{ObjectDescription: gvr.Resource + "." + gvr.Group + "/" + gvr.Version})
		reg, err := inf.AddEventHandler(c.handler(true))
		if err == nil {
			err = errors.Join(
				inf.SetTransform(transformImport),
				inf.SetWatchErrorHandlerWithContext(c.watchErrorHandler(mcsapi.ServiceImports, g.gone)),
			)
		}
		if err != nil {
			g.stop()
			return nil, err
		}
		ictx, stop := context.WithCancel(ctx)
		g.byScope[ns] = &importInformer{SharedIndexInformer: inf, synced: reg.HasSynced, stop: stop, ctx: ictx}
	}
	return g, nil
}

// followVersion runs until ctx ends. When listing ServiceImports finds
// the watched version no longer served, it finds the served one and, if
// it changed, lists it with new informers while the current ones keep
// answering, swaps them in once synced, and rebuilds every service either
// knew (answers of imports deleted meanwhile go). If the new version goes
// too before it synced, it starts over. Readiness is left as it is: the
// last answers are served meanwhile, as during an API outage.
func (c *controller) followVersion(ctx context.Context, wg *sync.WaitGroup, disc discovery.DiscoveryInterface, cur *importGeneration, scopes []string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-cur.gone:
		}
		if _, err := mcsapi.ServedVersion(disc, mcsapi.ServiceImports); errors.Is(err, mcsapi.ErrNotServed) {
			// No version at all: the MCS CRDs were removed.
			next, ok := c.awaitCRDs(ctx, wg, disc, cur, scopes)
			if !ok {
				return
			}
			cur = next
			continue
		}
		retry := 500 * time.Millisecond
		for { // until the version is served again or a new one synced
			now, ok := c.discover(ctx, disc)
			if !ok {
				return
			}
			if now == cur.gvr {
				break // served again: the reflectors retry on their own
			}
			log.Infof("ServiceImports %s are not served any more; listing %s", cur.gvr.GroupVersion(), now.GroupVersion())
			next, err := c.importInformers(ctx, now, scopes)
			if err != nil {
				log.Errorf("informers: %v", err)
				break
			}
			next.start(wg)
			if synced, gone := c.awaitGeneration(ctx, disc, next); !synced {
				next.stop()
				if !gone {
					return
				}
				// Not served either: find the version again, not in a
				// tight loop should discovery keep changing its mind.
				select {
				case <-ctx.Done():
					return
				case <-time.After(retry):
				}
				retry = min(2*retry, 30*time.Second)
				continue
			}
			c.swapImports(cur, next, scopes)
			cur = next
			break
		}
	}
}

// crdPoll is how often discovery is asked whether removed MCS CRDs are
// back.
const crdPoll = time.Second

// awaitCRDs handles the MCS CRDs' removal. The API server deleted every
// ServiceImport before the CRDs went, but the watch may have ended before
// those deletions reached the informers: their stores are emptied, so
// that the names answer NXDOMAIN as the cluster says, not the last known
// state. Once discovery serves a version again, a new generation lists
// it and is swapped in when synced (cur's reflectors may be backing off
// for up to half a minute). It returns the generation answers are built
// from afterwards, false when ctx ended first.
func (c *controller) awaitCRDs(ctx context.Context, wg *sync.WaitGroup, disc discovery.DiscoveryInterface, cur *importGeneration, scopes []string) (*importGeneration, bool) {
	log.Warningf("ServiceImports %s are not served any more (the MCS CRDs were removed, and every ServiceImport with them): their names answer NXDOMAIN until the CRDs are back", cur.gvr.GroupVersion())
	watchErrors.WithLabelValues("discovery").Inc()
	var keys []string
	for _, ns := range scopes {
		store := cur.byScope[ns].GetIndexer()
		keys = append(keys, store.ListKeys()...)
		if err := store.Replace(nil, ""); err != nil {
			log.Errorf("emptying the ServiceImport cache: %v", err)
		}
	}
	for _, k := range keys {
		ns, name, _ := strings.Cut(k, "/")
		c.sync(ns, name, time.Time{})
	}
	for {
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(crdPoll):
		}
		gvr, err := mcsapi.ServedVersion(disc, mcsapi.ServiceImports)
		if err != nil {
			continue
		}
		next, err := c.importInformers(ctx, gvr, scopes)
		if err != nil {
			log.Errorf("informers: %v", err)
			continue
		}
		next.start(wg)
		synced, _ := c.awaitGeneration(ctx, disc, next)
		if !synced {
			next.stop()
			if ctx.Err() != nil {
				return nil, false
			}
			continue // gone again, or another version: ask again
		}
		c.swapImports(cur, next, scopes)
		log.Infof("the MCS CRDs are back")
		return next, true
	}
}

// awaitGeneration waits until g has synced (true), discovery serves
// another version than g's (false, true) or ctx ends (false, false). A
// 404 while discovery still names g's version (a CRD change the API
// server is still taking in) leaves g's reflectors to retry.
func (c *controller) awaitGeneration(ctx context.Context, disc discovery.DiscoveryInterface, g *importGeneration) (ok, gone bool) {
	t := time.NewTicker(syncPollEvery)
	defer t.Stop()
	for !g.synced() {
		select {
		case <-ctx.Done():
			return false, false
		case <-g.gone:
			now, ok := c.discover(ctx, disc)
			if !ok {
				return false, false
			}
			if now != g.gvr {
				return false, true
			}
		case <-t.C:
		}
	}
	return true, false
}

// swapImports makes next the generation answers are built from, stops
// old, and rebuilds every service either knew.
func (c *controller) swapImports(old, next *importGeneration, scopes []string) {
	keys := map[string]bool{}
	for _, ns := range scopes {
		c.sources[ns].imports.Store(next.byScope[ns])
		for _, g := range []*importGeneration{old, next} {
			for _, k := range g.byScope[ns].GetStore().ListKeys() {
				keys[k] = true
			}
		}
	}
	old.stop()
	gvr := next.gvr
	c.version.Store(&gvr)
	for k := range keys {
		ns, name, _ := strings.Cut(k, "/")
		c.sync(ns, name, time.Time{}) // no event: no programming latency
	}
	log.Infof("serving ServiceImports %s", gvr.GroupVersion())
}

// discover finds the ServiceImport version the cluster serves, retrying
// until it does (the CRDs may come later) or ctx ends. Before the first
// sync a permanent error (no CRDs, discovery refused) also fails
// start-up.
func (c *controller) discover(ctx context.Context, disc discovery.DiscoveryInterface) (schema.GroupVersionResource, bool) {
	backoff := 500 * time.Millisecond
	for {
		gvr, err := mcsapi.ServedVersion(disc, mcsapi.ServiceImports)
		if err == nil {
			return gvr, true
		}
		if ue := (*url.Error)(nil); !errors.As(err, &ue) {
			// Not served, or refused (401, 403, 5xx): failed requests
			// that reached no server are counted by reachability.
			watchErrors.WithLabelValues("discovery").Inc()
		}
		if permanent(err) {
			c.fail(fmt.Errorf("finding the served ServiceImport version: %w", err))
		}
		log.Warningf("finding the served ServiceImport version (retrying in %v): %v", backoff, err)
		select {
		case <-ctx.Done():
			return schema.GroupVersionResource{}, false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// servedVersion returns the watched ServiceImport version ("" until known).
func (c *controller) servedVersion() string {
	if v := c.version.Load(); v != nil {
		return v.Version
	}
	return ""
}

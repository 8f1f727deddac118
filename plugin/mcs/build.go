package mcs

import (
	"context"
	"hash/maphash"
	"runtime"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/compact"
)

// answerBuilder turns the informer stores into published answers, one
// service at a time: after the initial lists each service is built once,
// then every event rebuilds the one service it changed.
type answerBuilder struct {
	index *answers.Index
	acfg  answers.Config

	// sources by namespace ("" when watching all); written before the
	// informers start, read-only afterwards.
	sources map[string]*source

	// locks serialise the rebuilds of one service (read objects, build,
	// publish), so that the last writer always publishes the latest
	// state; different services rebuild in parallel.
	locks [64]sync.Mutex
	seed  maphash.Seed

	// initial collects the services that events touch before the
	// informers have synced, with the arrival of their first event: each
	// is built once, after the initial lists, instead of once per object
	// of the lists. nil once the builder is live.
	initialMu sync.Mutex
	initial   map[string]time.Time

	// absentLogged remembers the imports whose endpointSliceObjects:
	// Absent has been logged.
	absentLogged sync.Map
	// published is what this builder's answers add to the served gauges.
	published servedGauges
}

// handler maps informer events to the services they change.
func (b *answerBuilder) handler(imports bool) cache.ResourceEventHandler {
	keys := func(obj any) (ns, name string, arrived time.Time, ok bool) {
		if t, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
			obj = t.Obj
		}
		switch o := obj.(type) {
		case *compact.Import:
			return o.Namespace, o.Name, o.Arrived(), true
		case *compact.Slice:
			return o.Namespace, o.ServiceName, o.Arrived(), true
		}
		return "", "", time.Time{}, false
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, _ bool) {
			if ns, name, arrived, ok := keys(obj); ok {
				b.sync(ns, name, arrived)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			ns, name, arrived, ok := keys(newObj)
			if !ok {
				return
			}
			if !imports {
				if ons, oname, _, ok := keys(oldObj); ok && (ons != ns || oname != name) {
					b.sync(ons, oname, arrived)
				}
			}
			b.sync(ns, name, arrived)
		},
		DeleteFunc: func(obj any) {
			if ns, name, _, ok := keys(obj); ok {
				b.sync(ns, name, time.Now())
			}
		},
	}
}

func (b *answerBuilder) lock(key string) *sync.Mutex {
	return &b.locks[maphash.String(b.seed, key)%uint64(len(b.locks))]
}

// prebuildEvery is how often prebuild builds what the initial lists
// have touched.
const prebuildEvery = 20 * time.Millisecond

// prebuild builds, until stop, the services the initial lists have
// touched since its last round. It returns the number of builds.
func (b *answerBuilder) prebuild(ctx context.Context, stop <-chan struct{}) int {
	t := time.NewTicker(prebuildEvery)
	defer t.Stop()
	n := 0
	for {
		select {
		case <-stop:
			return n
		case <-ctx.Done():
			return n
		case <-t.C:
		}
		b.initialMu.Lock()
		batch := b.initial
		if len(batch) > 0 {
			b.initial = make(map[string]time.Time, len(batch))
		} else {
			batch = nil // still b.initial: not ours to read unlocked
		}
		b.initialMu.Unlock()
		n += b.buildAll(ctx, batch)
	}
}

// buildInitial builds every service the initial lists touched that
// prebuild has not built since, and makes the controller live: from then
// on events build their service themselves. It returns the number of
// services built.
func (b *answerBuilder) buildInitial(ctx context.Context) int {
	b.initialMu.Lock()
	pending := b.initial
	b.initial = nil
	b.initialMu.Unlock()
	return b.buildAll(ctx, pending)
}

// buildAll builds the services of pending (keys "<ns>/<name>", with the
// arrival of their first event), in parallel, and returns their number.
func (b *answerBuilder) buildAll(ctx context.Context, pending map[string]time.Time) int {
	if len(pending) == 0 {
		return 0
	}
	keys := make(chan string)
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for k := range keys {
				ns, name, _ := strings.Cut(k, "/")
				b.build(ns, name, pending[k])
			}
		})
	}
	for k := range pending {
		if ctx.Err() != nil {
			break
		}
		keys <- k
	}
	close(keys)
	wg.Wait()
	return len(pending)
}

// sync rebuilds and publishes the answers of one service, or, before the
// informers have synced, notes it for buildInitial.
func (b *answerBuilder) sync(ns, name string, arrived time.Time) {
	b.initialMu.Lock()
	if b.initial != nil {
		k := ns + "/" + name
		if _, seen := b.initial[k]; !seen {
			b.initial[k] = arrived
		}
		b.initialMu.Unlock()
		return
	}
	b.initialMu.Unlock()
	b.build(ns, name, arrived)
}

// build rebuilds and publishes the answers of one service from the
// informer stores. Its cost grows with that service's size only.
func (b *answerBuilder) build(ns, name string, arrived time.Time) {
	src := b.sources[ns]
	if src == nil {
		src = b.sources[metav1.NamespaceAll]
	}
	if src == nil {
		return
	}
	storeKey := ns + "/" + name
	mu := b.lock(storeKey)
	mu.Lock()
	defer mu.Unlock()

	var set *answers.Set
	obj, exists, _ := src.imports.Load().GetIndexer().GetByKey(storeKey)
	imp, _ := obj.(*compact.Import)
	if exists && imp != nil && imp.Err == nil {
		if imp.Service.Type == answers.Headless && imp.Service.EndpointsAbsent {
			if _, logged := b.absentLogged.LoadOrStore(storeKey, true); !logged {
				log.Warningf("ServiceImport %s: status.endpointSliceObjects is Absent, no endpoint answers", storeKey)
			}
		} else {
			b.absentLogged.Delete(storeKey)
		}
		objs, _ := src.slices.GetIndexer().ByIndex(byService, storeKey)
		sl := make([]*answers.Slice, 0, len(objs))
		for _, o := range objs {
			if s, ok := o.(*compact.Slice); ok && s.Err == nil {
				sl = append(sl, &s.Slice)
			}
		}
		set = answers.Build(&imp.Service, sl, b.acfg)
	} else {
		b.absentLogged.Delete(storeKey)
	}
	old := b.index.Put(answers.Key(ns, name), set)
	if old == nil && set == nil {
		return
	}
	if set != nil && set.Skipped() > 0 && (old == nil || old.Skipped() != set.Skipped()) {
		log.Warningf("ServiceImport %s: %d ready endpoint(s) get no per-endpoint name, SRV record or PTR: the name would exceed DNS limits (the service's name still answers with their addresses)", storeKey, set.Skipped())
	}
	if !arrived.IsZero() {
		programmingLatency.Observe(time.Since(arrived).Seconds())
	}
	b.published.account(old, set)
}

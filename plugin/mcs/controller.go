package mcs

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/compact"
	"github.com/mcs-dns/mcs-dns/internal/listwatchjson"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// byService indexes compact slices by "<namespace>/<service>".
const byService = "service"

// controller keeps the informers and turns their events into published
// answers, one service at a time.
type controller struct {
	rest       *rest.Config
	namespaces []string // nil: all
	// managers are the endpointslice.kubernetes.io/managed-by values whose
	// slices are served (nil: any but the Kubernetes endpointslice
	// controller's; a slice without one never is).
	managers []string
	index    *answers.Index
	acfg     answers.Config

	synced atomic.Bool
	// syncedCh is closed when synced becomes true.
	syncedCh chan struct{}
	// version is the ServiceImport version being watched, once known.
	version atomic.Pointer[schema.GroupVersionResource]

	cancel context.CancelFunc
	done   chan struct{}

	// sources by namespace ("" when watching all); written before the
	// informers start, read-only afterwards.
	sources map[string]*source

	// locks serialise the rebuilds of one service (read objects, build,
	// publish), so that the last writer always publishes the latest
	// state; different services rebuild in parallel.
	locks [64]sync.Mutex
	seed  maphash.Seed

	reach reachability

	// initial collects the services that events touch before the
	// informers have synced, with the arrival of their first event: each
	// is built once, after the initial lists, instead of once per object
	// of the lists. nil once the controller is live.
	initialMu sync.Mutex
	initial   map[string]time.Time

	// absentLogged remembers the imports whose endpointSliceObjects:
	// Absent has been logged.
	absentLogged sync.Map
	// published are the gauge contributions of this controller, removed
	// again when it stops (reloads run two for a moment).
	published struct {
		sync.Mutex
		imports   [3]float64
		endpoints float64
	}
}

type source struct {
	// imports is replaced when the cluster stops serving the watched
	// ServiceImport version (see followVersion).
	imports atomic.Pointer[importInformer]
	slices  cache.SharedIndexInformer
}

// importInformer is one generation of a source's ServiceImport informer.
type importInformer struct {
	cache.SharedIndexInformer
	synced cache.InformerSynced // its handler's registration
	ctx    context.Context
	stop   context.CancelFunc
}

func newController(restCfg *rest.Config, namespaces, managers []string, ix *answers.Index, acfg answers.Config) *controller {
	cfg := rest.CopyConfig(restCfg)
	cfg.UserAgent = "coredns-mcs"
	c := &controller{rest: cfg, namespaces: namespaces, managers: managers, index: ix, acfg: acfg, seed: maphash.MakeSeed(),
		initial: map[string]time.Time{}, syncedCh: make(chan struct{})}
	cfg.Wrap(c.reach.wrap)
	return c
}

func (c *controller) start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done = make(chan struct{})
	go c.run(ctx)
}

// stop stops the informers and waits for every goroutine of the
// controller to end.
func (c *controller) stop() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	<-c.done
	c.cancel = nil
	c.published.Lock()
	for t, n := range c.published.imports {
		if n != 0 {
			importsServed.WithLabelValues(answers.Type(t).String()).Sub(n)
		}
	}
	endpointsServed.Sub(c.published.endpoints)
	c.published.imports = [3]float64{}
	c.published.endpoints = 0
	c.published.Unlock()
}

func (c *controller) run(ctx context.Context) {
	defer close(c.done)
	// EndpointSlices in protobuf: a fraction of the CPU and garbage of
	// JSON to decode, which matters most for the initial list.
	kcfg := rest.CopyConfig(c.rest)
	kcfg.ContentType = kruntime.ContentTypeProtobuf
	kcfg.AcceptContentTypes = kruntime.ContentTypeProtobuf + "," + kruntime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		log.Errorf("kubernetes client: %v", err)
		return
	}
	disc, err := discovery.NewDiscoveryClientForConfig(c.rest)
	if err != nil {
		log.Errorf("discovery client: %v", err)
		return
	}
	gvr, ok := c.discover(ctx, disc)
	if !ok {
		return
	}
	c.version.Store(&gvr)

	scopes := c.namespaces
	if len(scopes) == 0 {
		scopes = []string{metav1.NamespaceAll}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	imports, err := c.importInformers(ctx, gvr, scopes)
	if err != nil {
		log.Errorf("informers: %v", err)
		return
	}
	c.sources = make(map[string]*source, len(scopes))
	var synced []cache.InformerSynced
	for _, ns := range scopes {
		src := &source{
			slices: discoveryinformers.NewFilteredEndpointSliceInformer(kube, ns, 0,
				cache.Indexers{byService: indexByService},
				func(o *metav1.ListOptions) { o.LabelSelector = mcsapi.LabelServiceName }),
		}
		src.imports.Store(imports.byScope[ns])
		c.sources[ns] = src
		// The generation of the moment (followVersion may replace it
		// before the first sync).
		synced = append(synced, func() bool { return src.imports.Load().synced() })
		if err := errors.Join(
			src.slices.SetTransform(c.transformTrustedSlice),
			src.slices.SetWatchErrorHandlerWithContext(watchErrorHandler("endpointslices", nil)),
		); err != nil {
			log.Errorf("informers: %v", err)
			return
		}
		reg, err := src.slices.AddEventHandler(c.handler(false))
		if err != nil {
			log.Errorf("informers: %v", err)
			return
		}
		synced = append(synced, reg.HasSynced)
	}
	imports.start(&wg)
	for _, src := range c.sources {
		wg.Go(func() { src.slices.RunWithContext(ctx) })
	}
	wg.Go(func() { c.followVersion(ctx, &wg, disc, imports, scopes) })
	// Handlers run synchronously, so a synced registration means its
	// initial objects have been noted (see sync).
	// While the initial lists stream in (mostly waiting for the API
	// server), build what they have touched so far, every few
	// milliseconds; a service touched again later is built again. At
	// sync, only the rest is left to build.
	stopPrebuild := make(chan struct{})
	prebuilt := make(chan int)
	go func() { prebuilt <- c.prebuild(ctx, stopPrebuild) }()
	began := time.Now()
	listed := waitSynced(ctx, syncPollEvery, synced...)
	close(stopPrebuild)
	early := <-prebuilt
	if listed {
		lists := time.Since(began)
		n := early + c.buildInitial(ctx)
		c.synced.Store(true)
		close(c.syncedCh)
		served := c.version.Load() // followVersion may have moved on
		log.Infof("synced: serving %s %s and EndpointSlices; lists in %v, answers built %v later (%d builds)",
			served.Resource, served.GroupVersion(), lists.Round(time.Millisecond), (time.Since(began) - lists).Round(time.Millisecond), n)
		// Decoding the initial lists left garbage several times the size
		// of what is kept; give it back to the OS now rather than keep it
		// until the scavenger gets to it (queries allocate nothing, so
		// the heap stays near its live size afterwards).
		debug.FreeOSMemory()
	}
	<-ctx.Done()
}

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
				inf.SetWatchErrorHandlerWithContext(watchErrorHandler(mcsapi.ServiceImports, g.gone)),
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

// syncPollEvery is how often start-up checks whether the initial lists are
// in. client-go's WaitForCacheSync checks every 100 ms: up to 100 ms of
// answering SERVFAIL after the lists have arrived; a check is a few
// atomic loads.
const syncPollEvery = 2 * time.Millisecond

// waitSynced is cache.WaitForCacheSync with a finer poll (syncPollEvery):
// it reports whether every registration synced before ctx ended.
func waitSynced(ctx context.Context, every time.Duration, synced ...cache.InformerSynced) bool {
	err := wait.PollUntilContextCancel(ctx, every, true, func(context.Context) (bool, error) {
		for _, ok := range synced {
			if !ok() {
				return false, nil
			}
		}
		return true, nil
	})
	return err == nil
}

// discover finds the ServiceImport version the cluster serves, retrying
// until it does (the CRDs may come later) or ctx ends.
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
		log.Warningf("finding the served ServiceImport version (retrying in %v): %v", backoff, err)
		select {
		case <-ctx.Done():
			return schema.GroupVersionResource{}, false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// importClient reads ServiceImports of one served version into
// listwatchjson.ServiceImport: typed metadata, raw spec and status. (The dynamic
// client's Unstructured decoding was most of the CPU of the one goroutine
// reading the ServiceImport watch, the critical path of start-up.)
type importClient struct {
	rest     rest.Interface
	params   kruntime.ParameterCodec
	resource string
}

func newImportClient(cfg *rest.Config, gvr schema.GroupVersionResource) (*importClient, error) {
	gv := gvr.GroupVersion()
	sch := kruntime.NewScheme()
	sch.AddKnownTypeWithName(gv.WithKind("ServiceImport"), &listwatchjson.ServiceImport{})
	sch.AddKnownTypeWithName(gv.WithKind("ServiceImportList"), &listwatchjson.ServiceImportList{})
	metav1.AddToGroupVersion(sch, gv)
	rc := rest.CopyConfig(cfg)
	rc.GroupVersion = &gv
	rc.APIPath = "/apis"
	rc.ContentType = kruntime.ContentTypeJSON
	rc.AcceptContentTypes = kruntime.ContentTypeJSON
	rc.NegotiatedSerializer = serializer.NewCodecFactory(sch).WithoutConversion()
	// No client-side limit: this client only lists and watches (a few
	// requests per namespace scope, and per reconnect), and Request.Stream,
	// unlike Request.Watch, would wait on it: with many namespace scopes
	// start-up would queue behind the default 5/s.
	rc.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	client, err := rest.RESTClientFor(rc)
	if err != nil {
		return nil, err
	}
	return &importClient{rest: client, params: kruntime.NewParameterCodec(sch), resource: gvr.Resource}, nil
}

// listWatch lists and watches the ServiceImports of namespace ns ("": all).
// Responses are decoded straight from the body by listwatchjson's decoders
// (one scan and one decode per object, instead of client-go's generic
// framing, kind sniffing and envelope decoding); Stream turns non-2xx
// responses into API errors as Do and Watch do.
func (ic *importClient) listWatch(ns string) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (kruntime.Object, error) {
			body, err := ic.rest.Get().Namespace(ns).Resource(ic.resource).VersionedParams(&o, ic.params).Stream(ctx)
			if err != nil {
				return nil, err
			}
			defer func() {
				// Read to the end, so that an HTTP/1.1 connection is reused.
				_, _ = io.Copy(io.Discard, body)
				_ = body.Close()
			}()
			return listwatchjson.DecodeList(body)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.Watch = true
			body, err := ic.rest.Get().Namespace(ns).Resource(ic.resource).VersionedParams(&o, ic.params).Stream(ctx)
			if err != nil {
				return nil, err
			}
			return watch.NewStreamWatcher(listwatchjson.NewWatchDecoder(body),
				apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")), nil
		},
	}
}

func indexByService(obj any) ([]string, error) {
	if s, ok := obj.(*compact.Slice); ok {
		return []string{s.ServiceKey()}, nil
	}
	return nil, nil
}

// watchErrorHandler logs and counts a reflector's errors; a list that
// finds the resource not served (404) also signals gone, when set.
func watchErrorHandler(resource string, gone chan<- struct{}) cache.WatchErrorHandlerWithContext {
	return func(_ context.Context, _ *cache.Reflector, err error) {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return // the server closed a watch; the reflector resumes it
		}
		watchErrors.WithLabelValues(resource).Inc()
		log.Warningf("watching %s: %v", resource, err)
		if gone != nil && apierrors.IsNotFound(err) {
			select {
			case gone <- struct{}{}:
			default: // one is pending already
			}
		}
	}
}

// transformImport turns a ServiceImport into a compact.Import as it
// enters the informer; malformed ones are logged and counted here, once
// per arriving version.
func transformImport(obj any) (any, error) {
	var imp *compact.Import
	switch o := obj.(type) {
	case *listwatchjson.ServiceImport:
		imp = compact.ImportFromJSON(o, time.Now())
	case *unstructured.Unstructured:
		imp = compact.ImportFromUnstructured(o, time.Now())
	default:
		return obj, nil // already transformed, or a tombstone
	}
	if imp.Err != nil {
		rejectedObjects.WithLabelValues(kindServiceImport).Inc()
		log.Warningf("skipping ServiceImport %s/%s: %v", imp.Namespace, imp.Name, imp.Err)
	} else if imp.Skipped > 0 {
		rejectedObjects.WithLabelValues(kindImportEntry).Add(float64(imp.Skipped))
		log.Warningf("ServiceImport %s/%s: skipping %d malformed ips/ports entr(ies), the rest answers: %v", imp.Namespace, imp.Name, imp.Skipped, imp.SkipErr)
	}
	return imp, nil
}

func transformSlice(obj any) (any, error) {
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	s := compact.SliceFromEndpointSlice(es, time.Now())
	if s.Err != nil {
		rejectedObjects.WithLabelValues(kindEndpointSlice).Inc()
		log.Warningf("skipping EndpointSlice %s/%s: %v", s.Namespace, s.Name, s.Err)
	} else if s.Skipped > 0 {
		rejectedObjects.WithLabelValues(kindEndpoint).Add(float64(s.Skipped))
		log.Warningf("EndpointSlice %s/%s: skipping %d malformed endpoint(s): %v", s.Namespace, s.Name, s.Skipped, s.SkipErr)
	}
	return s, nil
}

// transformTrustedSlice is transformSlice for the slices of a manager
// the stanza trusts (endpointslice_managers); any other slice is kept,
// for its events, but never answers: anyone who may create EndpointSlices
// in a namespace could otherwise put addresses, per-endpoint names and
// PTRs under a clusterset name and impersonate a cluster ID.
func (c *controller) transformTrustedSlice(obj any) (any, error) {
	out, err := transformSlice(obj)
	s, ok := out.(*compact.Slice)
	es, isSlice := obj.(*discoveryv1.EndpointSlice)
	if err != nil || !ok || !isSlice || s.Err != nil {
		return out, err
	}
	if reason := untrusted(c.managers, es.Labels[discoveryv1.LabelManagedBy]); reason != "" {
		ignoredObjects.WithLabelValues(reason).Inc()
		log.Warningf("ignoring EndpointSlice %s/%s: managed-by %q is not a trusted manager (%s; see endpointslice_managers)",
			es.Namespace, es.Name, es.Labels[discoveryv1.LabelManagedBy], reason)
		s.Err = errUntrusted
	}
	return s, nil
}

var errUntrusted = errors.New("not from a trusted endpointslice manager")

// The reasons a slice is not trusted (coredns_mcs_ignored_objects_total).
const (
	reasonNoManager          = "no_manager"
	reasonKubeController     = "kubernetes_endpointslice_controller"
	reasonUntrustedManager   = "untrusted_manager"
	kubeEndpointSliceManager = "endpointslice-controller.k8s.io"
)

// untrusted says why a slice managed by manager is not served under the
// trusted managers ("" when it is): none, the Kubernetes endpointslice
// controller's (it publishes a cluster's own Services, never clusterset
// ones), or, when managers are listed, one not listed.
func untrusted(managers []string, manager string) string {
	switch {
	case manager == "":
		return reasonNoManager
	case managers != nil && slices.Contains(managers, manager):
		return ""
	case managers != nil:
		return reasonUntrustedManager
	case manager == kubeEndpointSliceManager:
		return reasonKubeController
	}
	return ""
}

// handler maps informer events to the services they change.
func (c *controller) handler(imports bool) cache.ResourceEventHandler {
	keys := func(obj any) (ns, name string, arrived time.Time, ok bool) {
		if t, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
			obj = t.Obj
		}
		switch o := obj.(type) {
		case *compact.Import:
			return o.Namespace, o.Name, o.Arrived, true
		case *compact.Slice:
			return o.Namespace, o.ServiceName, o.Arrived, true
		}
		return "", "", time.Time{}, false
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, _ bool) {
			if ns, name, arrived, ok := keys(obj); ok {
				c.sync(ns, name, arrived)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			ns, name, arrived, ok := keys(newObj)
			if !ok {
				return
			}
			if !imports {
				if ons, oname, _, ok := keys(oldObj); ok && (ons != ns || oname != name) {
					c.sync(ons, oname, arrived)
				}
			}
			c.sync(ns, name, arrived)
		},
		DeleteFunc: func(obj any) {
			if ns, name, _, ok := keys(obj); ok {
				c.sync(ns, name, time.Now())
			}
		},
	}
}

func (c *controller) lock(key string) *sync.Mutex {
	return &c.locks[maphash.String(c.seed, key)%uint64(len(c.locks))]
}

// prebuildEvery is how often prebuild builds what the initial lists
// have touched.
const prebuildEvery = 20 * time.Millisecond

// prebuild builds, until stop, the services the initial lists have
// touched since its last round. It returns the number of builds.
func (c *controller) prebuild(ctx context.Context, stop <-chan struct{}) int {
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
		c.initialMu.Lock()
		batch := c.initial
		if len(batch) > 0 {
			c.initial = make(map[string]time.Time, len(batch))
		} else {
			batch = nil // still c.initial: not ours to read unlocked
		}
		c.initialMu.Unlock()
		n += c.buildAll(ctx, batch)
	}
}

// buildInitial builds every service the initial lists touched that
// prebuild has not built since, and makes the controller live: from then
// on events build their service themselves. It returns the number of
// services built.
func (c *controller) buildInitial(ctx context.Context) int {
	c.initialMu.Lock()
	pending := c.initial
	c.initial = nil
	c.initialMu.Unlock()
	return c.buildAll(ctx, pending)
}

// buildAll builds the services of pending (keys "<ns>/<name>", with the
// arrival of their first event), in parallel, and returns their number.
func (c *controller) buildAll(ctx context.Context, pending map[string]time.Time) int {
	if len(pending) == 0 {
		return 0
	}
	keys := make(chan string)
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for k := range keys {
				ns, name, _ := strings.Cut(k, "/")
				c.build(ns, name, pending[k])
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
func (c *controller) sync(ns, name string, arrived time.Time) {
	c.initialMu.Lock()
	if c.initial != nil {
		k := ns + "/" + name
		if _, seen := c.initial[k]; !seen {
			c.initial[k] = arrived
		}
		c.initialMu.Unlock()
		return
	}
	c.initialMu.Unlock()
	c.build(ns, name, arrived)
}

// build rebuilds and publishes the answers of one service from the
// informer stores. Its cost grows with that service's size only.
func (c *controller) build(ns, name string, arrived time.Time) {
	src := c.sources[ns]
	if src == nil {
		src = c.sources[metav1.NamespaceAll]
	}
	if src == nil {
		return
	}
	storeKey := ns + "/" + name
	mu := c.lock(storeKey)
	mu.Lock()
	defer mu.Unlock()

	var set *answers.Set
	obj, exists, _ := src.imports.Load().GetIndexer().GetByKey(storeKey)
	imp, _ := obj.(*compact.Import)
	if exists && imp != nil && imp.Err == nil {
		if imp.Service.Type == answers.Headless && imp.Service.EndpointsAbsent {
			if _, logged := c.absentLogged.LoadOrStore(storeKey, true); !logged {
				log.Warningf("ServiceImport %s: status.endpointSliceObjects is Absent, no endpoint answers", storeKey)
			}
		} else {
			c.absentLogged.Delete(storeKey)
		}
		objs, _ := src.slices.GetIndexer().ByIndex(byService, storeKey)
		sl := make([]*answers.Slice, 0, len(objs))
		for _, o := range objs {
			if s, ok := o.(*compact.Slice); ok && s.Err == nil {
				sl = append(sl, &s.Slice)
			}
		}
		set = answers.Build(&imp.Service, sl, c.acfg)
	} else {
		c.absentLogged.Delete(storeKey)
	}
	old := c.index.Put(answers.Key(ns, name), set)
	if old == nil && set == nil {
		return
	}
	if set != nil && set.Skipped() > 0 && (old == nil || old.Skipped() != set.Skipped()) {
		log.Warningf("ServiceImport %s: %d ready endpoint(s) get no per-endpoint name, SRV record or PTR: the name would exceed DNS limits (the service's name still answers with their addresses)", storeKey, set.Skipped())
	}
	if !arrived.IsZero() {
		programmingLatency.Observe(time.Since(arrived).Seconds())
	}
	c.account(old, set)
}

// account moves the served gauges by the difference between two sets.
func (c *controller) account(old, set *answers.Set) {
	c.published.Lock()
	defer c.published.Unlock()
	for _, s := range []struct {
		set  *answers.Set
		sign float64
	}{{old, -1}, {set, +1}} {
		if s.set == nil {
			continue
		}
		importsServed.WithLabelValues(s.set.Type().String()).Add(s.sign)
		c.published.imports[s.set.Type()] += s.sign
		n := s.sign * float64(s.set.Endpoints())
		endpointsServed.Add(n)
		c.published.endpoints += n
	}
}

// servedVersion returns the watched ServiceImport version ("" until known).
func (c *controller) servedVersion() string {
	if v := c.version.Load(); v != nil {
		return v.Version
	}
	return ""
}

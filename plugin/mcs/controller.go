package mcs

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/internal/tokenfile"
)

// controller runs the informers of one mcs stanza: it starts them,
// follows the served ServiceImport version (version.go), and hands their
// events to its answerBuilder (build.go).
type controller struct {
	rest       *rest.Config
	namespaces []string // nil: all
	// managers are the endpointslice.kubernetes.io/managed-by values whose
	// slices are served (nil: any but the Kubernetes endpointslice
	// controller's; a slice without one never is).
	managers []string
	// regionProperty is the ClusterProperty the region is read from
	// ("": mcsapi.RegionProperty; see learnClusterID).
	regionProperty string

	synced atomic.Bool
	// syncedCh is closed when synced becomes true.
	syncedCh chan struct{}
	// failed receives the first permanent error met before the first
	// sync (see permanent): start-up then fails instead of waiting.
	failed chan error
	// version is the ServiceImport version being watched, once known.
	version atomic.Pointer[schema.GroupVersionResource]

	cancel context.CancelFunc
	done   chan struct{}

	reach reachability

	answerBuilder
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
	// The copy only: sourceKey reads the token file's name from restCfg.
	tokenfile.RereadOnRefusal(cfg)
	c := &controller{rest: cfg, namespaces: namespaces, managers: managers,
		syncedCh: make(chan struct{}), failed: make(chan error, 1),
		answerBuilder: answerBuilder{index: ix, acfg: acfg, seed: maphash.MakeSeed(), initial: map[string]time.Time{}}}
	cfg.Wrap(c.reach.wrap)
	return c
}

// clients are the API clients of a controller.
type clients struct {
	kube kubernetes.Interface
	disc discovery.DiscoveryInterface
}

// newClients makes the controller's clients. Their errors are the
// configuration's (a CA or client certificate that does not load, say):
// no retry helps.
func (c *controller) newClients() (*clients, error) {
	// EndpointSlices in protobuf: a fraction of the CPU and garbage of
	// JSON to decode, which matters most for the initial list.
	kcfg := rest.CopyConfig(c.rest)
	kcfg.ContentType = kruntime.ContentTypeProtobuf
	kcfg.AcceptContentTypes = kruntime.ContentTypeProtobuf + "," + kruntime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(c.rest)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	return &clients{kube: kube, disc: disc}, nil
}

// start makes the clients and starts the informers in the background; it
// fails only when the clients cannot be made. Use await to learn whether
// start-up went well.
func (c *controller) start() error {
	cl, err := c.newClients()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done = make(chan struct{})
	reachabilities.Store(&c.reach, struct{}{})
	go c.run(ctx, cl)
	return nil
}

// stop stops the informers, waits for every goroutine of the
// controller to end, and takes its contributions off the gauges.
func (c *controller) stop() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	<-c.done
	c.cancel = nil
	reachabilities.Delete(&c.reach)
	c.published.withdraw()
}

// await waits until the controller has synced (nil), has met a permanent
// error before that (the error), or d has passed (nil: transient trouble,
// such as an unreachable API server, leaves the informers retrying, and
// the plugin answers SERVFAIL and is not ready until they sync).
func (c *controller) await(d time.Duration) error {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-c.syncedCh:
		return nil
	case err := <-c.failed:
		return err
	case <-t.C:
		log.Warningf("not synced after %v; answering SERVFAIL until it is", startupWait)
		return nil
	}
}

// permanent reports errors that no retry mends, only a change of the
// configuration: credentials refused (401), RBAC denying a request (403).
// MCS CRDs not served yet are not among them: they are often installed
// after CoreDNS (and a CoreDNS that also serves cluster.local must not stay
// down until they are), so the plugin waits for them, not ready.
func permanent(err error) bool {
	return apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err)
}

// fail reports err to await when it is permanent and the controller has
// not synced yet; later ones are only logged, by the caller, and retried.
func (c *controller) fail(err error) {
	if c.synced.Load() {
		return
	}
	select {
	case c.failed <- err:
	default: // one is pending already
	}
}

func (c *controller) run(ctx context.Context, cl *clients) {
	defer close(c.done)
	gcDone := lowerGCUntilSynced()
	defer gcDone()
	gvr, ok := c.discover(ctx, cl.disc)
	if !ok {
		return
	}
	c.version.Store(&gvr)
	c.learnClusterID(ctx)

	scopes := c.namespaces
	if len(scopes) == 0 {
		scopes = []string{metav1.NamespaceAll}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	imports, err := c.importInformers(ctx, gvr, scopes)
	if err != nil {
		c.fail(fmt.Errorf("informers: %w", err))
		log.Errorf("informers: %v", err)
		return
	}
	c.sources = make(map[string]*source, len(scopes))
	var synced []cache.InformerSynced
	for _, ns := range scopes {
		src := &source{
			slices: discoveryinformers.NewFilteredEndpointSliceInformer(cl.kube, ns, 0,
				cache.Indexers{byService: indexByService},
				func(o *metav1.ListOptions) { o.LabelSelector = mcsapi.LabelServiceName }),
		}
		src.imports.Store(imports.byScope[ns])
		c.sources[ns] = src
		// The generation of the moment (followVersion may replace it
		// before the first sync).
		synced = append(synced, func() bool { return src.imports.Load().synced() })
		err := errors.Join(
			src.slices.SetTransform(c.transformTrustedSlice),
			src.slices.SetWatchErrorHandlerWithContext(c.watchErrorHandler("endpointslices", nil)),
		)
		var reg cache.ResourceEventHandlerRegistration
		if err == nil {
			reg, err = src.slices.AddEventHandler(c.handler(false))
		}
		if err != nil {
			imports.stop()
			c.fail(fmt.Errorf("informers: %w", err))
			log.Errorf("informers: %v", err)
			return
		}
		synced = append(synced, reg.HasSynced)
	}
	imports.start(&wg)
	for _, src := range c.sources {
		wg.Go(func() { src.slices.RunWithContext(ctx) })
	}
	wg.Go(func() { c.followVersion(ctx, &wg, cl.disc, imports, scopes) })
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
		gcDone()
		releaseListGarbage()
	}
	<-ctx.Done()
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

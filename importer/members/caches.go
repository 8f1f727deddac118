package members

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"

	"github.com/mcs-dns/mcs-dns/importer/slicedigest"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// Kind names what an event is about.
type Kind int

// The kinds of objects the members watch.
const (
	KindExport Kind = iota
	KindImport
	KindService
	KindSourceSlice
	KindMirroredSlice
	KindNamespace
)

func (k Kind) String() string {
	return [...]string{"ServiceExport", "ServiceImport", "Service", "EndpointSlice", "MirroredEndpointSlice", "Namespace"}[k]
}

// Event says that something about (Namespace, Name) changed in Member.
// For KindNamespace, Name is empty and Namespace is the namespace.
type Event struct {
	Member    *Member
	Kind      Kind
	Namespace string
	Name      string
	// Before and After, for KindImport, are the ServiceImport before and
	// after the change (Before nil when it was added, After nil when it
	// was deleted): the VIP provider reads what it recorded.
	Before, After *mcsv1beta1.ServiceImport
	// Echo: the change is exactly this importer's own last write of the
	// object (or its deletion), which the reconcile that made it has
	// accounted for already: there is nothing new to reconcile.
	Echo bool
}

// indexService indexes slices by "<namespace>/<service>".
const indexService = "service"

// Caches are one generation of a member's informers. A member that was
// unreachable gets a fresh generation when it returns (a full relist), so
// nothing it missed meanwhile is ever served: within the grace period the
// new generation tells only what differs from the one before it.
type Caches struct {
	cancel    context.CancelFunc
	ctxDone   <-chan struct{} // closed when the generation is told to stop
	done      chan struct{}   // closed when every informer has stopped
	hasSynced []cache.InformerSynced
	// kinds: each informer's kind, indexer and event handler.
	kinds      []kindCache
	exports    cache.Indexer
	imports    cache.Indexer
	services   cache.Indexer
	namespaces cache.Indexer
	source     cache.Indexer
	mirrored   cache.Indexer // nil unless the member is importing
	// own: what this importer wrote that the caches may not show yet;
	// Import, Service and MirroredSlices read through it.
	own *ownWrites
	// notify receives this generation's events.
	notify func(Event)
	// mirroredChanges counts the changes to mirrored slices that are not
	// this importer's own writes coming back (see MirroredChanges).
	mirroredChanges atomic.Uint64
}

// kindCache is one informer of a generation.
type kindCache struct {
	kind    Kind
	indexer cache.Indexer
	handler cache.ResourceEventHandler
}

// indexer returns the generation's indexer of kind (nil if none).
func (c *Caches) indexer(kind Kind) cache.Indexer {
	for _, k := range c.kinds {
		if k.kind == kind {
			return k.indexer
		}
	}
	return nil
}

// transform is the informers' transform: managedFields are large and
// never read; mirrored slices are kept slim. v1alpha1 MCS objects are converted to v1beta1 so the
// caches only ever hold v1beta1.
func transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *mcsv1alpha1.ServiceExport:
		obj = exportToBeta(o)
	case *mcsv1alpha1.ServiceImport:
		obj = importToBeta(o)
	}
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok && Owned(s) {
		// Our own slices: only what deciding whether they are up to date
		// needs (see slicedigest.Slim), not every member's copy of every
		// endpoint.
		obj = slicedigest.Slim(s)
	}
	return obj, nil
}

func sliceIndexer(label string) cache.Indexers {
	return cache.Indexers{indexService: func(obj any) ([]string, error) {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return nil, nil
		}
		if svc := s.Labels[label]; svc != "" {
			return []string{s.Namespace + "/" + svc}, nil
		}
		return nil, nil
	}}
}

// startCaches starts a new generation of informers; events go to notify.
// Call waitSynced before reading. With prev (the generation it replaces),
// an object listed exactly as prev holds it (same resourceVersion) is not
// told again; after waitSynced, emitGone tells what prev held and this
// generation does not.
func (m *Member) startCaches(parent context.Context, notify func(Event), prev *Caches) (*Caches, error) {
	ctx, cancel := context.WithCancel(parent)
	c := &Caches{cancel: cancel, ctxDone: ctx.Done(), done: make(chan struct{}), own: newOwnWrites(), notify: notify}
	m.cachesDone.Store(&c.ctxDone)
	tr := informers.WithTransform(transform)
	kf := informers.NewSharedInformerFactoryWithOptions(m.Kube, 0, tr)
	sourceSel := fmt.Sprintf("%s,%s!=%s", discoveryv1.LabelServiceName, mcsapi.LabelManagedBy, mcsapi.ManagedByImporter)
	sf := informers.NewSharedInformerFactoryWithOptions(m.Kube, 0, tr,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sourceSel }))
	mf := informers.NewSharedInformerFactoryWithOptions(m.Kube, 0, tr,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = mcsapi.LabelManagedBy + "=" + mcsapi.ManagedByImporter
		}))
	xf := mcsinformers.NewSharedInformerFactoryWithOptions(m.MCS, 0, mcsinformers.WithTransform(transform))

	type inf struct {
		informer cache.SharedIndexInformer
		kind     Kind
		dst      *cache.Indexer
	}
	var infs []inf
	if m.ExportVersion == "v1alpha1" {
		infs = append(infs, inf{xf.Multicluster().V1alpha1().ServiceExports().Informer(), KindExport, &c.exports})
	} else {
		infs = append(infs, inf{xf.Multicluster().V1beta1().ServiceExports().Informer(), KindExport, &c.exports})
	}
	if m.ImportVersion == "v1alpha1" {
		infs = append(infs, inf{xf.Multicluster().V1alpha1().ServiceImports().Informer(), KindImport, &c.imports})
	} else {
		infs = append(infs, inf{xf.Multicluster().V1beta1().ServiceImports().Informer(), KindImport, &c.imports})
	}
	infs = append(infs,
		inf{kf.Core().V1().Services().Informer(), KindService, &c.services},
		inf{kf.Core().V1().Namespaces().Informer(), KindNamespace, &c.namespaces},
	)
	src := sf.Discovery().V1().EndpointSlices().Informer()
	if err := src.AddIndexers(sliceIndexer(discoveryv1.LabelServiceName)); err != nil {
		cancel()
		return nil, err
	}
	infs = append(infs, inf{src, KindSourceSlice, &c.source})
	if m.Importing {
		mir := mf.Discovery().V1().EndpointSlices().Informer()
		if err := mir.AddIndexers(sliceIndexer(mcsapi.LabelServiceName)); err != nil {
			cancel()
			return nil, err
		}
		infs = append(infs, inf{mir, KindMirroredSlice, &c.mirrored})
	}
	for _, i := range infs {
		// A refused list or watch has the access checked at the next
		// probe (the cache is frozen until it is allowed again).
		if err := i.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			if readRefused(err) {
				m.recheckSoon()
			}
			cache.DefaultWatchErrorHandler(ctx, r, err)
		}); err != nil {
			cancel()
			return nil, err
		}
		*i.dst = i.informer.GetIndexer()
		var known cache.Indexer
		if prev != nil {
			known = prev.indexer(i.kind)
		}
		var changed func()
		if i.kind == KindMirroredSlice {
			changed = func() { c.mirroredChanges.Add(1) }
		}
		h := handler(m, i.kind, c.own, notify, known, changed)
		if _, err := i.informer.AddEventHandler(h); err != nil {
			cancel()
			return nil, err
		}
		c.kinds = append(c.kinds, kindCache{kind: i.kind, indexer: *i.dst, handler: h})
		c.hasSynced = append(c.hasSynced, i.informer.HasSynced)
	}
	kf.Start(ctx.Done())
	sf.Start(ctx.Done())
	mf.Start(ctx.Done())
	xf.Start(ctx.Done())
	go func() {
		defer close(c.done)
		<-ctx.Done()
		kf.Shutdown()
		sf.Shutdown()
		mf.Shutdown()
		xf.Shutdown()
	}()
	return c, nil
}

// waitSynced waits until every informer has synced, or timeout.
func (c *Caches) waitSynced(ctx context.Context, timeout time.Duration) bool {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return cache.WaitForCacheSync(ctx.Done(), c.hasSynced...)
}

// emitGone tells, as deletions, the objects prev holds that this
// generation (synced) does not: deleted while the member was away.
func (c *Caches) emitGone(prev *Caches) {
	for _, k := range c.kinds {
		known := prev.indexer(k.kind)
		if known == nil {
			continue
		}
		for _, obj := range known.List() {
			key, err := cache.MetaNamespaceKeyFunc(obj)
			if err != nil {
				continue
			}
			if _, exists, _ := k.indexer.GetByKey(key); !exists {
				k.handler.OnDelete(obj)
			}
		}
	}
}

// abandon stops c, a generation that did not replace prev: prev's
// watches go on waiting for a refusing API server until prev is stopped.
func (m *Member) abandon(c, prev *Caches) {
	if prev != nil {
		m.cachesDone.Store(&prev.ctxDone)
	}
	c.stop()
}

// stop stops the informers of this generation and waits until they have.
func (c *Caches) stop() {
	c.cancel()
	<-c.done
}

// handler turns an informer's events into Events. known, if set, is the
// previous generation's indexer of kind: an add of an object it holds at
// the same resourceVersion is nothing new. changed, if set, is called for
// every change that is not our own write coming back, before it is told.
func handler(m *Member, kind Kind, own *ownWrites, notify func(Event), known cache.Indexer, changed func()) cache.ResourceEventHandler {
	// serviceImport is obj as an import (nil for other kinds).
	serviceImport := func(obj any) *mcsv1beta1.ServiceImport {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if kind != KindImport {
			return nil
		}
		si, _ := obj.(*mcsv1beta1.ServiceImport)
		return si
	}
	emit := func(obj, before, after any) {
		m.answered.Store(time.Now().UnixNano())
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		a, err := meta.Accessor(obj)
		if err != nil {
			return
		}
		echo := false
		if own != nil && (after != nil || before != nil) {
			// Before notify: the reconcile it queues reads through own.
			echo = own.seen(kind, a, after == nil)
		}
		if !echo && changed != nil {
			changed()
		}
		ev := Event{Member: m, Kind: kind, Namespace: a.GetNamespace(), Name: a.GetName(), Before: serviceImport(before), After: serviceImport(after), Echo: echo}
		switch kind {
		case KindNamespace:
			ev.Namespace, ev.Name = a.GetName(), ""
		case KindSourceSlice:
			ev.Name = a.GetLabels()[discoveryv1.LabelServiceName]
		case KindMirroredSlice:
			ev.Name = a.GetLabels()[mcsapi.LabelServiceName]
		case KindService:
			// A derived Service (--vip-mode=derived-service) belongs to the
			// import it gives a VIP to: deleted by hand, it is recreated.
			if l := a.GetLabels(); l[mcsapi.LabelAppManagedBy] == mcsapi.ManagedByImporter && l[mcsapi.LabelDerivedFor] != "" {
				ev.Name = l[mcsapi.LabelDerivedFor]
			}
		}
		if kind != KindNamespace && ev.Name == "" {
			return
		}
		notify(ev)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if known != nil && sameAsKnown(known, obj) {
				return
			}
			emit(obj, nil, obj)
		},
		UpdateFunc: func(old, new any) {
			if o, err := meta.Accessor(old); err == nil {
				if n, err := meta.Accessor(new); err == nil && o.GetResourceVersion() == n.GetResourceVersion() {
					return
				}
			}
			// A slice whose service label changed belongs to two keys:
			// the one it left is told too. Only then: every update of a
			// mirrored slice (each of our own writes coming back) would
			// otherwise queue its key once more, as a change that is not
			// an echo.
			if (kind == KindSourceSlice || kind == KindMirroredSlice) && sliceService(kind, old) != sliceService(kind, new) {
				emit(old, nil, nil)
			}
			emit(new, old, new)
		},
		DeleteFunc: func(obj any) { emit(obj, obj, nil) },
	}
}

// sliceService is the service an EndpointSlice of kind (a source or a
// mirrored slice) belongs to, by its label.
func sliceService(kind Kind, obj any) string {
	a, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	if kind == KindSourceSlice {
		return a.GetLabels()[discoveryv1.LabelServiceName]
	}
	return a.GetLabels()[mcsapi.LabelServiceName]
}

// sameAsKnown reports whether known holds obj at the same
// resourceVersion.
func sameAsKnown(known cache.Indexer, obj any) bool {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return false
	}
	old, exists, err := known.GetByKey(key)
	if !exists || err != nil {
		return false
	}
	o, err1 := meta.Accessor(old)
	n, err2 := meta.Accessor(obj)
	return err1 == nil && err2 == nil && o.GetUID() == n.GetUID() && o.GetResourceVersion() == n.GetResourceVersion()
}

func get[T any](idx cache.Indexer, key string) *T {
	if idx == nil {
		return nil
	}
	obj, ok, err := idx.GetByKey(key)
	if err != nil || !ok {
		return nil
	}
	t, _ := obj.(*T)
	return t
}

// Export returns the ServiceExport namespace/name, or nil.
func (c *Caches) Export(namespace, name string) *mcsv1beta1.ServiceExport {
	return lookup(c.own, KindExport, namespace, name, get[mcsv1beta1.ServiceExport](c.exports, namespace+"/"+name))
}

// Import returns the ServiceImport namespace/name (whoever owns it), or nil.
func (c *Caches) Import(namespace, name string) *mcsv1beta1.ServiceImport {
	return lookup(c.own, KindImport, namespace, name, get[mcsv1beta1.ServiceImport](c.imports, namespace+"/"+name))
}

// Service returns the Service namespace/name, or nil.
func (c *Caches) Service(namespace, name string) *corev1.Service {
	return lookup(c.own, KindService, namespace, name, get[corev1.Service](c.services, namespace+"/"+name))
}

// NamespaceActive reports whether the namespace exists and is not being
// deleted (objects cannot be created in a terminating namespace).
func (c *Caches) NamespaceActive(name string) bool {
	ns := get[corev1.Namespace](c.namespaces, name)
	return ns != nil && ns.DeletionTimestamp == nil && ns.Status.Phase != corev1.NamespaceTerminating
}

func slicesBy(idx cache.Indexer, namespace, svc string) []*discoveryv1.EndpointSlice {
	if idx == nil {
		return nil
	}
	objs, err := idx.ByIndex(indexService, namespace+"/"+svc)
	if err != nil {
		return nil
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			out = append(out, s)
		}
	}
	return out
}

// SourceSlices are the EndpointSlices of Service namespace/svc (labelled
// kubernetes.io/service-name, not made by mcs-importer).
func (c *Caches) SourceSlices(namespace, svc string) []*discoveryv1.EndpointSlice {
	return slicesBy(c.source, namespace, svc)
}

// MirroredSlice returns the EndpointSlice namespace/name mcs-importer
// made (of whichever import), or nil: what MirroredSlices would list of
// that name, without listing the rest.
func (c *Caches) MirroredSlice(namespace, name string) *discoveryv1.EndpointSlice {
	if c.mirrored == nil {
		return nil
	}
	return lookup(c.own, KindMirroredSlice, namespace, name, get[discoveryv1.EndpointSlice](c.mirrored, namespace+"/"+name))
}

// MirroredChanges counts the changes this generation's cache has seen of
// mirrored slices that were not our own writes coming back (see
// ownWrites.seen), and those taken for our writes' echoes that turned out
// later than them (Member.Writing). Unchanged, nothing but our own
// writes has changed the mirrored slices since it was read.
func (c *Caches) MirroredChanges() uint64 { return c.mirroredChanges.Load() }

// MirroredSlices are the EndpointSlices mcs-importer made for the import
// namespace/svc (only on importing members).
func (c *Caches) MirroredSlices(namespace, svc string) []*discoveryv1.EndpointSlice {
	if c.mirrored == nil {
		return nil
	}
	return c.own.slices(namespace, svc, slicesBy(c.mirrored, namespace, svc))
}

// Keys returns every "namespace/name" this generation knows something
// about: ServiceExports, ServiceImports mcs-importer owns, mirrored
// slices and derived Services (by the import they were made for). A full
// resync reconciles all of them, so that nothing mcs-importer made
// outlives its import (after a restart, say). A key may be listed more
// than once (an import and its slices).
func (c *Caches) Keys() []string {
	var keys []string
	c.AddKeys(func(k string) { keys = append(keys, k) })
	return keys
}

// AddKeys calls add with each key Keys returns, without building the
// list: a full resync gathers the keys of every member into one set.
func (c *Caches) AddKeys(add func(string)) {
	for _, k := range c.exports.ListKeys() {
		add(k)
	}
	for _, o := range c.imports.List() {
		if si, ok := o.(*mcsv1beta1.ServiceImport); ok && Owned(si) {
			add(si.Namespace + "/" + si.Name)
		}
	}
	if c.mirrored != nil {
		for _, k := range c.mirrored.ListIndexFuncValues(indexService) {
			add(k)
		}
	}
	for _, o := range c.services.List() {
		if svc, ok := o.(*corev1.Service); ok && svc.Labels[mcsapi.LabelAppManagedBy] == mcsapi.ManagedByImporter {
			if imp := svc.Labels[mcsapi.LabelDerivedFor]; imp != "" {
				add(svc.Namespace + "/" + imp)
			}
		}
	}
}

// ExportKeys returns the "namespace/name" of every ServiceExport in this
// generation.
func (c *Caches) ExportKeys() []string { return c.exports.ListKeys() }

// NamespaceKeys returns the keys in namespace ns this generation knows.
func (c *Caches) NamespaceKeys(ns string) []string {
	var keys []string
	for _, o := range c.exports.List() {
		if e, ok := o.(*mcsv1beta1.ServiceExport); ok && e.Namespace == ns {
			keys = append(keys, e.Namespace+"/"+e.Name)
		}
	}
	return keys
}

// Owned reports whether mcs-importer made obj (it carries our managed-by label).
func Owned(obj metav1.Object) bool {
	return obj.GetLabels()[mcsapi.LabelManagedBy] == mcsapi.ManagedByImporter
}

// NotOwnedError says that an object holding a name mcs-importer needs is
// not one it manages: it is left alone, and what needed the name waits.
type NotOwnedError struct {
	Kind, Namespace, Name string
}

func (e *NotOwnedError) Error() string {
	return fmt.Sprintf("%s %s/%s exists and is not managed by mcs-importer; leaving it alone", e.Kind, e.Namespace, e.Name)
}

// Object names the object in the way: "Kind namespace/name".
func (e *NotOwnedError) Object() string { return e.Kind + " " + e.Namespace + "/" + e.Name }

// OwnedImports returns the ServiceImports mcs-importer made in this member.
func (c *Caches) OwnedImports() []*mcsv1beta1.ServiceImport {
	var out []*mcsv1beta1.ServiceImport
	for _, o := range c.imports.List() {
		if si, ok := o.(*mcsv1beta1.ServiceImport); ok && Owned(si) {
			out = append(out, si)
		}
	}
	return out
}

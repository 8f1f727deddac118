package members

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/slicedigest"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// ownWritesTTL bounds how long a write of ours stands in for what the
// cache shows. The cache catches up within milliseconds, seconds under
// load; the bound only matters if an event is never delivered (a relist
// that skips it), and then the cache is believed again.
const ownWritesTTL = 15 * time.Second

// ownWrites are the objects this importer wrote into one member (the
// object the API server returned, or a deletion), kept until the cache
// shows them or something newer. Reads of the objects it writes
// (imports, mirrored slices, derived Services, exports' statuses) see
// them through it: a
// reconcile that runs before the cache has caught up with the last one
// decides on what the API server holds, instead of creating an object a
// second time (refused: it exists), updating one from an old copy
// (refused: conflict) or acting on a type, VIP or endpoint set it has
// already replaced. Newer is told by resourceVersion, which the API
// server's storage makes comparable within a resource
// (resourceversion.CompareResourceVersion); where it is not, the cache
// wins.
type ownWrites struct {
	mu      sync.Mutex
	entries map[ownKey]ownEntry
	// createdSlices indexes the entries of mirrored slices written (not
	// deleted) by the import they were made for (their service-name
	// label), so that reading an import's slices (slices) finds the ones
	// the cache has not seen yet without walking every entry: in a cold
	// start under load a member's entries are thousands, read once per
	// import per pass.
	createdSlices map[importKey]map[string]struct{}
	// inflight: the objects with writes of ours sent and not yet
	// answered (see seen).
	inflight map[ownKey]*flight
	now      func() time.Time
}

type importKey struct{ namespace, name string }

type ownKey struct {
	kind      Kind
	namespace string
	name      string
}

type ownEntry struct {
	obj     runtime.Object // nil: deleted
	uid     types.UID
	rv      string // the written object's (for a deletion: the deleted one's)
	written time.Time
}

func newOwnWrites() *ownWrites {
	return &ownWrites{entries: map[ownKey]ownEntry{}, createdSlices: map[importKey]map[string]struct{}{}, inflight: map[ownKey]*flight{}, now: time.Now}
}

// put records e under k, and drop forgets k; both keep createdSlices in
// step with entries. The caller holds mu.
func (w *ownWrites) put(k ownKey, e ownEntry) {
	w.drop(k)
	w.entries[k] = e
	if ik, ok := sliceImport(k, e); ok {
		names := w.createdSlices[ik]
		if names == nil {
			names = map[string]struct{}{}
			w.createdSlices[ik] = names
		}
		names[k.name] = struct{}{}
	}
}

func (w *ownWrites) drop(k ownKey) {
	e, ok := w.entries[k]
	if !ok {
		return
	}
	delete(w.entries, k)
	if ik, ok := sliceImport(k, e); ok {
		names := w.createdSlices[ik]
		delete(names, k.name)
		if len(names) == 0 {
			delete(w.createdSlices, ik)
		}
	}
}

// sliceImport is the import a written (not deleted) mirrored slice's
// entry belongs to.
func sliceImport(k ownKey, e ownEntry) (importKey, bool) {
	if k.kind != KindMirroredSlice || e.obj == nil {
		return importKey{}, false
	}
	s, ok := e.obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return importKey{}, false
	}
	return importKey{k.namespace, s.Labels[mcsapi.LabelServiceName]}, true
}

// kindOf is the cache kind of an object this importer writes (ok false
// for others).
func kindOf(obj runtime.Object) (Kind, bool) {
	switch o := obj.(type) {
	case *mcsv1beta1.ServiceImport:
		return KindImport, true
	case *mcsv1beta1.ServiceExport:
		return KindExport, true // its status is ours to write
	case *discoveryv1.EndpointSlice:
		return KindMirroredSlice, Owned(o)
	case *corev1.Service:
		return KindService, true
	}
	return 0, false
}

// wrote records obj, as the API server returned it from a create or an
// update.
func (w *ownWrites) wrote(obj runtime.Object) {
	kind, ok := kindOf(obj)
	if s, mirrored := obj.(*discoveryv1.EndpointSlice); ok && mirrored {
		obj = slicedigest.Slim(s) // as the cache keeps it
	}
	a, err := meta.Accessor(obj)
	if !ok || err != nil || a.GetResourceVersion() == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	k := ownKey{kind, a.GetNamespace(), a.GetName()}
	if e, ok := w.entries[k]; ok && e.obj != nil && newer(e.rv, a.GetResourceVersion()) {
		return // a later write of ours is recorded already
	}
	w.put(k, ownEntry{obj: obj, uid: a.GetUID(), rv: a.GetResourceVersion(), written: w.now()})
}

// deleted records the deletion of the object of that kind, name and UID.
func (w *ownWrites) deleted(kind Kind, namespace, name string, uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.put(ownKey{kind, namespace, name}, ownEntry{uid: uid, written: w.now()})
}

// newer reports whether resourceVersion a is later than b; false when
// either cannot be compared.
func newer(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c > 0
}

// seen is called with every object the cache of that kind receives (nil
// obj with a deletion): an entry the cache has caught up with goes. It
// reports whether the object is exactly our last write (that version, or
// our deletion of that UID): the echo of a write whose reconcile has
// accounted for it already. An object changed while a write of ours to it
// is in flight (sent, not yet answered and recorded) counts as an echo
// too: the watch often delivers our write before its answer arrives. It
// is ours if that write succeeds (the write carries the resourceVersion
// it read, so someone else's change in between makes it fail), and if it
// fails the pass fails and its key is reconciled again.
func (w *ownWrites) seen(kind Kind, a metav1.Object, deleted bool) (echo bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := ownKey{kind, a.GetNamespace(), a.GetName()}
	if f := w.inflight[k]; f != nil && !deleted {
		if f.latest == "" || newer(a.GetResourceVersion(), f.latest) {
			f.latest = a.GetResourceVersion()
		}
		defer func() { echo = true }()
	}
	e, ok := w.entries[k]
	if !ok {
		return false
	}
	switch {
	case e.obj == nil:
		// Our deletion: done once the cache loses that object.
		if deleted && a.GetUID() == e.uid {
			w.drop(k)
			return true
		}
	case deleted:
		// Someone deleted it after our write (the cache had it).
		if a.GetUID() == e.uid {
			w.drop(k)
		}
	case !newer(e.rv, a.GetResourceVersion()):
		w.drop(k) // the cache shows our write, or later
		return e.rv == a.GetResourceVersion()
	}
	return false
}

// resolve returns what a read of cached (nil: absent from the cache)
// should see: the cache, or our newer write (nil for our deletion).
func (w *ownWrites) resolve(kind Kind, namespace, name string, cached metav1.Object) (runtime.Object, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := ownKey{kind, namespace, name}
	e, ok := w.entries[k]
	if !ok {
		return nil, false
	}
	if w.now().Sub(e.written) > ownWritesTTL {
		w.drop(k)
		return nil, false
	}
	if e.obj == nil {
		if cached != nil && cached.GetUID() == e.uid {
			return nil, true // deleted by us; the cache has not seen it yet
		}
		return nil, false
	}
	if cached != nil && !newer(e.rv, cached.GetResourceVersion()) {
		w.drop(k)
		return nil, false
	}
	return e.obj, true
}

// lookup is get through w.
func lookup[T any, P interface {
	*T
	runtime.Object
	metav1.Object
}](w *ownWrites, kind Kind, namespace, name string, cached P) P {
	if w == nil {
		return cached
	}
	var c metav1.Object
	if cached != nil {
		c = cached
	}
	obj, ok := w.resolve(kind, namespace, name, c)
	if !ok {
		return cached
	}
	if obj == nil {
		return nil
	}
	p, _ := obj.(P)
	return p
}

// slices is the mirrored slices of import namespace/svc, cached, with our
// newer writes in place of the cache's copies (added where the cache has
// not seen their creation, left out where it has not seen their
// deletion).
func (w *ownWrites) slices(namespace, svc string, cached []*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	if w == nil {
		return cached
	}
	w.mu.Lock()
	empty := len(w.entries) == 0
	w.mu.Unlock()
	if empty {
		return cached
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(cached))
	inCache := make(map[string]bool, len(cached))
	for _, s := range cached {
		inCache[s.Name] = true
		if got := lookup(w, KindMirroredSlice, namespace, s.Name, s); got != nil {
			out = append(out, got)
		}
	}
	w.mu.Lock()
	var created []ownKey
	for name := range w.createdSlices[importKey{namespace, svc}] {
		if !inCache[name] {
			created = append(created, ownKey{KindMirroredSlice, namespace, name})
		}
	}
	w.mu.Unlock()
	for _, k := range created {
		if got := lookup[discoveryv1.EndpointSlice](w, KindMirroredSlice, k.namespace, k.name, nil); got != nil {
			out = append(out, got)
		}
	}
	return out
}

// flight is an object's writes in flight: how many, and the latest
// resourceVersion the cache saw of it meanwhile.
type flight struct {
	writes int
	latest string
}

// writing marks a write of ours to the object of that kind and name as in
// flight until the returned function is called (after the write's answer
// is recorded, or it failed). That function reports whether the cache saw
// a version of the object later than our recorded write while it was in
// flight: someone else's change after ours, taken as our echo, which must
// be reconciled after all.
func (w *ownWrites) writing(kind Kind, namespace, name string) func() (changedSince bool) {
	k := ownKey{kind, namespace, name}
	w.mu.Lock()
	f := w.inflight[k]
	if f == nil {
		f = &flight{}
		w.inflight[k] = f
	}
	f.writes++
	w.mu.Unlock()
	return func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		if f.writes--; f.writes > 0 {
			return false // the last one answered tells
		}
		delete(w.inflight, k)
		e, ok := w.entries[k]
		return f.latest != "" && ok && e.obj != nil && newer(f.latest, e.rv)
	}
}

// Writing marks a create or update of ours of the object of that kind,
// namespace and name in m as in flight, until the returned function is
// called: call it after RecordWrite (or the write's failure). Changes the
// cache sees meanwhile are taken as the write's echo (see
// ownWrites.seen). When one of them turns out later than the write
// recorded (someone else's change), done tells it as a change that is not
// an echo, of the key namespace/svc (the import the object is made for, or
// the export whose status was written): it is reconciled, and for a
// mirrored slice counted in MirroredChanges.
func (m *Member) Writing(kind Kind, namespace, name, svc string) (done func()) {
	c := m.Caches()
	if c == nil || c.own == nil {
		return func() {}
	}
	changedSince := c.own.writing(kind, namespace, name)
	return func() {
		if !changedSince() {
			return
		}
		if kind == KindMirroredSlice {
			c.mirroredChanges.Add(1)
		}
		if c.notify != nil {
			c.notify(Event{Member: m, Kind: kind, Namespace: namespace, Name: svc})
		}
	}
}

// RecordWrite records obj, as the API server returned it from a create or
// an update this importer made, in m's current caches (see ownWrites).
// Objects of kinds it does not write are ignored.
func (m *Member) RecordWrite(obj runtime.Object) {
	if c := m.Caches(); c != nil && c.own != nil {
		c.own.wrote(obj)
	}
}

// RecordDelete records that this importer deleted obj (or found it gone).
func (m *Member) RecordDelete(obj runtime.Object) {
	c := m.Caches()
	kind, ok := kindOf(obj)
	a, err := meta.Accessor(obj)
	if c == nil || c.own == nil || !ok || err != nil {
		return
	}
	c.own.deleted(kind, a.GetNamespace(), a.GetName(), a.GetUID())
}

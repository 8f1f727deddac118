package members

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/slicedigest"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

func ownImport(uid types.UID, rv string, typ mcsv1beta1.ServiceImportType) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: uid, ResourceVersion: rv,
			Labels: map[string]string{mcsapi.LabelManagedBy: mcsapi.ManagedByImporter}},
		Spec: mcsv1beta1.ServiceImportSpec{Type: typ},
	}
}

func ownSlice(name, rv string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), ResourceVersion: rv,
		Labels: map[string]string{mcsapi.LabelManagedBy: mcsapi.ManagedByImporter, mcsapi.LabelServiceName: "web"}}}
}

// A write of ours stands in for the cache until the cache shows it or
// something newer; a deletion hides the deleted object until the cache
// loses it.
func TestOwnWrites(t *testing.T) {
	imp := func(w *ownWrites, cached *mcsv1beta1.ServiceImport) *mcsv1beta1.ServiceImport {
		return lookup(w, KindImport, "ns", "web", cached)
	}
	t.Run("a create the cache has not seen", func(t *testing.T) {
		w := newOwnWrites()
		created := ownImport("u1", "10", mcsv1beta1.ClusterSetIP)
		w.wrote(created)
		assert.Same(t, created, imp(w, nil))
		w.seen(KindImport, created.DeepCopy(), false)
		assert.Nil(t, imp(w, nil), "seen by the cache: the cache is believed again")
	})
	t.Run("echoes: exactly our last write, or our deletion", func(t *testing.T) {
		w := newOwnWrites()
		w.wrote(ownImport("u1", "12", mcsv1beta1.ClusterSetIP))
		assert.False(t, w.seen(KindImport, ownImport("u1", "11", mcsv1beta1.Headless), false), "an older version is no echo")
		assert.True(t, w.seen(KindImport, ownImport("u1", "12", mcsv1beta1.ClusterSetIP), false), "our write")
		assert.False(t, w.seen(KindImport, ownImport("u1", "12", mcsv1beta1.ClusterSetIP), false), "once")
		w.wrote(ownImport("u1", "14", mcsv1beta1.ClusterSetIP))
		assert.False(t, w.seen(KindImport, ownImport("u1", "15", mcsv1beta1.Headless), false), "someone wrote after us")
		w.deleted(KindImport, "ns", "web", "u1")
		assert.False(t, w.seen(KindImport, ownImport("u2", "20", mcsv1beta1.ClusterSetIP), true), "another object's deletion")
		assert.True(t, w.seen(KindImport, ownImport("u1", "15", mcsv1beta1.ClusterSetIP), true), "our deletion")
		assert.False(t, w.seen(KindImport, ownImport("u3", "30", mcsv1beta1.ClusterSetIP), false), "nothing recorded")
	})
	t.Run("an update over an older copy", func(t *testing.T) {
		w := newOwnWrites()
		old := ownImport("u1", "10", mcsv1beta1.Headless)
		upd := ownImport("u1", "12", mcsv1beta1.ClusterSetIP)
		w.wrote(upd)
		assert.Same(t, upd, imp(w, old), "the cache's copy is older")
		later := ownImport("u1", "15", mcsv1beta1.Headless)
		assert.Same(t, later, imp(w, later), "someone wrote after us: the cache's is newer")
		assert.Same(t, old, imp(w, old), "and the entry is gone")
	})
	t.Run("an older write never replaces a newer one", func(t *testing.T) {
		w := newOwnWrites()
		w.wrote(ownImport("u1", "12", mcsv1beta1.ClusterSetIP))
		w.wrote(ownImport("u1", "11", mcsv1beta1.Headless))
		assert.Equal(t, "12", imp(w, nil).ResourceVersion)
	})
	t.Run("a deletion", func(t *testing.T) {
		w := newOwnWrites()
		gone := ownImport("u1", "10", mcsv1beta1.ClusterSetIP)
		w.deleted(KindImport, "ns", "web", "u1")
		assert.Nil(t, imp(w, gone), "the cache still has what we deleted")
		again := ownImport("u2", "20", mcsv1beta1.ClusterSetIP)
		assert.Same(t, again, imp(w, again), "another object of the name is the cache's")
		w.seen(KindImport, gone, true)
		assert.Same(t, gone, imp(w, gone), "the cache saw the deletion: the entry is gone")
	})
	t.Run("someone deleted our write", func(t *testing.T) {
		w := newOwnWrites()
		created := ownImport("u1", "10", mcsv1beta1.ClusterSetIP)
		w.wrote(created)
		w.seen(KindImport, created, true)
		assert.Nil(t, imp(w, nil))
	})
	t.Run("expired", func(t *testing.T) {
		w := newOwnWrites()
		now := time.Now()
		w.now = func() time.Time { return now }
		w.wrote(ownImport("u1", "10", mcsv1beta1.ClusterSetIP))
		now = now.Add(ownWritesTTL + time.Second)
		assert.Nil(t, imp(w, nil), "an event never delivered does not hide the cache for long")
	})
	t.Run("resourceVersions that do not compare", func(t *testing.T) {
		w := newOwnWrites()
		w.wrote(ownImport("u1", "a10", mcsv1beta1.ClusterSetIP))
		cached := ownImport("u1", "b7", mcsv1beta1.Headless)
		assert.Same(t, cached, imp(w, cached), "the cache wins")
	})
	t.Run("kinds it does not write", func(t *testing.T) {
		w := newOwnWrites()
		foreign := ownSlice("theirs", "5")
		foreign.Labels[mcsapi.LabelManagedBy] = "someone-else"
		w.wrote(foreign)
		w.wrote(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", ResourceVersion: "3"}})
		assert.Empty(t, w.entries)
	})
	t.Run("mirrored slices", func(t *testing.T) {
		w := newOwnWrites()
		kept, updated, deleted := ownSlice("kept", "5"), ownSlice("updated", "5"), ownSlice("deleted", "5")
		newer, created := ownSlice("updated", "9"), ownSlice("created", "8")
		other := ownSlice("other", "8")
		other.Labels[mcsapi.LabelServiceName] = "db"
		w.wrote(newer)
		w.wrote(created)
		w.wrote(other)
		w.deleted(KindMirroredSlice, "ns", "deleted", "deleted")
		got := w.slices("ns", "web", []*discoveryv1.EndpointSlice{kept, updated, deleted})
		nameRV := func(ss []*discoveryv1.EndpointSlice) []string {
			var out []string
			for _, s := range ss {
				out = append(out, s.Name+"@"+s.ResourceVersion)
			}
			return out
		}
		// Our writes are recorded slim: compared by name and version.
		assert.ElementsMatch(t, nameRV([]*discoveryv1.EndpointSlice{kept, newer, created}), nameRV(got))
		assert.Equal(t, []string{"other@8"}, nameRV(w.slices("ns", "db", nil)), "another import's")

		// The index of created slices follows the entries as they go:
		// seen by the cache, replaced by a deletion, expired.
		w.seen(KindMirroredSlice, created, false)
		assert.ElementsMatch(t, nameRV([]*discoveryv1.EndpointSlice{kept, newer}), nameRV(w.slices("ns", "web", []*discoveryv1.EndpointSlice{kept, updated})))
		w.deleted(KindMirroredSlice, "ns", "updated", "updated")
		assert.Equal(t, map[importKey]map[string]struct{}{{"ns", "db"}: {"other": {}}}, w.createdSlices)
		now := time.Now().Add(ownWritesTTL + time.Second)
		w.now = func() time.Time { return now }
		assert.Empty(t, w.slices("ns", "db", nil), "expired")
		assert.Empty(t, w.createdSlices)
	})
}

// Reading an import's slices costs the same however many other writes of
// the member are recorded (a cold start under load records thousands).
func BenchmarkOwnWritesSlices(b *testing.B) {
	for _, others := range []int{0, 10000} {
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) {
			w := newOwnWrites()
			for i := range others {
				s := ownSlice(fmt.Sprintf("s%d", i), "5")
				s.Labels[mcsapi.LabelServiceName] = fmt.Sprintf("svc%d", i%500)
				w.wrote(s)
			}
			w.wrote(ownSlice("web-new", "7"))
			cached := []*discoveryv1.EndpointSlice{ownSlice("web-a", "3"), ownSlice("web-b", "3")}
			b.ReportAllocs()
			for b.Loop() {
				if len(w.slices("ns", "web", cached)) != 3 {
					b.Fatal("want the two cached slices and the created one")
				}
			}
		})
	}
}

// Mirrored slices are held slim, by the informers' transform and by the
// record of our own writes alike: their endpoints give way to a digest;
// nothing else of the importer's is changed.
func TestMirroredSlicesHeldSlim(t *testing.T) {
	full := ownSlice("web-east", "10")
	full.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}
	digest := slicedigest.Of(full)

	got, err := transform(full.DeepCopy())
	assert.NoError(t, err)
	cached := got.(*discoveryv1.EndpointSlice)
	assert.Nil(t, cached.Endpoints, "the cache holds no endpoints of ours")
	assert.Equal(t, digest, slicedigest.Of(cached))

	w := newOwnWrites()
	w.wrote(full)
	recorded := lookup(w, KindMirroredSlice, "ns", "web-east", (*discoveryv1.EndpointSlice)(nil))
	assert.Nil(t, recorded.Endpoints, "nor does the record of our writes")
	assert.Equal(t, digest, slicedigest.Of(recorded))
	assert.Len(t, full.Endpoints, 1, "what was written is left alone")

	source := full.DeepCopy()
	source.Labels[mcsapi.LabelManagedBy] = "endpointslice-controller.k8s.io"
	got, err = transform(source)
	assert.NoError(t, err)
	assert.Len(t, got.(*discoveryv1.EndpointSlice).Endpoints, 1, "source slices are kept whole")
}

// A change the cache sees while a write of ours to that object is in
// flight is taken as its echo (the watch often delivers the write before
// its answer is recorded); before and after, only the recorded write is.
// One later than the write recorded is reported when the write is done.
func TestOwnWritesInFlight(t *testing.T) {
	w := newOwnWrites()
	seen := func(rv string) bool { return w.seen(KindMirroredSlice, ownSlice("a", rv), false) }

	assert.False(t, seen("5"), "nothing of ours")
	done := w.writing(KindMirroredSlice, "ns", "a")
	assert.True(t, seen("6"), "while our write is in flight")
	assert.False(t, w.seen(KindMirroredSlice, ownSlice("a", "6"), true), "a deletion is never our update's echo")
	assert.False(t, w.seen(KindMirroredSlice, ownSlice("b", "6"), false), "another object")
	assert.False(t, w.seen(KindImport, ownSlice("a", "6"), false), "another kind")
	w.wrote(ownSlice("a", "7"))
	assert.False(t, done(), "the cache saw nothing later than the write")
	assert.True(t, seen("7"), "the recorded write itself, after it was answered")
	assert.False(t, seen("8"), "a later change, nothing in flight")

	// Our write (9) and someone else's after it (10) both seen in flight:
	// the later one is reported.
	done = w.writing(KindMirroredSlice, "ns", "a")
	assert.True(t, seen("9"))
	assert.True(t, seen("10"))
	w.wrote(ownSlice("a", "9"))
	assert.True(t, done(), "a change later than our write was taken as its echo")

	// A failed write (nothing recorded) reports nothing: its pass fails
	// and is retried.
	done = w.writing(KindMirroredSlice, "ns", "b")
	assert.True(t, w.seen(KindMirroredSlice, ownSlice("b", "3"), false))
	assert.False(t, done())

	// Two writes in flight: the object stays in flight until both are
	// answered.
	done1 := w.writing(KindMirroredSlice, "ns", "a")
	done2 := w.writing(KindMirroredSlice, "ns", "a")
	assert.False(t, done1())
	assert.True(t, seen("11"))
	w.wrote(ownSlice("a", "11"))
	assert.False(t, done2())
	assert.False(t, seen("12"))
	assert.Empty(t, w.inflight, "nothing left behind")
}

// Member.Writing tells a change later than the write, taken for its echo
// while it was in flight, as a change of the key it was made for (one
// event, not an echo), and counts it for a mirrored slice.
func TestMemberWritingTellsALaterChange(t *testing.T) {
	var got []Event
	c := &Caches{own: newOwnWrites(), notify: func(ev Event) { got = append(got, ev) }}
	m := &Member{ID: "east"}
	m.health.caches = c

	done := m.Writing(KindMirroredSlice, "ns", "web-east-abc", "web")
	assert.True(t, c.own.seen(KindMirroredSlice, ownSlice("web-east-abc", "6"), false))
	c.own.wrote(ownSlice("web-east-abc", "6"))
	done()
	assert.Empty(t, got, "only our own write was seen")
	assert.Zero(t, c.MirroredChanges())

	done = m.Writing(KindMirroredSlice, "ns", "web-east-abc", "web")
	assert.True(t, c.own.seen(KindMirroredSlice, ownSlice("web-east-abc", "8"), false))
	c.own.wrote(ownSlice("web-east-abc", "7"))
	done()
	if assert.Len(t, got, 1) {
		assert.Equal(t, Event{Member: m, Kind: KindMirroredSlice, Namespace: "ns", Name: "web"}, got[0])
	}
	assert.Equal(t, uint64(1), c.MirroredChanges())

	// Without caches (a member not joined) there is nothing to tell.
	done = (&Member{ID: "west"}).Writing(KindImport, "ns", "web", "web")
	done()
	assert.Len(t, got, 1)
}

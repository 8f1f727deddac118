package controller

import (
	"maps"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/mcs-dns/mcs-dns/importer/aggregate"
	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/importer/slicedigest"
	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// appliedSlices remembers which members hold exactly the mirrored slices
// a key's last pass wanted, so that the next pass compares with a
// member's copies only the slices whose wanted content changed since,
// instead of every slice of the key in every member. A service every
// member exports has a slice per exporter in every member: comparing
// them all on each pass made the importer's CPU per write grow with the
// members, while one endpoint change alters one of those slices.
//
// A member counts as holding a pass's slices only when that pass wrote
// its whole plan there without an error or a name held by someone else,
// and stops counting when anything but our own writes changed its
// mirrored slices (Caches.MirroredChanges), its caches were made anew,
// the VIP assignment's labels or port names differ, or a pass of the key
// went by without it; then, and at every periodic resync (newEpoch), the
// next pass compares every slice, as it always did.
type appliedSlices struct {
	mu    sync.Mutex
	epoch uint64
	keys  map[string]*keySlices
}

// keySlices is what one key's passes wanted, and which members hold it.
type keySlices struct {
	mu sync.Mutex
	// pass counts the key's passes that computed its slices.
	pass uint64
	// wanted: the slices the last pass wanted, by name (shared by every
	// member, before a VIP assignment's labels).
	wanted  map[string]*discoveryv1.EndpointSlice
	members map[string]memberSlices
	// vips: the VIP assignments' labels and port names the members hold,
	// each once (every member's is mostly the same).
	vips []*vipNames
}

// memberSlices says that a member held, after pass, the slices the key
// wanted then, and what that was decided on.
type memberSlices struct {
	pass, epoch uint64
	caches      *members.Caches
	changes     uint64
	vip         *vipNames
}

// vipNames are a VIP assignment's slice labels and port names.
type vipNames struct {
	labels, portNames map[string]string
}

func (n *vipNames) of(asg vip.Assignment) bool {
	return maps.Equal(n.labels, asg.SliceLabels) && maps.Equal(n.portNames, asg.SlicePortNames)
}

// maxVIPNames bounds keySlices.vips: past it the list starts again (a
// member holding a dropped one is compared in full once).
const maxVIPNames = 4

// sliceChanges is what a key's wanted slices changed by since its
// previous pass, for the members holding that pass's slices.
type sliceChanges struct {
	ks          *keySlices
	pass, epoch uint64
	// changed: the names wanted now whose slice is new or differs, in
	// the order wanted.
	changed []*discoveryv1.EndpointSlice
	// gone: the names wanted before and not now.
	gone []string
}

func newAppliedSlices() *appliedSlices {
	return &appliedSlices{keys: map[string]*keySlices{}}
}

// newEpoch makes every member compare all of its slices at the next pass
// of each key: the periodic resync catches what nothing told.
func (a *appliedSlices) newEpoch() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.epoch++
}

// advance records the slices key's pass wants (stamped with their
// digests) and returns how they differ from the previous pass's. With
// nothing wanted the key is forgotten (nil): a pass removing every slice
// compares them all.
func (a *appliedSlices) advance(key string, wanted []*discoveryv1.EndpointSlice) *sliceChanges {
	a.mu.Lock()
	epoch := a.epoch
	ks := a.keys[key]
	if len(wanted) == 0 {
		delete(a.keys, key)
		a.mu.Unlock()
		return nil
	}
	if ks == nil {
		ks = &keySlices{members: map[string]memberSlices{}}
		a.keys[key] = ks
	}
	a.mu.Unlock()

	ks.mu.Lock()
	defer ks.mu.Unlock()
	ch := &sliceChanges{ks: ks, epoch: epoch}
	now := make(map[string]*discoveryv1.EndpointSlice, len(wanted))
	for _, d := range wanted {
		now[d.Name] = d
		if prev := ks.wanted[d.Name]; prev == nil || !sameWanted(prev, d) {
			ch.changed = append(ch.changed, d)
		}
	}
	for name := range ks.wanted {
		if now[name] == nil {
			ch.gone = append(ch.gone, name)
		}
	}
	ks.pass++
	ch.pass = ks.pass
	ks.wanted = now
	return ch
}

// sameWanted reports whether two wanted slices of one name ask the same
// of a member's copy: what planSlices compares.
func sameWanted(a, b *discoveryv1.EndpointSlice) bool {
	return a.AddressType == b.AddressType && slicedigest.Of(a) == slicedigest.Of(b) &&
		maps.Equal(a.Labels, b.Labels) && aggregate.SlicesPortsEqual(a.Ports, b.Ports)
}

// since returns the slices changed since the previous pass if member m,
// whose caches are c and had seen changes mirrored-slice changes when the
// pass began, holds that pass's slices with the same VIP assignment;
// ok false: every slice must be compared.
func (ch *sliceChanges) since(m string, c *members.Caches, changes uint64, asg vip.Assignment) (ok bool) {
	if ch == nil {
		return false
	}
	ch.ks.mu.Lock()
	held, found := ch.ks.members[m]
	ch.ks.mu.Unlock()
	return found && held.pass+1 == ch.pass && held.epoch == ch.epoch && held.caches == c && held.changes == changes &&
		held.vip.of(asg)
}

// applied records that member m holds this pass's slices, decided with
// its caches c at changes and the VIP assignment asg.
func (ch *sliceChanges) applied(m string, c *members.Caches, changes uint64, asg vip.Assignment) {
	if ch == nil {
		return
	}
	ks := ch.ks
	ks.mu.Lock()
	defer ks.mu.Unlock()
	var names *vipNames
	for _, n := range ks.vips {
		if n.of(asg) {
			names = n
			break
		}
	}
	if names == nil {
		if len(ks.vips) == maxVIPNames {
			ks.vips = nil
		}
		names = &vipNames{labels: maps.Clone(asg.SliceLabels), portNames: maps.Clone(asg.SlicePortNames)}
		ks.vips = append(ks.vips, names)
	}
	ks.members[m] = memberSlices{pass: ch.pass, epoch: ch.epoch, caches: c, changes: changes, vip: names}
}

// forget records that member m may not hold this pass's slices.
func (ch *sliceChanges) forget(m string) {
	if ch == nil {
		return
	}
	ch.ks.mu.Lock()
	defer ch.ks.mu.Unlock()
	delete(ch.ks.members, m)
}

// planChangedSlices is planSlices for a member holding the previous
// pass's slices: only the changed ones and those no longer wanted are
// looked up (by name, through get) and compared. ok false: a slice of
// that name belongs to another import, which only a full plan sorts out.
func planChangedSlices(ch *sliceChanges, svc string, get func(name string) *discoveryv1.EndpointSlice, asg vip.Assignment) (p slicePlan, ok bool) {
	for _, d := range ch.changed {
		a := get(d.Name)
		if a != nil && a.Labels[mcsapi.LabelServiceName] != svc {
			return slicePlan{}, false
		}
		p.plan(d, a, asg)
	}
	for _, name := range ch.gone {
		a := get(name)
		if a == nil {
			continue
		}
		if a.Labels[mcsapi.LabelServiceName] != svc {
			return slicePlan{}, false
		}
		p.remove = append(p.remove, a)
	}
	sortRemovals(p.remove)
	return p, true
}

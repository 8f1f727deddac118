package controller

import (
	"strings"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/importer/vip"
)

func (c *Controller) hasExport(ns, name string) bool {
	for _, m := range c.set.Members() {
		if mc := m.Caches(); mc != nil && mc.Export(ns, name) != nil {
			return true
		}
	}
	return false
}

// Notify turns an informer event into work.
func (c *Controller) Notify(ev members.Event) {
	if ev.Echo {
		// Our own write coming back: no reconcile (at 20 members, one
		// endpoint change is 20 mirrored-slice writes, each of which would
		// otherwise queue the key again), but the clusterset-wide VIPs
		// still follow every import.
		c.importChanged(ev)
		return
	}
	switch ev.Kind {
	case members.KindNamespace:
		// The import appears when the namespace does.
		for _, m := range c.set.Members() {
			if mc := m.Caches(); mc != nil {
				for _, k := range mc.NamespaceKeys(ev.Namespace) {
					c.addServe(k)
				}
			}
		}
	case members.KindService, members.KindSourceSlice:
		// Only exported Services matter; an export event enqueues the key
		// itself, so nothing is missed when the Service comes first.
		if c.hasExport(ev.Namespace, ev.Name) {
			c.prop.changed(key(ev.Namespace, ev.Name), sourceID(ev), time.Now())
			c.addServe(key(ev.Namespace, ev.Name))
		}
	case members.KindExport:
		c.prop.changed(key(ev.Namespace, ev.Name), sourceID(ev), time.Now())
		c.addServe(key(ev.Namespace, ev.Name))
	default:
		c.addServe(key(ev.Namespace, ev.Name))
	}
	c.importChanged(ev)
}

// importChanged: the clusterset-wide VIPs follow the imports; imports the
// pool had no address for try again when one may have been freed.
func (c *Controller) importChanged(ev members.Event) {
	if ev.Kind != members.KindImport {
		return
	}
	if w, ok := c.vip.(vip.ClusterSetIPs); ok {
		for _, k := range w.ImportChanged(ev) {
			c.addServe(k)
		}
	}
}

// OnChange handles a member's state change. A member out of reach within
// its grace period keeps its last known state served, and nothing is
// written to it, so its going changes no answer: nothing is reconciled.
// Back within the grace period, the keys reconciled while it was away
// are reconciled again (missedWrites). Any other change (a member joined,
// back after the grace period, or withdrawn) has every key reconciled
// again, including, when it went down, the keys only it knew. A
// withdrawal is logged once, with the number of services it affects, and
// counted.
func (c *Controller) OnChange(ch members.Change) {
	c.refreshMemberStates(ch.Context)
	switch {
	case ch.State == members.Unreachable:
		return
	case ch.State == members.Up && ch.Returned:
		for k := range c.missed.take(ch.Context) {
			c.addServe(k)
		}
		return
	}
	c.missed.take(ch.Context)
	if ch.State == members.Down {
		c.metrics.Withdrawals.WithLabelValues(ch.Cluster()).Inc()
		if ch.Dropped != nil {
			c.log.Warn("member cluster withdrawn after the grace period: its exports are no longer imported",
				"cluster", ch.Cluster(), "services", len(ch.Dropped.ExportKeys()), "reason", ch.Reason)
		} else {
			c.log.Warn("member cluster not seen within the grace period since the start: imports and endpoints that may have come from it are reconciled again",
				"context", ch.Context, "services", c.frozenServices(), "reason", ch.Reason)
		}
	}
	keys := c.allKeys()
	if ch.Dropped != nil {
		ch.Dropped.AddKeys(func(k string) { keys[k] = struct{}{} })
	}
	for k := range keys {
		c.addServe(k)
	}
}

// frozenServices counts the keys left as they are in some member.
func (c *Controller) frozenServices() int {
	keys := map[string]bool{}
	for _, k := range c.frozen.Keys() {
		_, nk, _ := strings.Cut(k, "/") // "cluster/ns/name"; IDs hold no '/'
		keys[nk] = true
	}
	return len(keys)
}

// refreshMemberStates sets the member_state series of the member reached
// through context (of every member when context is ""), to the state the
// Set holds now. Changes are reported from several goroutines and may
// arrive out of order, so the state is read, not taken from the change;
// and it is read under stateMu, so that a report that read an older state
// cannot set the gauge after one that read a newer state (a withdrawn
// member shown unreachable).
func (c *Controller) refreshMemberStates(context string) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	for _, st := range c.set.Statuses() {
		if context == "" || st.Context == context {
			c.setMemberState(st.Context, st.Cluster, st.State)
		}
	}
}

// setMemberState sets the member_state series of a member (under
// stateMu): labelled with its kubeconfig context, and with its cluster ID
// once it has joined (its context before: the series under the context
// goes when the ID differs).
func (c *Controller) setMemberState(context, cluster string, s members.State) {
	if prev, ok := c.stateLabel[context]; ok && prev != cluster {
		for _, st := range members.States {
			c.metrics.MemberState.DeleteLabelValues(prev, context, st.String())
		}
	}
	c.stateLabel[context] = cluster
	for _, st := range members.States {
		v := 0.0
		if st == s {
			v = 1
		}
		c.metrics.MemberState.WithLabelValues(cluster, context, st.String()).Set(v)
	}
}

// EnqueueAll queues a serve pass of every key any member knows: a full
// resync.
func (c *Controller) EnqueueAll() {
	for k := range c.allKeys() {
		c.addServe(k)
	}
}

// resyncAll queues a full pass of every key any member knows, at a full
// pass's priority (behind every serve pass): the periodic resync. It only
// catches what was missed, so it need not be quick, and one full pass
// does all that a serve pass and the full pass that follows it would,
// comparing every member's copies once instead of twice. The passes are
// not owed (oweFull): under a stream of
// changes the keys that change get their full passes anyway, and every
// key's resync promoted ahead of the changes at once would hold them
// back.
func (c *Controller) resyncAll() {
	// Every member's copies are compared in full once more.
	c.applied.newEpoch()
	for k := range c.allKeys() {
		c.queue.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(0)}, item{k, passFull})
	}
}

// allKeys is the set of every key any member's caches know. Each key goes
// into the queue once per resync: every member knows most keys (M members
// each hold every import), and M adds of each key on every member's state
// change cost the queue M times the work and its add buffer M times the
// memory for nothing.
func (c *Controller) allKeys() map[string]struct{} {
	keys := map[string]struct{}{}
	for _, m := range c.set.Members() {
		if mc := m.Caches(); mc != nil {
			mc.AddKeys(func(k string) { keys[k] = struct{}{} })
		}
	}
	return keys
}

// sourceID is the cluster ID of the member an event came from.
func sourceID(ev members.Event) string {
	if ev.Member == nil {
		return ""
	}
	return ev.Member.ID
}

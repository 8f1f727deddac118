package vip

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// ReasonClusterSetIPExhausted is the import's Ready=False reason when the
// ClusterSet CIDR has no address left for it.
const ReasonClusterSetIPExhausted = "ClusterSetIPExhausted"

// CIDR is --vip-mode=clusterset-cidr: one VIP per import, the same in every
// member cluster, from the ClusterSet CIDR(s), for the imports whose
// exports opt in (the aggregate marks them with
// mcs-dns.io/use-clusterset-ip=true).
//
// Its state is the imports themselves: every import carries its VIP in
// spec.ips and in the mcs-dns.io/clusterset-ip annotation, in every
// importing cluster. A restarted importer, another importer with
// --import-into, or the clusterset after the allocating cluster left, all
// read the same claims back from the member clusters and Pool.Choose, being
// deterministic, gives them the same answer. Between a decision and its
// write showing up in the caches, this process remembers its own decisions
// (pending), so the clusters it writes in one reconcile never disagree.
// The imports of a member that cannot be read stay claimed: its last cache
// generation while this process has seen it, else what an earlier process
// recorded (members.Set.AwayClaims, from the member record).
//
// The claims are indexed (claimIndex): each member's cache generation is
// read whole once, when it is first seen, and then follows the import
// events (ImportChanged); decisions enter and leave it with Assign and
// Release. An assignment reads only the addresses it probes.
type CIDR struct {
	// Default is --clusterset-ip-default: whether an export without the
	// mcs-dns.io/use-clusterset-ip annotation asks for a VIP.
	Default bool

	pool    *Pool
	members Members
	now     func() time.Time

	// mu makes reading the claims, choosing and recording the decision
	// one step: two imports woken by the same freed address must not both
	// take it.
	mu sync.Mutex
	// index holds the claims of every generation in gens and the pending
	// decisions (source pendingSource).
	index *claimIndex
	// gens: the cache generations indexed, with their member's cluster ID
	// (the rank of their claims, the same for every importer whatever
	// its --contexts order; this process's decisions come last).
	gens map[*members.Caches]string
	// lastGen is each member's last indexed generation: a member that is
	// down (no caches) keeps its claims in the index, so that an address
	// only its imports hold is not handed to another import meanwhile
	// (which would renumber one of the two when it returns).
	lastGen map[*members.Member]*members.Caches
	// recorded: the members not joined in this process whose claims an
	// earlier process recorded (members.Set.AwayClaims), indexed as
	// source recordedSource(context), with their cluster ID (the rank).
	recorded map[recordedSource]string
	// swept is when expired pending decisions were last dropped.
	swept   time.Time
	pending map[string]Claim // key -> what this process decided, not yet seen in caches
	// decided is when Assign last made (or repeated) each pending
	// decision; Claim.Since is when it was first made (its priority).
	decided map[string]time.Time
	// starved: the imports the pool had no address for on their last
	// Assign, and since when (Waiting hands them out, oldest first, when
	// an address may have been freed).
	starved map[string]time.Time
}

// pendingSource is the index source of this process's decisions.
type pendingSource struct{}

// recordedSource is the index source of the claims an earlier process
// recorded for the member of this kubeconfig context.
type recordedSource string

// awayClaimer is the part of members.Set that tells what an earlier
// process recorded of the members not joined in this one.
type awayClaimer interface {
	AwayClaims() []members.AwayClaims
}

// NewCIDR returns the clusterset-CIDR provider.
func NewCIDR(pool *Pool, ms Members) *CIDR {
	if ms == nil {
		ms = members.Static(nil)
	}
	c := &CIDR{pool: pool, members: ms, now: time.Now, index: newClaimIndex(), gens: map[*members.Caches]string{},
		lastGen: map[*members.Member]*members.Caches{}, recorded: map[recordedSource]string{},
		pending: map[string]Claim{}, decided: map[string]time.Time{}, starved: map[string]time.Time{}}
	c.index.hidden = c.expired
	c.index.rank = func(src any) string {
		switch src := src.(type) {
		case *members.Caches:
			return c.gens[src]
		case recordedSource:
			return c.recorded[src]
		}
		return "\xff" // after every cluster ID (DNS-1123: ASCII)
	}
	return c
}

// cacheClaim is the claim an import in a member's cache makes, if any.
func cacheClaim(si *mcsv1beta1.ServiceImport) (Claim, bool) {
	if si == nil || !members.Owned(si) {
		return Claim{}, false
	}
	ips := parseIPs(si.Annotations[mcsapi.AnnotationClusterSetIP])
	if len(ips) == 0 {
		return Claim{}, false
	}
	return Claim{Key: si.Namespace + "/" + si.Name, IPs: ips, Since: si.CreationTimestamp.Time}, true
}

// syncGens makes the index's cache sources the members' current cache
// generations (a down member's last one): one not indexed yet (a member
// that joined, or was listed afresh after it was down) is read whole; one
// no member has any more is forgotten. Called with mu held.
func (c *CIDR) syncGens() {
	current := map[*members.Caches]string{}
	seen := map[*members.Member]bool{}
	for _, m := range c.members.Members() {
		mc := m.Caches()
		if mc == nil {
			mc = c.lastGen[m] // down: what it held stays claimed
		}
		if mc != nil {
			current[mc], c.lastGen[m], seen[m] = m.ID, mc, true
		}
	}
	for m := range c.lastGen {
		if !seen[m] {
			delete(c.lastGen, m) // replaced (joined again)
		}
	}
	for g := range c.gens {
		if _, ok := current[g]; !ok {
			c.index.dropSource(g)
			delete(c.gens, g)
		}
	}
	for g, id := range current {
		_, indexed := c.gens[g]
		c.gens[g] = id
		if indexed {
			continue
		}
		for _, si := range g.OwnedImports() {
			if cl, ok := cacheClaim(si); ok {
				c.takeSeen(g, cl)
			}
		}
	}
	c.syncRecorded(seen)
}

// syncRecorded indexes the claims an earlier process recorded for the
// members not joined in this one (a member down since before the start
// holds its VIPs as it would had this process seen it go), and forgets
// them once the member has joined (its caches say what it holds). Called
// with mu held.
func (c *CIDR) syncRecorded(joined map[*members.Member]bool) {
	ac, ok := c.members.(awayClaimer)
	if !ok {
		return
	}
	here := map[string]bool{}
	for m := range joined {
		here[m.Context] = true
	}
	want := map[recordedSource]members.AwayClaims{}
	for _, a := range ac.AwayClaims() {
		if !here[a.Context] {
			want[recordedSource(a.Context)] = a
		}
	}
	for src := range c.recorded {
		if _, ok := want[src]; !ok {
			c.index.dropSource(src)
			delete(c.recorded, src)
		}
	}
	for src, a := range want {
		if _, ok := c.recorded[src]; ok {
			continue
		}
		c.recorded[src] = a.Cluster
		for _, rc := range a.Claims {
			if ips := parseIPs(rc.IPs); len(ips) > 0 {
				c.index.take(src, Claim{Key: rc.Key, IPs: ips, Since: rc.Since})
			}
		}
	}
}

// takeSeen indexes a claim a cache shows: a decision of ours it shows is
// written, no longer pending.
func (c *CIDR) takeSeen(g *members.Caches, cl Claim) {
	c.index.take(g, cl)
	c.forget(cl.Key)
}

// forget drops key's pending decision. Called with mu held.
func (c *CIDR) forget(key string) {
	delete(c.pending, key)
	delete(c.decided, key)
	c.index.release(pendingSource{}, key)
}

// expired hides pending decisions past their time from the index: not
// decided again for pendingExpiry (an import created would show within
// seconds), or never written for pendingMaxAge (its Since, its priority
// over other claims, must not outlive failing writes). Called with mu
// held.
func (c *CIDR) expired(src any, key string) bool {
	if _, ok := src.(pendingSource); !ok {
		return false
	}
	now := c.now()
	return now.Sub(c.decided[key]) > pendingExpiry || now.Sub(c.pending[key].Since) > pendingMaxAge
}

// sweep drops the pending decisions past their time. Called with mu held.
func (c *CIDR) sweep() {
	for key := range c.pending {
		if c.expired(pendingSource{}, key) {
			c.forget(key)
		}
	}
	c.swept = c.now()
}

// WantsClusterSetIP implements ClusterSetIPs (OptIn, with Default).
func (c *CIDR) WantsClusterSetIP(e *mcsv1beta1.ServiceExport) bool { return OptIn(e, c.Default) }

// ImportChanged implements ClusterSetIPs: the index follows the import's
// claim in every indexed cache generation; when an address may have been
// freed, the imports waiting for one are named, the longest waiting first.
// This member's cache shows the address free (informers update it before
// handlers run); until every member's does, the next member's event
// wakes them again.
func (c *CIDR) ImportChanged(ev members.Event) []string {
	c.mu.Lock()
	c.syncGens()
	key := ev.Namespace + "/" + ev.Name
	for g := range c.gens {
		if cl, ok := cacheClaim(g.Import(ev.Namespace, ev.Name)); ok {
			c.takeSeen(g, cl)
		} else {
			c.index.release(g, key)
		}
	}
	c.mu.Unlock()
	if !FreedClusterSetIP(ev) {
		return nil
	}
	return c.Waiting()
}

// FreedClusterSetIP says whether an import event may have freed a
// clusterset-CIDR address: an import that recorded one
// (mcs-dns.io/clusterset-ip) was deleted or no longer records it.
func FreedClusterSetIP(ev members.Event) bool {
	clusterSetIP := func(si *mcsv1beta1.ServiceImport) string {
		if si == nil {
			return ""
		}
		return si.Annotations[mcsapi.AnnotationClusterSetIP]
	}
	had := clusterSetIP(ev.Before)
	return ev.Kind == members.KindImport && had != "" && had != clusterSetIP(ev.After)
}

// pendingHold is how long Release keeps a decision this process just made
// although no cache shows an import of ours: within one reconcile, one
// member's import may be created (not yet in its cache) while another
// member has none (a foreign import, no namespace) and releases. Forgetting
// the claim then would let another import pick the same address until the
// caches catch up.
const pendingHold = 10 * time.Second

// pendingExpiry is how long a decision is remembered, after it was last
// made, without any cache showing it.
const pendingExpiry = 2 * time.Minute

// pendingMaxAge bounds how long a decision no cache shows keeps its first
// time (it is then made afresh).
const pendingMaxAge = 10 * time.Minute

func parseIPs(s string) []netip.Addr {
	var out []netip.Addr
	for _, f := range strings.Split(s, ",") {
		if a, err := netip.ParseAddr(strings.TrimSpace(f)); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// Assign implements Provider.
func (c *CIDR) Assign(_ context.Context, _ string, desired *mcsv1beta1.ServiceImport) (Assignment, error) {
	key := desired.Namespace + "/" + desired.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if desired.Annotations[mcsapi.AnnotationUseClusterSetIP] != "true" {
		delete(c.starved, key)
		return Assignment{}, nil // not opted in: no VIP, DNS answers NODATA
	}
	c.syncGens()
	if now := c.now(); now.Sub(c.swept) >= pendingHold {
		c.sweep()
	} else if _, ok := c.pending[key]; ok && c.expired(pendingSource{}, key) {
		c.forget(key) // made afresh below
	}
	ips, missing, err := c.pool.choose(key, desired.Spec.IPFamilies, c.index)
	if err != nil && !errors.Is(err, ErrExhausted) {
		return Assignment{}, err
	}
	if errors.Is(err, ErrExhausted) {
		if _, ok := c.starved[key]; !ok {
			c.starved[key] = c.now()
		}
	} else {
		delete(c.starved, key)
	}
	var a Assignment
	if len(ips) > 0 {
		strs := make([]string, len(ips))
		for i, ip := range ips {
			strs[i] = ip.String()
		}
		a.IPs = strs
		a.Annotations = map[string]string{mcsapi.AnnotationClusterSetIP: strings.Join(strs, ",")}
		if c.shown(key, ips) {
			// Already written and seen: nothing pending, so that when the
			// import goes its address is free as soon as the caches say so.
			c.forget(key)
		} else {
			if p, ok := c.pending[key]; !ok || !equalAddrs(p.IPs, ips) {
				c.pending[key] = Claim{Key: key, IPs: ips, Since: c.now()}
				c.index.take(pendingSource{}, c.pending[key])
			}
			c.decided[key] = c.now()
		}
	}
	switch {
	case err != nil:
		a.Ready = &metav1.Condition{
			Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionFalse,
			Reason: ReasonClusterSetIPExhausted, Message: err.Error(),
		}
	case len(missing) > 0 && len(ips) == 0:
		// None of the import's families has a range. (With one of two
		// it is served, as a single-stack member serves a dual-stack
		// derived Service.)
		fams := make([]string, len(missing))
		for i, f := range missing {
			fams[i] = string(f)
		}
		a.Ready = &metav1.Condition{
			Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionFalse,
			Reason:  string(mcsv1beta1.ServiceImportReasonIPFamilyNotSupported),
			Message: "the ClusterSet CIDR has no " + strings.Join(fams, ", ") + " range",
		}
	}
	return a, nil
}

// shown says whether some member's cache shows key holding exactly ips.
// Called with mu held.
func (c *CIDR) shown(key string, ips []netip.Addr) bool {
	for g := range c.gens {
		if cl, ok := c.index.sources[g][key]; ok && equalAddrs(cl.IPs, ips) {
			return true
		}
	}
	return false
}

// Release implements Provider. The VIP is released by the import's
// deletion (its annotation goes with it); once no member shows the import,
// it stops waiting for an address and a pending decision is forgotten
// (if last made pendingHold ago). (Release also comes for one member while
// the import lives in others, where it may still wait.)
func (c *CIDR) Release(_ context.Context, _, namespace, name string) error {
	key := namespace + "/" + name
	for _, m := range c.members.Members() {
		if mc := m.Caches(); mc != nil {
			if si := mc.Import(namespace, name); si != nil && members.Owned(si) {
				return nil // still imported somewhere: keep the claim
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.starved, key)
	if _, ok := c.pending[key]; ok && c.now().Sub(c.decided[key]) >= pendingHold {
		c.forget(key)
	}
	return nil
}

// Waiting names the imports the pool had no address for, the longest
// waiting first.
func (c *CIDR) Waiting() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := slices.Collect(maps.Keys(c.starved))
	slices.SortFunc(keys, func(a, b string) int {
		if d := c.starved[a].Compare(c.starved[b]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return keys
}

func equalAddrs(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var _ ClusterSetIPs = (*CIDR)(nil)

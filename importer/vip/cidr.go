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
type CIDR struct {
	pool    *Pool
	members Members
	now     func() time.Time

	mu      sync.Mutex
	pending map[string]Claim // key -> what this process decided, not yet seen in caches
	// decided is when Assign last made (or repeated) each pending
	// decision; Claim.Since is when it was first made (its priority).
	decided map[string]time.Time
	// starved: the imports the pool had no address for on their last
	// Assign, and since when (Waiting hands them out, oldest first, when
	// an address may have been freed); assigning: the key being chosen
	// for (under chooseMu), which Waiting names too.
	starved   map[string]time.Time
	assigning string
	// chooseMu makes reading the claims, choosing and recording the
	// decision one step.
	chooseMu sync.Mutex
}

// NewCIDR returns the clusterset-CIDR provider.
func NewCIDR(pool *Pool, ms Members) *CIDR {
	if ms == nil {
		ms = members.Static(nil)
	}
	return &CIDR{pool: pool, members: ms, now: time.Now, pending: map[string]Claim{}, decided: map[string]time.Time{}, starved: map[string]time.Time{}}
}

// claims reads every VIP claim in the clusterset's caches, and prunes the
// pending decisions the caches now show.
func (c *CIDR) claims() []Claim {
	var out []Claim
	seen := map[string]bool{}
	for _, m := range c.members.Members() {
		mc := m.Caches()
		if mc == nil {
			continue
		}
		for _, si := range mc.OwnedImports() {
			ips := parseIPs(si.Annotations[mcsapi.AnnotationClusterSetIP])
			if len(ips) == 0 {
				continue
			}
			key := si.Namespace + "/" + si.Name
			out = append(out, Claim{Key: key, IPs: ips, Since: si.CreationTimestamp.Time})
			seen[key] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for key, p := range c.pending {
		if seen[key] || now.Sub(c.decided[key]) > pendingExpiry || now.Sub(p.Since) > pendingMaxAge {
			// Written (the caches show it), or not decided again for
			// long (an import created would show within seconds), or
			// never written for very long: its Since (its priority over
			// other claims) must not outlive failing writes.
			delete(c.pending, key)
			delete(c.decided, key)
			continue
		}
		out = append(out, p)
	}
	return out
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
	if desired.Annotations[mcsapi.AnnotationUseClusterSetIP] != "true" {
		c.mu.Lock()
		delete(c.starved, key)
		c.mu.Unlock()
		return Assignment{}, nil // not opted in: no VIP, DNS answers NODATA
	}
	// One choice at a time, from reading the claims to recording this
	// one: two imports woken by the same freed address must not both
	// take it.
	c.chooseMu.Lock()
	defer c.chooseMu.Unlock()
	c.mu.Lock()
	// Waiting names the key from here on: an address freed while it
	// chooses wakes it again.
	c.assigning = key
	c.mu.Unlock()
	ips, missing, err := c.pool.Choose(key, desired.Spec.IPFamilies, c.claims())
	c.mu.Lock()
	defer c.mu.Unlock()
	c.assigning = ""
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
		if p, ok := c.pending[key]; !ok || !equalAddrs(p.IPs, ips) {
			c.pending[key] = Claim{Key: key, IPs: ips, Since: c.now()}
		}
		c.decided[key] = c.now()
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
	delete(c.starved, key)
	if _, ok := c.pending[key]; ok && c.now().Sub(c.decided[key]) >= pendingHold {
		delete(c.pending, key)
		delete(c.decided, key)
	}
	c.mu.Unlock()
	return nil
}

// Waiting implements Waiter: the imports the pool had no address for, the
// longest waiting first, and the one being chosen for.
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
	if _, ok := c.starved[c.assigning]; c.assigning != "" && !ok {
		keys = append(keys, c.assigning)
	}
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

var (
	_ Provider = (*CIDR)(nil)
	_ Waiter   = (*CIDR)(nil)
)

package vip

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// TestCIDRPendingClaims: a decision just made survives a Release in the
// same reconcile (another member with no import of ours), so another
// import cannot pick the address before the caches show the claim; an
// older one is forgotten on Release, and one never written expires.
func TestCIDRPendingClaims(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewCIDR(mustPool(t, "10.250.0.0/29"), nil)
	c.now = func() time.Time { return now }
	imp := func(name string) *mcsv1beta1.ServiceImport {
		return &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Annotations: map[string]string{mcsapi.AnnotationUseClusterSetIP: "true"}},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}}
	}
	ctx := context.Background()
	a, err := c.Assign(ctx, "east", imp("a"))
	require.NoError(t, err)
	require.Len(t, a.IPs, 1)
	require.NoError(t, c.Release(ctx, "west", "ns", "a")) // same reconcile, a foreign import in west
	b, err := c.Assign(ctx, "east", imp("b"))
	require.NoError(t, err)
	assert.NotEqual(t, a.IPs, b.IPs, "a's claim was kept")

	now = now.Add(pendingHold)
	require.NoError(t, c.Release(ctx, "east", "ns", "a"))
	assert.NotContains(t, c.pending, "ns/a", "an older decision is forgotten")
	assert.Contains(t, c.pending, "ns/b")

	now = now.Add(pendingExpiry + time.Second)
	c.sweep()
	assert.Empty(t, c.pending, "never written: expired")

	// A decision made again (a retry after a failed write) is held from
	// its latest Assign, not its first.
	c2, err := c.Assign(ctx, "east", imp("c"))
	require.NoError(t, err)
	now = now.Add(pendingHold + time.Second)
	again, err := c.Assign(ctx, "east", imp("c"))
	require.NoError(t, err)
	require.Equal(t, c2.IPs, again.IPs)
	require.NoError(t, c.Release(ctx, "west", "ns", "c"))
	assert.Contains(t, c.pending, "ns/c", "held from the latest decision")

	// A decision never written but made again and again keeps its first
	// time (its priority) for at most pendingMaxAge.
	for range 6 {
		now = now.Add(pendingExpiry - time.Second)
		_, err = c.Assign(ctx, "east", imp("c"))
		require.NoError(t, err)
	}
	assert.Less(t, now.Sub(c.pending["ns/c"].Since), pendingMaxAge, "made afresh once older than pendingMaxAge")
}

// TestCIDRWaiting: an import the pool has no address for is named by
// Waiting (oldest first) until it gets one, opts out or goes; a dual-stack
// import served in the one family the pool has is Ready, one served in
// none says IPFamilyNotSupported.
func TestCIDRWaiting(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewCIDR(mustPool(t, "10.250.0.0/30"), nil) // 2 usable addresses
	c.now = func() time.Time { return now }
	imp := func(name string, optIn bool, fams ...corev1.IPFamily) *mcsv1beta1.ServiceImport {
		si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPFamilies: fams}}
		if optIn {
			si.Annotations = map[string]string{mcsapi.AnnotationUseClusterSetIP: "true"}
		}
		return si
	}
	v4 := corev1.IPv4Protocol
	ctx := context.Background()
	for _, n := range []string{"a", "b"} {
		a, err := c.Assign(ctx, "east", imp(n, true, v4, corev1.IPv6Protocol))
		require.NoError(t, err)
		require.Len(t, a.IPs, 1)
		assert.Nil(t, a.Ready, "served in IPv4, the pool's one family: Ready")
	}
	for _, n := range []string{"y", "x"} {
		now = now.Add(time.Second)
		a, err := c.Assign(ctx, "east", imp(n, true, v4))
		require.NoError(t, err)
		require.Empty(t, a.IPs)
		require.Equal(t, ReasonClusterSetIPExhausted, a.Ready.Reason)
	}
	assert.Equal(t, []string{"ns/y", "ns/x"}, c.Waiting(), "oldest first")
	now = now.Add(time.Second)
	_, err := c.Assign(ctx, "east", imp("y", true, v4)) // still none: keeps its place
	require.NoError(t, err)
	assert.Equal(t, []string{"ns/y", "ns/x"}, c.Waiting())

	_, err = c.Assign(ctx, "east", imp("x", false, v4)) // opts out
	require.NoError(t, err)
	assert.Equal(t, []string{"ns/y"}, c.Waiting())
	require.NoError(t, c.Release(ctx, "east", "ns", "y")) // goes
	assert.Empty(t, c.Waiting())

	a, err := c.Assign(ctx, "east", imp("v6", true, corev1.IPv6Protocol))
	require.NoError(t, err)
	assert.Empty(t, a.IPs)
	require.NotNil(t, a.Ready)
	assert.Equal(t, string(mcsv1beta1.ServiceImportReasonIPFamilyNotSupported), a.Ready.Reason)
	assert.Empty(t, c.Waiting(), "no range for its family is not waiting for an address")
}

// TestCIDRConcurrentAssign: two waiting imports tried at once when one
// address is freed (the controller wakes every waiting import together)
// never both get it.
func TestCIDRConcurrentAssign(t *testing.T) {
	ctx := context.Background()
	imp := func(name string) *mcsv1beta1.ServiceImport {
		return &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Annotations: map[string]string{mcsapi.AnnotationUseClusterSetIP: "true"}},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}}
	}
	for range 300 {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		c := NewCIDR(mustPool(t, "10.250.0.0/30"), nil) // 2 usable addresses
		c.now = func() time.Time { return now }
		for _, n := range []string{"a", "b", "x", "y"} {
			_, err := c.Assign(ctx, "east", imp(n))
			require.NoError(t, err)
		}
		require.Equal(t, []string{"ns/x", "ns/y"}, c.Waiting())
		now = now.Add(pendingHold)
		require.NoError(t, c.Release(ctx, "east", "ns", "a")) // a's address is free
		got := make([]Assignment, 2)
		var wg sync.WaitGroup
		for i, n := range []string{"x", "y"} {
			wg.Go(func() {
				a, err := c.Assign(ctx, "east", imp(n))
				assert.NoError(t, err)
				got[i] = a
			})
		}
		wg.Wait()
		require.Equal(t, 1, len(got[0].IPs)+len(got[1].IPs), "one of them gets the freed address: %v %v", got[0].IPs, got[1].IPs)
		require.Len(t, c.Waiting(), 1)
	}
}

// awayMembers is the members.Set as the CIDR reads it: none joined, and
// the claims an earlier process recorded for some.
type awayMembers struct {
	mu   sync.Mutex
	away []members.AwayClaims
}

func (a *awayMembers) Members() []*members.Member    { return nil }
func (a *awayMembers) Lookup(string) *members.Member { return nil }
func (a *awayMembers) AwayClaims() []members.AwayClaims {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.away
}

// TestCIDRRecordedClaims: an address an earlier process recorded for a
// member that has not joined in this one is not given to another import;
// the import it was recorded for gets it back; once the member is no
// longer away (it joined: its caches say what it holds), the record is
// forgotten.
func TestCIDRRecordedClaims(t *testing.T) {
	ms := &awayMembers{}
	c := NewCIDR(mustPool(t, "10.250.0.0/30"), ms) // 2 usable: .1 and .2
	imp := func(name string) *mcsv1beta1.ServiceImport {
		return &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Annotations: map[string]string{mcsapi.AnnotationUseClusterSetIP: "true"}},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}}
	}
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms.away = []members.AwayClaims{{Context: "north", Cluster: "north", Claims: []members.RecordedClaim{
		{Key: "ns/from-north", IPs: "10.250.0.1", Since: since},
		{Key: "ns/everywhere", IPs: "10.250.0.2", Since: since},
	}}}
	ctx := context.Background()
	late, err := c.Assign(ctx, "east", imp("late"))
	require.NoError(t, err)
	assert.Empty(t, late.IPs, "both addresses are recorded as held")
	require.NotNil(t, late.Ready)
	assert.Equal(t, ReasonClusterSetIPExhausted, late.Ready.Reason)
	back, err := c.Assign(ctx, "east", imp("everywhere"))
	require.NoError(t, err)
	assert.Equal(t, []string{"10.250.0.2"}, back.IPs, "the recorded import gets its address back")

	ms.mu.Lock()
	ms.away = nil // north joined
	ms.mu.Unlock()
	late, err = c.Assign(ctx, "east", imp("late"))
	require.NoError(t, err)
	assert.Equal(t, []string{"10.250.0.1"}, late.IPs, "the record is forgotten once north is no longer away")
}

package members

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestConfigMapStore(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	s := ConfigMapStore{Client: client, Namespace: "kube-system", Name: "mcs-importer-members", Cluster: "test"}

	r, err := s.Load(ctx)
	require.NoError(t, err, "none kept yet")
	assert.Empty(t, r.Members)

	since := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	want := Record{Members: map[string]RecordedMember{"west": {Cluster: "west", IDSource: idFromProperty, State: "unreachable", Since: since}}, DisruptedSince: &since}
	require.NoError(t, s.Save(ctx, want))
	got, err := s.Load(ctx)
	require.NoError(t, err)
	assert.True(t, recordsEqual(want, got), "%+v", got)

	writes := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "create" || a.GetVerb() == "update" {
				n++
			}
		}
		return n
	}
	before := writes()
	require.NoError(t, s.Save(ctx, want))
	assert.Equal(t, before, writes(), "the same record is not written again")

	_, err = client.CoreV1().ConfigMaps("kube-system").Update(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "mcs-importer-members"},
		Data:       map[string]string{recordKey: "{not json"},
	}, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = s.Load(ctx)
	assert.ErrorContains(t, err, "is not a member record", "a damaged record is an error (the holds then start afresh), not a panic")
}

// TestRecordedClaims: the clusterset-CIDR VIPs recorded for a member that
// is not Up are kept in the Record, survive a save and load, and a later
// process reads them (AwayClaims) until the member joins; a member
// recorded as Up has none.
func TestRecordedClaims(t *testing.T) {
	ctx := context.Background()
	since := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	claims := []RecordedClaim{{Key: "ns/a", IPs: "10.250.0.1", Since: since}}
	want := Record{Members: map[string]RecordedMember{
		"north": {Cluster: "north", IDSource: idFromProperty, State: Down.String(), Since: since, ClusterSetIPs: claims},
		"east":  {Cluster: "east", IDSource: idFromProperty, State: Up.String(), Since: since, ClusterSetIPs: claims},
	}}
	s := ConfigMapStore{Client: fake.NewClientset(), Namespace: "kube-system", Name: "m", Cluster: "test"}
	require.NoError(t, s.Save(ctx, want))
	got, err := s.Load(ctx)
	require.NoError(t, err)
	require.True(t, recordsEqual(want, got), "%+v", got)
	changed := got
	changed.Members = map[string]RecordedMember{"north": got.Members["north"], "east": got.Members["east"]}
	n := changed.Members["north"]
	n.ClusterSetIPs = nil
	changed.Members["north"] = n
	assert.False(t, recordsEqual(want, changed), "a change of claims is a change of the record")

	d := newDecisions(t, time.Minute, "east", "north")
	d.mu.Lock()
	d.restore(got, d.now)
	d.mu.Unlock()
	assert.Equal(t, []AwayClaims{{Context: "north", Cluster: "north", Claims: claims}}, d.AwayClaims(),
		"north's claims, not east's (recorded Up: read live)")
	d.joined("north")
	d.mu.Lock()
	r := d.record()
	d.mu.Unlock()
	assert.Empty(t, d.AwayClaims(), "north joined: its caches say what it holds")
	assert.Empty(t, r.Members["north"].ClusterSetIPs, "Up: nothing recorded")
}

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

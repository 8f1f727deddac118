package importer

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// TestLeaseReleasedAfterTheLastWrite: a leader that is stopped keeps its
// Lease until the work of its term has returned (its last writes are in
// flight meanwhile, and a standby must not start writing beside them),
// and gives it up right after, so that a standby need not wait for it to
// expire.
func TestLeaseReleasedAfterTheLastWrite(t *testing.T) {
	set := cluster.Start(t, cluster.Spec{Name: "east"})
	leases := set.Get("east").Kube.CoordinationV1().Leases("kube-system")
	o := DefaultOptions()
	o.Kubeconfig, o.Contexts = set.Kubeconfig, []string{"east"}
	o.LeaderElect, o.LeaderElectNamespace, o.LeaderElectName = true, "kube-system", "release-test"
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 30*time.Second, 20*time.Second, time.Second
	holder := func() string {
		l, err := leases.Get(context.Background(), o.LeaderElectName, metav1.GetOptions{})
		require.NoError(t, err)
		if l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	leading := make(chan struct{})
	var duringLastWrite string
	done := make(chan error, 1)
	go func() {
		done <- runElected(ctx, o, slog.New(slog.NewTextHandler(io.Discard, nil)), func(wctx context.Context) error {
			close(leading)
			<-wctx.Done()
			// A write still in flight after the term's context ended.
			time.Sleep(2 * time.Second)
			duringLastWrite = holder()
			return nil
		})
	}()
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		t.Fatal("never led")
	}
	leader := holder()
	require.NotEmpty(t, leader)
	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("runElected did not return")
	}
	assert.Equal(t, leader, duringLastWrite, "the Lease is held until the term's last write has returned")
	assert.Empty(t, holder(), "and released right after")
}

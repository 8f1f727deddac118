package write_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"

	"github.com/mcs-dns/mcs-dns/importer/write"
)

const ns = "demo"

var slicesGR = schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}

func ours(name string, ready bool) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"managed-by": "us"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.0.0.1"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
		}},
	}
}

func foreign(name string) *discoveryv1.EndpointSlice {
	s := ours(name, false)
	s.Labels = map[string]string{"managed-by": "someone-else"}
	return s
}

func ready(s *discoveryv1.EndpointSlice) bool {
	return len(s.Endpoints) == 1 && ptr.Deref(s.Endpoints[0].Conditions.Ready, false)
}

// log records the writes Ensure reports.
type log struct{ writes []string }

func (l *log) wrote(verb string, err error) {
	if err != nil {
		verb += " (" + string(apierrors.ReasonForError(err)) + ")"
	}
	l.writes = append(l.writes, verb)
}

// sliceOps wants slice name in ns to exist with its endpoint ready.
func sliceOps(kube *fake.Clientset, name string, l *log) write.Ops[*discoveryv1.EndpointSlice] {
	api := kube.DiscoveryV1().EndpointSlices(ns)
	return write.Ops[*discoveryv1.EndpointSlice]{
		Get: func(ctx context.Context) (*discoveryv1.EndpointSlice, error) {
			return api.Get(ctx, name, metav1.GetOptions{})
		},
		Create: func(ctx context.Context) (*discoveryv1.EndpointSlice, error) {
			return api.Create(ctx, ours(name, true), metav1.CreateOptions{})
		},
		Owned:    func(s *discoveryv1.EndpointSlice) bool { return s.Labels["managed-by"] == "us" },
		UpToDate: ready,
		Update: func(ctx context.Context, cur *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, error) {
			upd := cur.DeepCopy()
			upd.Endpoints = ours(name, true).Endpoints
			return api.Update(ctx, upd, metav1.UpdateOptions{})
		},
		Wrote: l.wrote,
	}
}

// failFirst makes the first n verb calls on resource fail with err (made
// per call), or run before (when set) first.
func failFirst(kube *k8stesting.Fake, verb, resource string, n int, err func() error, before func()) {
	calls := 0
	kube.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls > n {
			return false, nil, nil
		}
		if before != nil {
			before()
		}
		return true, nil, err()
	})
}

func conflict() error {
	return apierrors.NewConflict(slicesGR, "s", errors.New("the object has been modified"))
}

func quota() error {
	return apierrors.NewForbidden(slicesGR, "s", errors.New("exceeded quota: q, requested: count/endpointslices.discovery.k8s.io=1"))
}

func webhookDenied() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 400, Reason: metav1.StatusReasonBadRequest,
		Message: `admission webhook "deny.example.com" denied the request: no`,
	}}
}

func TestEnsureCreatesWhatIsAbsent(t *testing.T) {
	kube := fake.NewClientset()
	var l log
	got, out, err := write.Ensure(t.Context(), sliceOps(kube, "s", &l), nil)
	require.NoError(t, err)
	assert.Equal(t, write.Created, out)
	assert.True(t, ready(got))
	assert.Equal(t, []string{"create"}, l.writes)
}

func TestEnsureWithoutCreateLeavesAbsent(t *testing.T) {
	kube := fake.NewClientset()
	var l log
	ops := sliceOps(kube, "s", &l)
	ops.Create = nil
	got, out, err := write.Ensure(t.Context(), ops, nil)
	require.NoError(t, err)
	assert.Equal(t, write.Absent, out)
	assert.Nil(t, got)
	assert.Empty(t, l.writes)
}

func TestEnsureAdoptsOursWhenTheCacheWasBehind(t *testing.T) {
	t.Run("up to date", func(t *testing.T) {
		kube := fake.NewClientset(ours("s", true))
		var l log
		got, out, err := write.Ensure(t.Context(), sliceOps(kube, "s", &l), nil)
		require.NoError(t, err)
		assert.Equal(t, write.Unchanged, out)
		assert.True(t, ready(got))
		assert.Equal(t, []string{"create (AlreadyExists)"}, l.writes)
	})
	t.Run("out of date", func(t *testing.T) {
		kube := fake.NewClientset(ours("s", false))
		var l log
		got, out, err := write.Ensure(t.Context(), sliceOps(kube, "s", &l), nil)
		require.NoError(t, err)
		assert.Equal(t, write.Updated, out)
		assert.True(t, ready(got))
		assert.Equal(t, []string{"create (AlreadyExists)", "update"}, l.writes)
	})
}

func TestEnsureYieldsToForeignObjects(t *testing.T) {
	t.Run("found by the create", func(t *testing.T) {
		kube := fake.NewClientset(foreign("s"))
		var l log
		got, out, err := write.Ensure(t.Context(), sliceOps(kube, "s", &l), nil)
		require.NoError(t, err)
		assert.Equal(t, write.Yielded, out)
		assert.False(t, ready(got))
		assert.Equal(t, []string{"create (AlreadyExists)"}, l.writes, "a foreign object is never updated")
	})
	t.Run("in the cache", func(t *testing.T) {
		kube := fake.NewClientset(foreign("s"))
		var l log
		_, out, err := write.Ensure(t.Context(), sliceOps(kube, "s", &l), foreign("s"))
		require.NoError(t, err)
		assert.Equal(t, write.Yielded, out)
		assert.Empty(t, l.writes)
	})
	t.Run("replaced before a conflict", func(t *testing.T) {
		// Ours in the cache; someone deletes it and makes their own of
		// that name, so the update conflicts and the live one is theirs.
		kube := fake.NewClientset(ours("s", false))
		failFirst(&kube.Fake, "update", "endpointslices", 1, conflict, func() {
			require.NoError(t, kube.Tracker().Update(slicesGR.WithVersion("v1"), foreign("s"), ns))
		})
		var l log
		_, out, err := write.Ensure(t.Context(), sliceOps(kube, "s", &l), ours("s", false))
		require.NoError(t, err)
		assert.Equal(t, write.Yielded, out)
		assert.Equal(t, []string{"update (Conflict)"}, l.writes)
		live, err := kube.DiscoveryV1().EndpointSlices(ns).Get(t.Context(), "s", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "someone-else", live.Labels["managed-by"], "theirs is left as it is")
	})
}

func TestEnsureRetriesConflictsFromTheLiveObject(t *testing.T) {
	t.Run("then writes", func(t *testing.T) {
		kube := fake.NewClientset(ours("s", false))
		failFirst(&kube.Fake, "update", "endpointslices", 2, conflict, nil)
		var l log
		got, out, err := write.Ensure(t.Context(), sliceOps(kube, "s", &l), ours("s", false))
		require.NoError(t, err)
		assert.Equal(t, write.Updated, out)
		assert.True(t, ready(got))
		assert.Equal(t, []string{"update (Conflict)", "update (Conflict)", "update"}, l.writes)
	})
	t.Run("someone wrote it meanwhile", func(t *testing.T) {
		kube := fake.NewClientset(ours("s", false))
		failFirst(&kube.Fake, "update", "endpointslices", 1, conflict, func() {
			require.NoError(t, kube.Tracker().Update(slicesGR.WithVersion("v1"), ours("s", true), ns))
		})
		var l log
		_, out, err := write.Ensure(t.Context(), sliceOps(kube, "s", &l), ours("s", false))
		require.NoError(t, err)
		assert.Equal(t, write.Unchanged, out, "the live object has it: no second write")
		assert.Equal(t, []string{"update (Conflict)"}, l.writes)
	})
	t.Run("gives up", func(t *testing.T) {
		kube := fake.NewClientset(ours("s", false))
		failFirst(&kube.Fake, "update", "endpointslices", 100, conflict, nil)
		var l log
		_, _, err := write.Ensure(t.Context(), sliceOps(kube, "s", &l), ours("s", false))
		require.Error(t, err)
		assert.True(t, apierrors.IsConflict(err))
		assert.Len(t, l.writes, 5, "retry.DefaultRetry's steps, then the error is the caller's to back off")
	})
}

func TestEnsureReturnsDenials(t *testing.T) {
	t.Run("quota on create", func(t *testing.T) {
		kube := fake.NewClientset()
		failFirst(&kube.Fake, "create", "endpointslices", 1, quota, nil)
		var l log
		got, out, err := write.Ensure(t.Context(), sliceOps(kube, "s", &l), nil)
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "returned as it is: %v", err)
		assert.Equal(t, write.Absent, out)
		assert.Nil(t, got)
		assert.Equal(t, []string{"create (Forbidden)"}, l.writes, "not retried here")
	})
	t.Run("webhook on update", func(t *testing.T) {
		kube := fake.NewClientset(ours("s", false))
		failFirst(&kube.Fake, "update", "endpointslices", 1, webhookDenied, nil)
		var l log
		got, out, err := write.Ensure(t.Context(), sliceOps(kube, "s", &l), ours("s", false))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "denied the request")
		assert.Equal(t, write.Unchanged, out)
		assert.False(t, ready(got), "what is there is what is returned")
		assert.Equal(t, []string{"update (BadRequest)"}, l.writes)
	})
	t.Run("get after already-exists fails", func(t *testing.T) {
		kube := fake.NewClientset(ours("s", false))
		failFirst(&kube.Fake, "get", "endpointslices", 1, func() error { return apierrors.NewServiceUnavailable("away") }, nil)
		var l log
		_, out, err := write.Ensure(t.Context(), sliceOps(kube, "s", &l), nil)
		require.Error(t, err)
		assert.True(t, apierrors.IsServiceUnavailable(err))
		assert.Equal(t, write.Absent, out)
	})
}

// The helper is the same for the MCS types (and their status
// subresource: no Create, an object that exists).
func TestEnsureServiceImportStatus(t *testing.T) {
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP},
	}
	mcs := mcsfake.NewSimpleClientset(si)
	api := mcs.MulticlusterV1beta1().ServiceImports(ns)
	hasEast := func(s *mcsv1beta1.ServiceImport) bool {
		return len(s.Status.Clusters) == 1 && s.Status.Clusters[0].Cluster == "east"
	}
	calls := 0
	mcs.PrependReactor("update", "serviceimports", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls == 1 {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "serviceimports"}, "web", errors.New("modified"))
		}
		return false, nil, nil
	})
	var l log
	ops := write.Ops[*mcsv1beta1.ServiceImport]{
		Get: func(ctx context.Context) (*mcsv1beta1.ServiceImport, error) {
			return api.Get(ctx, "web", metav1.GetOptions{})
		},
		UpToDate: hasEast,
		Update: func(ctx context.Context, cur *mcsv1beta1.ServiceImport) (*mcsv1beta1.ServiceImport, error) {
			upd := cur.DeepCopy()
			upd.Status.Clusters = []mcsv1beta1.ClusterStatus{{Cluster: "east"}}
			return api.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		},
		Wrote: l.wrote,
	}
	got, out, err := write.Ensure(t.Context(), ops, si)
	require.NoError(t, err)
	assert.Equal(t, write.Updated, out)
	assert.True(t, hasEast(got))
	assert.Equal(t, []string{"update (Conflict)", "update"}, l.writes)

	_, out, err = write.Ensure(t.Context(), ops, nil)
	require.NoError(t, err)
	assert.Equal(t, write.Absent, out, "a status is never created")
}

func TestDelete(t *testing.T) {
	for name, tc := range map[string]struct {
		err     error
		wantErr bool
	}{
		"deleted":                     {},
		"gone already":                {err: apierrors.NewNotFound(slicesGR, "s")},
		"replaced (UID precondition)": {err: conflict()},
		"denied":                      {err: webhookDenied(), wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			var l log
			var opts metav1.DeleteOptions
			err := write.Delete(t.Context(), func(_ context.Context, o metav1.DeleteOptions) error {
				opts = o
				return tc.err
			}, "uid-1", l.wrote)
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			require.NotNil(t, opts.Preconditions)
			assert.Equal(t, "uid-1", string(*opts.Preconditions.UID))
			assert.Len(t, l.writes, 1)
		})
	}
}

// Each request is bounded on its own: one that hangs fails by
// RequestTimeout, though its caller's context has no deadline, and the
// error says it timed out (so that a caller with more writes for the
// same member stops there).
func TestEachRequestIsBounded(t *testing.T) {
	old := write.RequestTimeout
	write.RequestTimeout = 100 * time.Millisecond
	t.Cleanup(func() { write.RequestTimeout = old })

	var l log
	hang := func(ctx context.Context) (*discoveryv1.EndpointSlice, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	start := time.Now()
	_, out, err := write.Ensure(t.Context(), write.Ops[*discoveryv1.EndpointSlice]{
		Get: hang, Create: hang, UpToDate: ready, Wrote: l.wrote,
	}, nil)
	require.Error(t, err)
	assert.True(t, write.TimedOut(err), "the error says it timed out: %v", err)
	assert.Equal(t, write.Absent, out)
	assert.Less(t, time.Since(start), 5*time.Second, "bounded by RequestTimeout, not the caller's context")

	err = write.Delete(t.Context(), func(ctx context.Context, _ metav1.DeleteOptions) error {
		<-ctx.Done()
		return ctx.Err()
	}, "uid", l.wrote)
	assert.True(t, write.TimedOut(err), "a delete too: %v", err)

	assert.False(t, write.TimedOut(apierrors.NewForbidden(slicesGR, "x", errors.New("no"))), "a refusal is not a timeout")
	assert.True(t, write.TimedOut(apierrors.NewTooManyRequests("busy", 1)), "too busy counts as no answer in time")
}

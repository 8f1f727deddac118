package vip

import (
	"context"
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// refusedFor is how long a family the API server refused is not asked
// for again (a cluster rarely gains a Service range).
const refusedFor = 10 * time.Minute

// errNoFamily: the cluster has a Service range for none of the import's
// IP families.
var errNoFamily = errors.New("no Service range for any of the import's IP families")

// familyNotSupported is the Ready condition of an import none of whose IP
// families the importing cluster has a Service range for.
func familyNotSupported(fams []corev1.IPFamily) *metav1.Condition {
	names := make([]string, len(fams))
	for i, f := range fams {
		names[i] = string(f)
	}
	return &metav1.Condition{
		Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionFalse,
		Reason:  string(mcsv1beta1.ServiceImportReasonIPFamilyNotSupported),
		Message: "this cluster has no Service range for " + strings.Join(names, " or ") + ": no derived Service, no VIP",
	}
}

func (d *Derived) isRefused(clusterID string, f corev1.IPFamily) bool {
	d.refusedMu.Lock()
	defer d.refusedMu.Unlock()
	t, ok := d.refused[clusterID][f]
	return ok && time.Since(t) < refusedFor
}

func (d *Derived) markRefused(clusterID string, f corev1.IPFamily) {
	d.refusedMu.Lock()
	defer d.refusedMu.Unlock()
	if d.refused[clusterID] == nil {
		d.refused[clusterID] = map[corev1.IPFamily]time.Time{}
	}
	d.refused[clusterID][f] = time.Now()
}

// create creates want (which asks for the import's primary family, if
// any). Where the cluster has no Service range for it and the import is
// dual-stack, the other family becomes the derived Service's primary
// (PreferDualStack then adds nothing). Families refused within refusedFor
// are not asked for; errNoFamily when none is left.
func (d *Derived) create(ctx context.Context, m *members.Member, want *corev1.Service, importFams []corev1.IPFamily) (*corev1.Service, error) {
	api := m.Kube.CoreV1().Services(want.Namespace)
	cands := want.Spec.IPFamilies
	if len(importFams) == 2 {
		cands = importFams
	}
	done := m.Writing(members.KindService, want.Namespace, want.Name, want.Labels[mcsapi.LabelDerivedFor])
	defer done()
	if len(cands) == 0 {
		created, err := api.Create(ctx, want, metav1.CreateOptions{})
		d.report(m, "create", want.Namespace, want.Labels[mcsapi.LabelDerivedFor], want.Name, err)
		if err == nil {
			m.RecordWrite(created)
		}
		return created, err
	}
	for _, f := range cands {
		if d.isRefused(m.ID, f) {
			continue
		}
		try := want.DeepCopy()
		try.Spec.IPFamilies = []corev1.IPFamily{f}
		created, err := api.Create(ctx, try, metav1.CreateOptions{})
		d.report(m, "create", want.Namespace, want.Labels[mcsapi.LabelDerivedFor], want.Name, err)
		if err == nil {
			m.RecordWrite(created)
		}
		if familyNotConfigured(err) {
			d.markRefused(m.ID, f)
			continue
		}
		return created, err
	}
	return nil, errNoFamily
}

// familyNotConfigured reports whether err is the API server refusing an IP
// family it has no Service range for.
func familyNotConfigured(err error) bool {
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &st) || st.Status().Details == nil {
		return false
	}
	for _, c := range st.Status().Details.Causes {
		if strings.HasPrefix(c.Field, "spec.ipFamilies") && strings.Contains(c.Message, "not configured on this cluster") {
			return true
		}
	}
	return false
}

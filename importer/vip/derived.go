package vip

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/importer/write"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// DerivedName is the name of the derived Service of import namespace/name:
// "derived-" and 10 characters of a hash, as the MCS reference controller
// names it.
func DerivedName(namespace, name string) string {
	h := sha256.Sum256([]byte(namespace + "/" + name))
	return "derived-" + strings.ToLower(base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(h[:]))[:10]
}

// Derived is --vip-mode=derived-service: in each importing cluster, each
// ClusterSetIP import gets a selector-less ClusterIP Service of its own
// whose ClusterIP(s) become the import's ips, and the mirrored slices carry
// kubernetes.io/service-name=<derived> so kube-proxy routes the VIP to the
// remote endpoints. The VIP is per cluster and lives as long as the Service.
type Derived struct {
	members Members
	// refused: per cluster ID, the IP families its API server refused a
	// derived Service for (no Service range), and when; not asked again
	// for refusedFor, so that an import no VIP can be made for does not
	// send a failing create on every pass.
	refusedMu sync.Mutex
	refused   map[string]map[corev1.IPFamily]time.Time
	// wrote, when set (ReportWrites), is told of every write sent, so that
	// the controller's mcs_importer_writes_total counts Services too, and
	// its propagation metrics see the write carry the import's change.
	wrote func(m *members.Member, kind, verb, ns, svc, name string, err error)
}

// KindService is the kind derived-Service writes are reported with.
const KindService = "Service"

// ReportWrites makes d report every write it sends to f (svc: the import
// the Service is derived for; name: the Service's); call it before the
// first Assign or Release.
func (d *Derived) ReportWrites(f func(m *members.Member, kind, verb, ns, svc, name string, err error)) {
	d.wrote = f
}

// report tells of a write sent, and of what it returned.
func (d *Derived) report(m *members.Member, verb, ns, svc, name string, err error) {
	if d.wrote != nil {
		d.wrote(m, KindService, verb, ns, svc, name, err)
	}
}

// NewDerived returns the derived-Service provider over the members.
func NewDerived(ms Members) *Derived {
	return &Derived{members: ms, refused: map[string]map[corev1.IPFamily]time.Time{}}
}

// OwnedService reports whether svc is a derived Service we manage.
func OwnedService(svc *corev1.Service) bool {
	return svc.Labels[mcsapi.LabelAppManagedBy] == mcsapi.ManagedByImporter && svc.Labels[mcsapi.LabelDerivedFor] != ""
}

// Assign implements Provider: it makes sure the derived Service exists with
// the import's ports and session affinity and returns its ClusterIPs. When
// a write fails (a quota, a webhook), the assignment returned with the
// error is the Service that exists, if any: its VIP stays served, and an
// import whose Service could not be made names none.
func (d *Derived) Assign(ctx context.Context, clusterID string, desired *mcsv1beta1.ServiceImport) (Assignment, error) {
	m := d.members.Lookup(clusterID)
	if m == nil {
		return Assignment{}, fmt.Errorf("unknown cluster %q", clusterID)
	}
	name := DerivedName(desired.Namespace, desired.Name)
	want := derivedSpec(desired, name)
	api := m.Kube.CoreV1().Services(desired.Namespace)
	var cur *corev1.Service
	if c := m.Caches(); c != nil {
		cur = c.Service(desired.Namespace, name)
	}
	fams := desired.Spec.IPFamilies
	get := func(ctx context.Context) (*corev1.Service, error) { return api.Get(ctx, name, metav1.GetOptions{}) }
	// ours: the derived Service of this import. Someone else's Service
	// (or, after a 50-bit hash collision, the derived Service of another
	// import) with the name is never written.
	ours := func(svc *corev1.Service) bool {
		return OwnedService(svc) && svc.Labels[mcsapi.LabelDerivedFor] == desired.Name
	}
	// Create it when the cache has none; a create that finds one there
	// already (the cache was behind) adopts ours and yields to another's.
	// Its mutable parts are brought to want's below, one by one.
	cur, out, err := write.Ensure(ctx, write.Ops[*corev1.Service]{
		Get:      get,
		Create:   func(ctx context.Context) (*corev1.Service, error) { return d.create(ctx, m, want, fams) },
		Owned:    ours,
		UpToDate: func(*corev1.Service) bool { return true },
	}, cur)
	switch {
	case errors.Is(err, errNoFamily):
		// Not an error to retry: the import is written without a VIP,
		// and its Ready condition says why.
		return Assignment{Ready: familyNotSupported(fams)}, nil
	case err != nil && cur == nil:
		// No VIP is held; the slices keep the label they will need, so
		// that they are not rewritten twice.
		held := Assignment{SliceLabels: map[string]string{mcsapi.LabelKubeServiceName: name}}
		return held, fmt.Errorf("creating derived Service %s/%s: %w", desired.Namespace, name, err)
	case err != nil:
		return Assignment{}, err
	case out == write.Yielded:
		return Assignment{}, &members.NotOwnedError{Kind: KindService, Namespace: desired.Namespace, Name: name}
	}
	if wrongFamily(fams, cur) {
		// A Service's primary family cannot change: replace the Service
		// (the VIP changes with its family, as it must).
		var err error
		// (On failure the old Service may be gone: no VIP is held.)
		if cur, err = d.replace(ctx, m, want, fams); errors.Is(err, errNoFamily) {
			return Assignment{Ready: familyNotSupported(fams)}, nil
		} else if err != nil {
			return Assignment{}, err
		}
	}
	// update brings one mutable part of the Service to want's, in place
	// (the VIP stays), through write.Ensure.
	update := func(what string, upToDate func(*corev1.Service) bool, mutate func(*corev1.Service)) error {
		got, out, err := write.Ensure(ctx, write.Ops[*corev1.Service]{
			Get:      get,
			Owned:    ours,
			UpToDate: upToDate,
			Update: func(ctx context.Context, svc *corev1.Service) (*corev1.Service, error) {
				upd := svc.DeepCopy()
				mutate(upd)
				defer m.Writing(members.KindService, desired.Namespace, name, desired.Name)()
				got, err := api.Update(ctx, upd, metav1.UpdateOptions{})
				if err == nil {
					m.RecordWrite(got)
				}
				return got, err
			},
			Wrote: func(verb string, err error) { d.report(m, verb, desired.Namespace, desired.Name, name, err) },
		}, cur)
		if out == write.Yielded {
			return &members.NotOwnedError{Kind: KindService, Namespace: desired.Namespace, Name: name}
		}
		cur = got
		if err != nil {
			return fmt.Errorf("updating derived Service %s/%s %s: %w", desired.Namespace, name, what, err)
		}
		return nil
	}
	// failed is what a failed update leaves the import: the VIP the
	// Service holds, unless the name is someone else's now.
	failed := func(err error) (Assignment, error) {
		var no *members.NotOwnedError
		if errors.As(err, &no) {
			return Assignment{}, err
		}
		return assignment(cur, name), err
	}
	if want.Spec.IPFamilyPolicy != nil {
		// Single-stack <-> dual-stack: the policy and the families may
		// change in place (the primary VIP stays). PreferDualStack and
		// RequireDualStack count as one: a Service someone (or an
		// admission policy) made RequireDualStack is left so, not
		// rewritten on every pass.
		err := update("IP families", func(svc *corev1.Service) bool { return singleStack(want) == singleStack(svc) }, func(upd *corev1.Service) {
			upd.Spec.IPFamilyPolicy = want.Spec.IPFamilyPolicy
			if singleStack(want) {
				upd.Spec.IPFamilies = upd.Spec.IPFamilies[:min(1, len(upd.Spec.IPFamilies))]
				upd.Spec.ClusterIPs = upd.Spec.ClusterIPs[:min(1, len(upd.Spec.ClusterIPs))]
			}
			// Dual: the families stay as they are (the primary cannot
			// change); the API server adds the other where it has a range.
		})
		if err != nil {
			return failed(err)
		}
	}
	err = update("ports and session affinity", func(svc *corev1.Service) bool { return mutableSpecEqual(want, svc) }, func(upd *corev1.Service) {
		upd.Spec.Ports = want.Spec.Ports
		upd.Spec.SessionAffinity, upd.Spec.SessionAffinityConfig = want.Spec.SessionAffinity, want.Spec.SessionAffinityConfig
	})
	if err != nil {
		return failed(err)
	}
	a := assignment(cur, name)
	for i, p := range desired.Spec.Ports {
		if i < len(want.Spec.Ports) && want.Spec.Ports[i].Name != p.Name {
			if a.SlicePortNames == nil {
				a.SlicePortNames = map[string]string{}
			}
			a.SlicePortNames[p.Name] = want.Spec.Ports[i].Name
		}
	}
	return a, nil
}

// assignment is what derived Service cur (named name) gives its import.
func assignment(cur *corev1.Service, name string) Assignment {
	ips := cur.Spec.ClusterIPs
	if len(ips) == 0 && cur.Spec.ClusterIP != "" && cur.Spec.ClusterIP != corev1.ClusterIPNone {
		ips = []string{cur.Spec.ClusterIP}
	}
	return Assignment{
		IPs:         slices.Clone(ips),
		Annotations: map[string]string{mcsapi.AnnotationDerivedService: name},
		SliceLabels: map[string]string{mcsapi.LabelKubeServiceName: name},
	}
}

// singleStack reports whether svc's policy is SingleStack (unset counts
// as SingleStack, the API server's default).
func singleStack(svc *corev1.Service) bool {
	return svc.Spec.IPFamilyPolicy == nil || *svc.Spec.IPFamilyPolicy == corev1.IPFamilyPolicySingleStack
}

// wrongFamily reports whether derived Service cur's primary IP family is
// none of the import's families fams: then the Service must be replaced.
// A dual-stack import keeps a Service of either family (the cluster may
// have a range for one only, and its VIP stays while the import lives).
func wrongFamily(fams []corev1.IPFamily, cur *corev1.Service) bool {
	return len(fams) > 0 && len(cur.Spec.IPFamilies) > 0 && !slices.Contains(fams, cur.Spec.IPFamilies[0])
}

// replace deletes the derived Service named want.Name (it has the wrong
// primary family) and creates want in its place. It reads the Service
// first: a cache that has not seen an earlier replacement yet must not
// cause a second one.
func (d *Derived) replace(ctx context.Context, m *members.Member, want *corev1.Service, fams []corev1.IPFamily) (*corev1.Service, error) {
	api := m.Kube.CoreV1().Services(want.Namespace)
	live, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, err
	case !OwnedService(live):
		return nil, &members.NotOwnedError{Kind: KindService, Namespace: want.Namespace, Name: want.Name}
	case !wrongFamily(fams, live):
		return live, nil
	default:
		// A Service that replaced live meanwhile (the UID precondition
		// fails) is left alone; the create below then finds the name taken
		// and the next pass looks again.
		err := write.Delete(ctx, func(ctx context.Context, opts metav1.DeleteOptions) error {
			return api.Delete(ctx, want.Name, opts)
		}, live.UID, func(verb string, err error) {
			d.report(m, verb, want.Namespace, want.Labels[mcsapi.LabelDerivedFor], want.Name, err)
		})
		if err != nil {
			return nil, fmt.Errorf("replacing derived Service %s/%s (IP family): %w", want.Namespace, want.Name, err)
		}
		m.RecordDelete(live)
	}
	created, err := d.create(ctx, m, want, fams)
	if err != nil {
		return nil, fmt.Errorf("recreating derived Service %s/%s (IP family): %w", want.Namespace, want.Name, err)
	}
	return created, nil
}

// cachedOwned returns the member clusterID and, from its cache, the
// derived Service of ours for import namespace/name (nil when there is
// none, or the member is unknown or down).
func (d *Derived) cachedOwned(clusterID, namespace, name string) (*members.Member, *corev1.Service) {
	m := d.members.Lookup(clusterID)
	if m == nil {
		return nil, nil
	}
	c := m.Caches()
	if c == nil {
		return m, nil
	}
	if cur := c.Service(namespace, DerivedName(namespace, name)); cur != nil && OwnedService(cur) {
		return m, cur
	}
	return m, nil
}

// Holds reports whether the cache holds a derived Service of ours for
// import namespace/name in clusterID (which Release would delete).
func (d *Derived) Holds(clusterID, namespace, name string) bool {
	_, cur := d.cachedOwned(clusterID, namespace, name)
	return cur != nil
}

// Release implements Provider: it deletes the derived Service, if any.
func (d *Derived) Release(ctx context.Context, clusterID, namespace, name string) error {
	m, cur := d.cachedOwned(clusterID, namespace, name)
	if cur == nil {
		return nil // cheap when there is nothing to release
	}
	dn := cur.Name
	// Gone already, or replaced by another Service of that name (the
	// UID precondition fails): either way cur is gone, and a
	// replacement is never touched.
	err := write.Delete(ctx, func(ctx context.Context, opts metav1.DeleteOptions) error {
		return m.Kube.CoreV1().Services(namespace).Delete(ctx, dn, opts)
	}, cur.UID, func(verb string, err error) { d.report(m, verb, namespace, name, dn, err) })
	if err != nil {
		return fmt.Errorf("deleting derived Service %s/%s: %w", namespace, dn, err)
	}
	m.RecordDelete(cur)
	return nil
}

var _ Provider = (*Derived)(nil)

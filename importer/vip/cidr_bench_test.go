package vip

import (
	"context"
	"fmt"
	"math/big"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// fakeMember is a started member over fake clientsets holding objs (its
// caches are real informers); notify gets its events.
func fakeMember(tb testing.TB, id string, notify func(members.Event), objs ...runtime.Object) *members.Member {
	tb.Helper()
	m := &members.Member{ID: id, Context: id, Importing: true, ExportVersion: "v1beta1", ImportVersion: "v1beta1",
		Kube: kubefake.NewClientset(), MCS: mcsfake.NewSimpleClientset(objs...)}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	if err := m.Start(ctx, notify, time.Minute); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(m.Stop)
	return m
}

// ownedImport is an import mcs-importer made that records ips (none when
// empty) in mcs-dns.io/clusterset-ip.
func ownedImport(ns, name, ips string, created time.Time) *mcsv1beta1.ServiceImport {
	si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		CreationTimestamp: metav1.NewTime(created),
		Labels:            map[string]string{mcsapi.LabelManagedBy: mcsapi.ManagedByImporter},
		Annotations:       map[string]string{mcsapi.AnnotationUseClusterSetIP: "true"}},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}}
	if ips != "" {
		si.Annotations[mcsapi.AnnotationClusterSetIP] = ips
		si.Spec.IPs = []string{ips}
	}
	return si
}

func optedIn(ns, name string) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Annotations: map[string]string{mcsapi.AnnotationUseClusterSetIP: "true"}},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}}
}

// BenchmarkCIDRAssign: the cost of giving one new import its VIP (Assign,
// then Release once it goes) among n imports that hold one already, in
// each of three members. It should not grow with n.
func BenchmarkCIDRAssign(b *testing.B) {
	pfx := netip.MustParsePrefix("10.250.0.0/16")
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			// Where the allocator puts them: each probes from a hash of
			// its name for a free address.
			objs := make([]runtime.Object, n)
			taken := map[netip.Addr]bool{}
			size := size(pfx)
			for i := range objs {
				name := fmt.Sprintf("svc-%d", i)
				at := start("bench/"+name, corev1.IPv4Protocol, size)
				for taken[nth(pfx, at)] {
					at.Add(at, big.NewInt(1))
					if at.Cmp(size) >= 0 {
						at.SetInt64(0)
					}
				}
				a := nth(pfx, at)
				taken[a] = true
				objs[i] = ownedImport("bench", name, a.String(), created)
			}
			var cp atomic.Pointer[CIDR]
			notify := func(ev members.Event) {
				if c := cp.Load(); c != nil && ev.Kind == members.KindImport {
					c.ImportChanged(ev)
				}
			}
			ms := members.Static{fakeMember(b, "east", notify, objs...), fakeMember(b, "west", notify, objs...), fakeMember(b, "north", notify, objs...)}
			pool, err := ParsePool([]string{pfx.String()})
			if err != nil {
				b.Fatal(err)
			}
			c := NewCIDR(pool, ms)
			cp.Store(c)
			now := created.Add(time.Hour)
			c.now = func() time.Time { return now }
			ctx := context.Background()
			if _, err := c.Assign(ctx, "east", optedIn("new", "warm-up")); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				name := fmt.Sprintf("new-%d", i)
				got, err := c.Assign(ctx, "east", optedIn("new", name))
				if err != nil || len(got.IPs) != 1 {
					b.Fatal(got, err)
				}
				now = now.Add(pendingHold)
				if err := c.Release(ctx, "east", "new", name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package main

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
)

const scaleFloorNS = "bench-scale-floor"

// scaleFloor writes, into scaleFloorNS of every member, copies of the
// imports, mirrored slices and derived Services the importer wrote into
// scaleNS there: creates (and each import's status, a subresource the
// create drops), nothing read or decided, with as many
// writes in flight as the importer can have (its workers, each writing
// one key into up to 16 members at once).
func scaleFloor(ctx context.Context, set *cluster.Set, loaders []*Loader, r *MemberScaleResult) error {
	var jobs []func(context.Context) error
	var writes atomic.Int64
	for i, c := range set.Clusters {
		l := loaders[i]
		if err := createNS(ctx, l, scaleFloorNS); err != nil {
			return err
		}
		sis, err := c.MCS.MulticlusterV1beta1().ServiceImports(scaleNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		sel := labels.Set{mcsapi.LabelManagedBy: mcsapi.ManagedByImporter}.String()
		sls, err := c.Kube.DiscoveryV1().EndpointSlices(scaleNS).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return err
		}
		svcs, err := c.Kube.CoreV1().Services(scaleNS).List(ctx, metav1.ListOptions{LabelSelector: mcsapi.LabelDerivedFor})
		if err != nil {
			return err
		}
		for k := range svcs.Items {
			s := svcs.Items[k].DeepCopy()
			s.ObjectMeta = metav1.ObjectMeta{Namespace: scaleFloorNS, Name: s.Name, Labels: s.Labels, Annotations: s.Annotations}
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
			s.Status = corev1.ServiceStatus{}
			jobs = append(jobs, func(ctx context.Context) error {
				_, err := l.Kube.CoreV1().Services(scaleFloorNS).Create(ctx, s, metav1.CreateOptions{})
				writes.Add(1)
				return err
			})
		}
		for k := range sls.Items {
			s := sls.Items[k].DeepCopy()
			s.ObjectMeta = metav1.ObjectMeta{Namespace: scaleFloorNS, Name: s.Name, Labels: s.Labels, Annotations: s.Annotations}
			jobs = append(jobs, func(ctx context.Context) error {
				_, err := l.Kube.DiscoveryV1().EndpointSlices(scaleFloorNS).Create(ctx, s, metav1.CreateOptions{})
				writes.Add(1)
				return err
			})
		}
		for k := range sis.Items {
			si := sis.Items[k].DeepCopy()
			si.ObjectMeta = metav1.ObjectMeta{Namespace: scaleFloorNS, Name: si.Name, Labels: si.Labels, Annotations: si.Annotations}
			status := si.Status
			jobs = append(jobs, func(ctx context.Context) error {
				// The status is a subresource: a create drops it, so a
				// writer that leaves an import as the importer does
				// writes it again, as the importer must.
				created, err := l.MCS.MulticlusterV1beta1().ServiceImports(scaleFloorNS).Create(ctx, si, metav1.CreateOptions{})
				writes.Add(1)
				if err != nil || len(status.Clusters) == 0 {
					return err
				}
				created.Status = status
				_, err = l.MCS.MulticlusterV1beta1().ServiceImports(scaleFloorNS).UpdateStatus(ctx, created, metav1.UpdateOptions{})
				writes.Add(1)
				return err
			})
		}
	}
	// Interleave the members, as the importer's fan-out does.
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(jobs), func(a, b int) { jobs[a], jobs[b] = jobs[b], jobs[a] })
	r.FloorWorkers = floorWorkers * min(len(set.Clusters), 16)
	t0, cpu0 := time.Now(), selfCPUSeconds()
	if err := runParallel(ctx, r.FloorWorkers, jobs); err != nil {
		return err
	}
	r.FloorSeconds, r.FloorWrites = time.Since(t0).Seconds(), writes.Load()
	r.FloorCPUSeconds = selfCPUSeconds() - cpu0
	logf("member scale %d floor: %d writes in %.1f s with %d in flight; the writer's CPU %.1f s", r.Members, r.FloorWrites, r.FloorSeconds, r.FloorWorkers, r.FloorCPUSeconds)
	return nil
}

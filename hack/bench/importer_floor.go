package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/aggregate"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

const (
	floorNS = "bench-floor"
	// floorWorkers: mcs-importer's default --workers.
	floorWorkers = 16
)

// importerFloor measures what these API servers allow any importer that
// writes what mcs-importer's serve passes write: with the importer
// stopped, the bench exports another n Services (in floorNS) and, as each
// export is acknowledged, computes its import and mirrored slices with the
// importer's own pure rules (aggregate.Compute) and writes them into every
// member itself, floorWorkers exports at a time, in the importer's order
// (member by member, slices then import), reading nothing; statuses are
// left out (the importer writes them after the answers). The same DNS
// polling measures export-to-answer. The CoreDNS servers keep running, so
// they receive the same watch events as in the importer's burst.
func importerFloor(ctx context.Context, set *cluster.Set, names []string, imp *procs.Process, servers map[string]*Server, n int, headless bool, workers int) (*FloorResult, error) {
	if !headless {
		return nil, errors.New("measured for headless exports only (a ClusterSetIP export's serve pass also writes derived Services)")
	}
	children.Stop(imp)
	loaders := make([]*Loader, len(names))
	for k, name := range names {
		c := set.Get(name)
		_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: floorNS}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		if loaders[k], err = NewLoader(c.Config, floorWorkers); err != nil {
			return nil, err
		}
	}
	svcs, slices, err := createExportedServices(ctx, loaders[0], floorNS, n, headless, workers)
	if err != nil {
		return nil, err
	}
	logf("importer floor: %d Services with endpoints in %s; exporting them with the importer stopped", n, names[0])

	type ack struct {
		i  int
		se *mcsv1beta1.ServiceExport
	}
	acks := make(chan ack, n)
	res := &FloorResult{Workers: floorWorkers}
	var writes atomic.Int64
	var errMu sync.Mutex
	var writeErr error
	keep := func(err error) {
		if err != nil {
			errMu.Lock()
			writeErr = errors.Join(writeErr, err)
			errMu.Unlock()
		}
	}
	// wrote counts one write and keeps its error, if any.
	wrote := func(err error) {
		writes.Add(1)
		keep(err)
	}
	var wg sync.WaitGroup
	for range floorWorkers {
		wg.Go(func() {
			for a := range acks {
				out := aggregate.Compute(aggregate.Input{Namespace: floorNS, Name: svcName(a.i), Exports: []aggregate.Export{{
					ClusterID: names[0], Export: a.se, Service: svcs[a.i], Slices: []*discoveryv1.EndpointSlice{slices[a.i]},
				}}})
				if out.Import == nil {
					keep(fmt.Errorf("%s: no import computed", svcName(a.i)))
					continue
				}
				for _, l := range loaders {
					for _, s := range out.Slices {
						_, err := l.Kube.DiscoveryV1().EndpointSlices(floorNS).Create(ctx, s, metav1.CreateOptions{})
						wrote(err)
					}
					si := out.Import.DeepCopy()
					si.Status = mcsv1beta1.ServiceImportStatus{}
					_, err := l.MCS.MulticlusterV1beta1().ServiceImports(floorNS).Create(ctx, si, metav1.CreateOptions{})
					wrote(err)
				}
			}
		})
	}
	run, err := exportToAnswer(ctx, set, loaders[0], floorNS, n, names[1:], servers, headless, func(i int, se *mcsv1beta1.ServiceExport) {
		acks <- ack{i, se}
	})
	close(acks)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if writeErr != nil {
		return nil, fmt.Errorf("writing answers: %w", writeErr)
	}
	res.Writes = writes.Load()
	res.Unanswered = run.unanswered
	res.P50Ms, res.P99Ms, res.MaxMs = ms(percentileDur(run.lat, 0.5)), ms(percentileDur(run.lat, 0.99)), ms(percentileDur(run.lat, 1))
	res.AllSeconds = run.all.Seconds()
	logf("importer floor: %d writes; export-to-answer p50 %.0f ms p99 %.0f ms max %.0f ms; all answered after %.2f s; %d unanswered",
		res.Writes, res.P50Ms, res.P99Ms, res.MaxMs, res.AllSeconds, res.Unanswered)
	return res, nil
}

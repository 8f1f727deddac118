package members

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// UseFixedCaches gives m (Up from now on) a cache generation that holds
// objs and runs no informers: for unit tests of what reads the caches and
// writes through a fake clientset, where the cache and the API server must
// disagree (a cache behind, say). EndpointSlices mcs-importer manages are
// the mirrored ones, the others source slices.
func (m *Member) UseFixedCaches(objs ...runtime.Object) {
	idx := func(extra cache.Indexers) cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, extra)
	}
	done := make(chan struct{})
	close(done)
	c := &Caches{
		cancel:     func() {},
		done:       done,
		exports:    idx(nil),
		imports:    idx(nil),
		services:   idx(nil),
		namespaces: idx(nil),
		source:     idx(sliceIndexer(discoveryv1.LabelServiceName)),
		mirrored:   idx(sliceIndexer(mcsapi.LabelServiceName)),
		own:        newOwnWrites(),
	}
	for _, o := range objs {
		var dst cache.Indexer
		switch o := o.(type) {
		case *mcsv1beta1.ServiceExport:
			dst = c.exports
		case *mcsv1beta1.ServiceImport:
			dst = c.imports
		case *corev1.Service:
			dst = c.services
		case *corev1.Namespace:
			dst = c.namespaces
		case *discoveryv1.EndpointSlice:
			dst = c.source
			if Owned(o) {
				dst = c.mirrored
			}
		default:
			continue
		}
		_ = dst.Add(o)
	}
	m.health.mu.Lock()
	m.health.caches, m.health.state = c, Up
	m.health.mu.Unlock()
}

package mcs

// The informer transforms: ServiceImports and EndpointSlices become
// compact objects as they arrive, malformed ones are counted and logged
// once per version, and slices of untrusted managers are kept but never
// answer.

import (
	"errors"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mcs-dns/mcs-dns/internal/compact"
	"github.com/mcs-dns/mcs-dns/internal/listwatchjson"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// byService indexes compact slices by "<namespace>/<service>".
const byService = "service"

func indexByService(obj any) ([]string, error) {
	if s, ok := obj.(*compact.Slice); ok {
		return []string{s.ServiceKey()}, nil
	}
	return nil, nil
}

// transformImport turns a ServiceImport into a compact.Import as it
// enters the informer; malformed ones are logged and counted here, once
// per arriving version.
func transformImport(obj any) (any, error) {
	var imp *compact.Import
	switch o := obj.(type) {
	case *listwatchjson.ServiceImport:
		imp = compact.ImportFromJSON(o, time.Now())
	case *unstructured.Unstructured:
		imp = compact.ImportFromUnstructured(o, time.Now())
	default:
		return obj, nil // already transformed, or a tombstone
	}
	if imp.Err != nil {
		rejectedObjects.WithLabelValues(kindServiceImport).Inc()
		log.Warningf("skipping ServiceImport %s/%s: %v", imp.Namespace, imp.Name, imp.Err)
	} else if n := imp.Skips.Skipped(); n > 0 {
		rejectedObjects.WithLabelValues(kindImportEntry).Add(float64(n))
		log.Warningf("ServiceImport %s/%s: skipping %d malformed ips/ports entr(ies), the rest answers: %v", imp.Namespace, imp.Name, n, imp.Skips.FirstErr())
	}
	return imp, nil
}

func transformSlice(obj any) (any, error) {
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	s := compact.SliceFromEndpointSlice(es, time.Now())
	if s.Err != nil {
		rejectedObjects.WithLabelValues(kindEndpointSlice).Inc()
		log.Warningf("skipping EndpointSlice %s/%s: %v", s.Namespace, s.Name, s.Err)
	} else if n := s.Skips.Skipped(); n > 0 {
		rejectedObjects.WithLabelValues(kindEndpoint).Add(float64(n))
		log.Warningf("EndpointSlice %s/%s: skipping %d malformed endpoint(s): %v", s.Namespace, s.Name, n, s.Skips.FirstErr())
	}
	return s, nil
}

// transformTrustedSlice is transformSlice for the slices of a manager
// the stanza trusts (endpointslice_managers); any other slice is kept,
// for its events, but never answers: anyone who may create EndpointSlices
// in a namespace could otherwise put addresses, per-endpoint names and
// PTRs under a clusterset name and impersonate a cluster ID.
func (c *controller) transformTrustedSlice(obj any) (any, error) {
	out, err := transformSlice(obj)
	s, ok := out.(*compact.Slice)
	es, isSlice := obj.(*discoveryv1.EndpointSlice)
	if err != nil || !ok || !isSlice || s.Err != nil {
		return out, err
	}
	manager, source := es.Labels[discoveryv1.LabelManagedBy], es.Labels[mcsapi.LabelSourceManagedBy]
	if reason := compact.Untrusted(c.managers, manager, source); reason != "" {
		ignoredObjects.WithLabelValues(reason).Inc()
		log.Warningf("ignoring EndpointSlice %s/%s: managed-by %q (source managed-by %q) is not a trusted manager (%s; see endpointslice_managers)",
			es.Namespace, es.Name, manager, source, reason)
		s.Err = errUntrusted
	}
	return s, nil
}

var errUntrusted = errors.New("not from a trusted endpointslice manager")

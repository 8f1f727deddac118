package controller

import (
	"slices"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/mcs-dns/mcs-dns/importer/members"
)

// DefaultTrustedManagers are the endpointslice.kubernetes.io/managed-by
// values whose EndpointSlices are mirrored unless --endpointslice-managers
// says otherwise: the Kubernetes endpointslice controller's, which
// publishes the endpoints of a Service's selector. Anyone who may create
// EndpointSlices in an exporting namespace could otherwise put any address
// and hostname under a clusterset name in every member (and, with derived
// Services, have kube-proxy route the VIP there).
var DefaultTrustedManagers = []string{"endpointslice-controller.k8s.io"}

// Reasons an object is ignored (mcs_importer_ignored_objects_total).
const (
	ignoredNoManager        = "no_manager"
	ignoredUntrustedManager = "untrusted_manager"
)

// sliceTrust filters the source EndpointSlices of exported Services by
// their manager, and counts each version of a slice it leaves out once.
type sliceTrust struct {
	managers []string
	mu       sync.Mutex
	// counted: per "cluster/ns/name" key, the resourceVersion of each
	// slice (by UID) left out at its last reconcile, so that a version is
	// counted once and a slice logged once, however often the key is
	// reconciled.
	counted map[string]map[string]string
}

func newSliceTrust(managers []string) *sliceTrust {
	if managers == nil {
		managers = DefaultTrustedManagers
	}
	return &sliceTrust{managers: managers, counted: map[string]map[string]string{}}
}

// untrusted says why src is not mirrored ("" when it is).
func (t *sliceTrust) untrusted(src *discoveryv1.EndpointSlice) string {
	switch m := src.Labels[discoveryv1.LabelManagedBy]; {
	case m == "":
		return ignoredNoManager
	case !slices.Contains(t.managers, m):
		return ignoredUntrustedManager
	}
	return ""
}

// filter returns the slices of export key k in member m that may be
// mirrored. Each version of one left out is reported to ignored once,
// with first set the first time that slice is.
func (t *sliceTrust) filter(m *members.Member, k string, in []*discoveryv1.EndpointSlice, ignored func(s *discoveryv1.EndpointSlice, reason string, first bool)) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	var left map[string]string
	mk := m.ID + "/" + k
	for i, s := range in {
		reason := t.untrusted(s)
		if reason == "" {
			if out != nil {
				out = append(out, s)
			}
			continue
		}
		if out == nil {
			out = append(make([]*discoveryv1.EndpointSlice, 0, len(in)), in[:i]...)
		}
		if left == nil {
			left = map[string]string{}
		}
		uid := string(s.UID)
		left[uid] = s.ResourceVersion
		t.mu.Lock()
		rv, known := t.counted[mk][uid]
		t.mu.Unlock()
		if !known || rv != s.ResourceVersion {
			ignored(s, reason, !known)
		}
	}
	t.mu.Lock()
	if left == nil {
		delete(t.counted, mk)
	} else {
		t.counted[mk] = left
	}
	t.mu.Unlock()
	if out == nil {
		return in
	}
	return out
}

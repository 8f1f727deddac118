package controller

import (
	"slices"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/internal/policy"
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
	ignoredNoManager         = "no_manager"
	ignoredUntrustedManager  = "untrusted_manager"
	ignoredAddressNotAllowed = "address_not_allowed"
)

// kindEndpoint counts endpoint addresses left out of a slice.
const kindEndpoint = "Endpoint"

// sliceTrust filters the source EndpointSlices of exported Services: by
// their manager, and their addresses by the export policy's ranges. It
// counts what it leaves out of each version of a slice once.
type sliceTrust struct {
	managers []string
	mu       sync.Mutex
	// counted: per "cluster/ns/name" key, the resourceVersion of each
	// slice (by UID) something was left out of at its last reconcile, so
	// that a version is counted once and a slice logged once, however
	// often the key is reconciled.
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

// leftOut is what filter left out of one source slice: all of it
// (reason one of ignoredNoManager, ignoredUntrustedManager) or, with
// ignoredAddressNotAllowed, addresses endpoint addresses.
type leftOut struct {
	slice     *discoveryv1.EndpointSlice
	reason    string
	addresses int
	// first: the first time anything of this slice was left out.
	first bool
}

// filter returns the slices of export key k in member m that may be
// mirrored, their addresses outside pol's ranges for m removed (from
// copies: the cache's objects are never changed). What it leaves out of a
// slice version is reported to report once.
func (t *sliceTrust) filter(m *members.Member, k string, pol *policy.Policy, in []*discoveryv1.EndpointSlice, report func(leftOut)) []*discoveryv1.EndpointSlice {
	restrict := pol.RestrictsAddresses(m.ID)
	var out []*discoveryv1.EndpointSlice
	changed := false
	var left map[string]string
	mk := m.ID + "/" + k
	note := func(s *discoveryv1.EndpointSlice, lo leftOut) {
		if left == nil {
			left = map[string]string{}
		}
		uid := string(s.UID)
		left[uid] = s.ResourceVersion
		t.mu.Lock()
		rv, known := t.counted[mk][uid]
		t.mu.Unlock()
		if !known || rv != s.ResourceVersion {
			lo.slice, lo.first = s, !known
			report(lo)
		}
	}
	for _, s := range in {
		if reason := t.untrusted(s); reason != "" {
			note(s, leftOut{reason: reason})
			changed = true
			continue
		}
		if restrict {
			if kept, dropped := allowedAddresses(m.ID, pol, s); dropped > 0 {
				note(s, leftOut{reason: ignoredAddressNotAllowed, addresses: dropped})
				s, changed = kept, true
			}
		}
		out = append(out, s)
	}
	t.mu.Lock()
	if left == nil {
		delete(t.counted, mk)
	} else {
		t.counted[mk] = left
	}
	t.mu.Unlock()
	if !changed {
		return in
	}
	return out
}

// allowedAddresses is s without the addresses pol does not allow cluster
// id (a copy, when it drops any; an endpoint left without one goes), and
// how many it dropped.
func allowedAddresses(id string, pol *policy.Policy, s *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, int) {
	dropped := 0
	for _, e := range s.Endpoints {
		for _, a := range e.Addresses {
			if !pol.AddressAllowed(id, a) {
				dropped++
			}
		}
	}
	if dropped == 0 {
		return s, 0
	}
	c := s.DeepCopy()
	c.Endpoints = c.Endpoints[:0]
	for _, e := range s.Endpoints {
		e := *e.DeepCopy()
		e.Addresses = slices.DeleteFunc(e.Addresses, func(a string) bool { return !pol.AddressAllowed(id, a) })
		if len(e.Addresses) > 0 {
			c.Endpoints = append(c.Endpoints, e)
		}
	}
	return c, dropped
}

// endpointCount is the number of endpoint addresses of ss.
func endpointCount(ss []*discoveryv1.EndpointSlice) int {
	n := 0
	for _, s := range ss {
		for _, e := range s.Endpoints {
			n += len(e.Addresses)
		}
	}
	return n
}

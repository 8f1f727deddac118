package vip

import (
	"context"
	"errors"

	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// CIDROrDerived is --vip-mode=clusterset-cidr: an import whose exports opt
// in (the aggregate marks it mcs-dns.io/use-clusterset-ip=true) gets one
// VIP clusterset-wide from the CIDR; any other ClusterSetIP import gets its
// derived Service's VIP in each cluster, so that every ClusterSetIP import
// has an IP per family, as the MCS API asks. An import that opts in or out
// moves from one to the other (the VIP it leaves is released).
type CIDROrDerived struct {
	CIDR    *CIDR
	Derived *Derived
}

// NewCIDROrDerived returns the clusterset-cidr provider over the members.
func NewCIDROrDerived(pool *Pool, ms Members) *CIDROrDerived {
	return &CIDROrDerived{CIDR: NewCIDR(pool, ms), Derived: NewDerived(ms)}
}

// Assign implements Provider.
func (p *CIDROrDerived) Assign(ctx context.Context, clusterID string, desired *mcsv1beta1.ServiceImport) (Assignment, error) {
	// A failure of one side does not keep the other from being assigned
	// (see Provider.Assign): the errors are returned together.
	if desired.Annotations[mcsapi.AnnotationUseClusterSetIP] == "true" {
		relErr := p.Derived.Release(ctx, clusterID, desired.Namespace, desired.Name)
		a, err := p.CIDR.Assign(ctx, clusterID, desired)
		return a, errors.Join(relErr, err)
	}
	// Not opted in: the CIDR forgets any wait for an address.
	_, cidrErr := p.CIDR.Assign(ctx, clusterID, desired)
	a, err := p.Derived.Assign(ctx, clusterID, desired)
	return a, errors.Join(cidrErr, err)
}

// Release implements Provider.
func (p *CIDROrDerived) Release(ctx context.Context, clusterID, namespace, name string) error {
	return errors.Join(p.Derived.Release(ctx, clusterID, namespace, name), p.CIDR.Release(ctx, clusterID, namespace, name))
}

// Holds reports whether a derived Service is held for the import (see
// Derived.Holds).
func (p *CIDROrDerived) Holds(clusterID, namespace, name string) bool {
	return p.Derived.Holds(clusterID, namespace, name)
}

// WantsClusterSetIP implements ClusterSetIPs.
func (p *CIDROrDerived) WantsClusterSetIP(e *mcsv1beta1.ServiceExport) bool {
	return p.CIDR.WantsClusterSetIP(e)
}

// ImportChanged implements ClusterSetIPs.
func (p *CIDROrDerived) ImportChanged(ev members.Event) []string { return p.CIDR.ImportChanged(ev) }

// ReportWrites makes the derived Services' writes reported to f.
func (p *CIDROrDerived) ReportWrites(f func(m *members.Member, kind, verb, ns, svc, name string, err error)) {
	p.Derived.ReportWrites(f)
}

var (
	_ Provider      = (*CIDROrDerived)(nil)
	_ ClusterSetIPs = (*CIDROrDerived)(nil)
)

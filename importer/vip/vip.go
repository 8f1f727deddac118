// Package vip is the seam through which mcs-importer gives ClusterSetIP
// imports their VIPs (the import's spec.ips). The reconcile calls the
// Provider for every ClusterSetIP import it writes into an importing
// cluster, and Release whenever an import must have no VIP there (deleted,
// or Headless). None, Derived
// (--vip-mode=derived-service) and CIDR (--vip-mode=clusterset-cidr)
// implement it.
package vip

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/members"
)

// Members are the member clusters a provider reads and writes: those that
// have joined so far (a members.Set, or members.Static).
type Members interface {
	Members() []*members.Member
	Lookup(clusterID string) *members.Member
}

// Assignment is what a Provider adds to an import in one importing cluster.
type Assignment struct {
	// IPs become the import's spec.ips (same order as spec.ipFamilies).
	IPs []string
	// Annotations are added to the import's annotations (for example
	// multicluster.kubernetes.io/derived-service).
	Annotations map[string]string
	// SliceLabels are added to every mirrored EndpointSlice of the import
	// in that cluster (for example kubernetes.io/service-name=<derived>).
	SliceLabels map[string]string
	// SlicePortNames renames ports of the mirrored slices (import port
	// name -> name), where the Service the proxies route by names the
	// import's ports otherwise (a derived Service names an unnamed port
	// of a multi-port import "tcp-80": proxies match slice ports by name).
	SlicePortNames map[string]string
	// Ready, if set, replaces the import's Ready condition in that cluster
	// (for example Ready=False when no VIP can be allocated).
	Ready *metav1.Condition
}

// Provider assigns VIPs. Implementations keep their state in the member
// clusters' API servers, so that restarts and racing importers agree.
type Provider interface {
	// Assign returns the assignment for the desired import (spec and
	// metadata computed, no ips) in the importing cluster clusterID.
	// It is called on every reconcile and must be idempotent and cheap
	// when nothing changes. With an error it returns what the import
	// holds now (the VIPs that exist, none if none does), which the import
	// is written with: endpoints keep flowing while a VIP cannot be made,
	// and an import never names an address the cluster may have given to
	// another Service.
	Assign(ctx context.Context, clusterID string, desired *mcsv1beta1.ServiceImport) (Assignment, error)
	// Release is called whenever the import namespace/name must have no
	// VIP in clusterID: on every reconcile where the import must not exist
	// there (after deleting it, if it did), and for a Headless import. It
	// must be idempotent and cheap when there is nothing to release.
	Release(ctx context.Context, clusterID, namespace, name string) error
}

// ClusterSetIPs is a Provider of clusterset-wide VIPs, which it reads
// back from the imports (--vip-mode=clusterset-cidr). Its policy says
// which exports ask for one. It is told of every ServiceImport event and
// can run out of addresses: it then names the imports waiting for one, to
// be reconciled again when an event may have freed one.
type ClusterSetIPs interface {
	Provider
	// WantsClusterSetIP says whether an export asks for a clusterset-wide
	// VIP. Exports of one service that disagree conflict; the oldest
	// decides, and the import it asks for is marked
	// mcs-dns.io/use-clusterset-ip=true (which Assign reads).
	WantsClusterSetIP(e *mcsv1beta1.ServiceExport) bool
	// ImportChanged is told of every ServiceImport event (members.KindImport)
	// and returns the imports to reconcile again, the longest waiting
	// first.
	ImportChanged(ev members.Event) []string
}

// None assigns nothing: ClusterSetIP imports carry no ips.
type None struct{}

// Assign implements Provider.
func (None) Assign(context.Context, string, *mcsv1beta1.ServiceImport) (Assignment, error) {
	return Assignment{}, nil
}

// Release implements Provider.
func (None) Release(context.Context, string, string, string) error { return nil }

var _ Provider = None{}

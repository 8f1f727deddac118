// Package policy is the export policy: per source cluster ID (with a
// default), which namespaces a member may export from, how many endpoints
// one export may carry, and which addresses its endpoints may use. It is
// pure: Parse reads a policy, and its methods answer questions about
// exports; the importer reloads the file (Watch) and applies the answers.
package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"slices"

	"sigs.k8s.io/yaml"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// APIVersion and Kind name the file format.
const (
	APIVersion = "mcs-dns.io/v1alpha1"
	Kind       = "ExportPolicy"
)

// Protected are the namespaces no member may export from unless a rule
// allows them by name (a glob such as "*" or "kube-*" is not enough):
// what the cluster itself runs there must not be published clusterset-wide
// by accident, nor replaced in other members by a member that is not
// trusted.
var Protected = []string{"kube-system", "kube-public", "kube-node-lease"}

// File is the policy as written.
type File struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Default applies to every cluster Clusters does not name.
	Default Rules `json:"default"`
	// Clusters are rules per source cluster ID; each replaces Default
	// for that cluster (fields left out are Default's).
	Clusters map[string]Rules `json:"clusters,omitempty"`
}

// Rules are what one source cluster may export.
type Rules struct {
	// Namespaces: an export is allowed when its namespace matches an
	// Allow glob and no Deny glob (path.Match). Allow left out: every
	// namespace.
	Namespaces *Namespaces `json:"namespaces,omitempty"`
	// MaxEndpoints bounds the endpoints (addresses of its trusted
	// EndpointSlices, ready or not) of one export; an export over it is
	// not imported. Left out or 0: no bound.
	MaxEndpoints *int `json:"maxEndpoints,omitempty"`
	// AddressRanges are the CIDRs its endpoints' addresses may be in (its
	// pod and node CIDRs, say); an address outside them is dropped. Left
	// out or empty: any address.
	AddressRanges []string `json:"addressRanges,omitempty"`
}

// Namespaces are allow and deny lists of globs.
type Namespaces struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Policy is a parsed, checked policy. The zero Policy (and nil) allows
// every namespace but Protected, any number of endpoints, any address.
type Policy struct {
	def      rules
	clusters map[string]rules
}

type rules struct {
	// where names the rules in messages ("default", "clusters.east").
	where        string
	allow, deny  []string
	allowSet     bool
	maxEndpoints int
	ranges       []netip.Prefix
}

// Parse reads and checks a policy file: unknown fields, bad globs,
// CIDRs or cluster IDs are errors, so that a typo never loosens a rule.
func Parse(data []byte) (*Policy, error) {
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("export policy: %w", err)
	}
	if f.APIVersion != APIVersion || f.Kind != Kind {
		return nil, fmt.Errorf("export policy: want apiVersion %s and kind %s, got %q and %q", APIVersion, Kind, f.APIVersion, f.Kind)
	}
	var errs []error
	p := &Policy{clusters: map[string]rules{}}
	var err error
	if p.def, err = compile("default", f.Default, rules{}); err != nil {
		errs = append(errs, err)
	}
	for id, r := range f.Clusters {
		// The rule member IDs are held to: a key that breaks it could
		// never match a member.
		if err := mcsapi.ValidateClusterID(id); err != nil {
			errs = append(errs, fmt.Errorf("export policy: clusters: %w", err))
			continue
		}
		c, err := compile("clusters."+id, r, p.def)
		if err != nil {
			errs = append(errs, err)
		}
		p.clusters[id] = c
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// compile checks r; fields it leaves out are base's.
func compile(where string, r Rules, base rules) (rules, error) {
	out := base
	out.where = where
	var errs []error
	if r.Namespaces != nil {
		out.allow, out.deny, out.allowSet = r.Namespaces.Allow, r.Namespaces.Deny, r.Namespaces.Allow != nil
		for _, g := range append(slices.Clone(r.Namespaces.Allow), r.Namespaces.Deny...) {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				errs = append(errs, fmt.Errorf("export policy: %s.namespaces: %q is not a glob", where, g))
			}
		}
	}
	if r.MaxEndpoints != nil {
		if *r.MaxEndpoints < 0 {
			errs = append(errs, fmt.Errorf("export policy: %s.maxEndpoints must not be negative", where))
		}
		out.maxEndpoints = *r.MaxEndpoints
	}
	if r.AddressRanges != nil {
		out.ranges = nil
		for _, s := range r.AddressRanges {
			pfx, err := netip.ParsePrefix(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("export policy: %s.addressRanges: %q is not a CIDR", where, s))
				continue
			}
			out.ranges = append(out.ranges, pfx.Masked())
		}
	}
	return out, errors.Join(errs...)
}

func (p *Policy) rulesOf(clusterID string) rules {
	if p == nil {
		return rules{where: "default"}
	}
	if r, ok := p.clusters[clusterID]; ok {
		return r
	}
	return p.def
}

// Refusal says why an export breaks the policy.
type Refusal struct {
	// Reason is the ServiceExport Valid=False reason.
	Reason string
	// Message names the rule.
	Message string
}

// Reasons of a Refusal.
const (
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
	ReasonTooManyEndpoints    = "TooManyEndpoints"
)

// CheckNamespace says whether cluster clusterID may export from namespace
// ns (nil: it may).
func (p *Policy) CheckNamespace(clusterID, ns string) *Refusal {
	r := p.rulesOf(clusterID)
	for i, g := range r.deny {
		if ok, _ := path.Match(g, ns); ok {
			return &Refusal{ReasonNamespaceNotAllowed, fmt.Sprintf("the export policy denies namespace %s to cluster %s (%s.namespaces.deny[%d] %q)", ns, clusterID, r.where, i, g)}
		}
	}
	if slices.Contains(Protected, ns) {
		if !slices.Contains(r.allow, ns) {
			return &Refusal{ReasonNamespaceNotAllowed, fmt.Sprintf("namespace %s is exported only where the export policy allows it by name (%s.namespaces.allow)", ns, r.where)}
		}
		return nil
	}
	if !r.allowSet {
		return nil
	}
	for _, g := range r.allow {
		if ok, _ := path.Match(g, ns); ok {
			return nil
		}
	}
	return &Refusal{ReasonNamespaceNotAllowed, fmt.Sprintf("the export policy allows cluster %s no namespace %s (%s.namespaces.allow)", clusterID, ns, r.where)}
}

// CheckEndpoints says whether an export of cluster clusterID with n
// endpoints is within its budget (nil: it is).
func (p *Policy) CheckEndpoints(clusterID string, n int) *Refusal {
	r := p.rulesOf(clusterID)
	if r.maxEndpoints > 0 && n > r.maxEndpoints {
		return &Refusal{ReasonTooManyEndpoints, fmt.Sprintf("the export has %d endpoints, over the export policy's %d for cluster %s (%s.maxEndpoints)", n, r.maxEndpoints, clusterID, r.where)}
	}
	return nil
}

// RestrictsAddresses reports whether cluster clusterID's endpoints must
// be in given ranges (AddressAllowed then says which).
func (p *Policy) RestrictsAddresses(clusterID string) bool {
	return len(p.rulesOf(clusterID).ranges) > 0
}

// AddressAllowed reports whether an endpoint address of cluster clusterID
// is in its ranges (always, without ranges; never, for an address that
// does not parse).
func (p *Policy) AddressAllowed(clusterID, addr string) bool {
	r := p.rulesOf(clusterID)
	if len(r.ranges) == 0 {
		return true
	}
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, pfx := range r.ranges {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

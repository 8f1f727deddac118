// Package answers turns one ServiceImport and its EndpointSlices into the
// DNS records the Multi-Cluster Services DNS specification (KEP-1645,
// schema 1.0.0) gives them, precomputed, and publishes them in an Index
// that queries read without locks.
package answers

import "net/netip"

// Type is a ServiceImport type.
type Type uint8

const (
	// ClusterSetIP imports answer with their VIPs.
	ClusterSetIP Type = iota + 1
	// Headless imports answer with the addresses of their ready endpoints.
	Headless
)

func (t Type) String() string {
	switch t {
	case ClusterSetIP:
		return "ClusterSetIP"
	case Headless:
		return "Headless"
	}
	return "Unknown"
}

// Port is one port of an import. Only named ports get SRV records.
type Port struct {
	Name     string // lower-case IANA service name, "" when unnamed
	Protocol string // lower-case: "tcp", "udp" or "sctp"
	Port     uint16
}

// Service is the version-neutral view of one ServiceImport, validated.
type Service struct {
	Namespace string
	Name      string
	IPs       []netip.Addr
	Ports     []Port
	// TrafficDistribution is spec.trafficDistribution ("" when unset):
	// values that ask for closeness make headless answers local-first by
	// default (see Shaping).
	TrafficDistribution string
	Type                Type
	// EndpointsAbsent is status.endpointSliceObjects == Absent: the
	// importer publishes no EndpointSlices, so no endpoint answers exist.
	EndpointsAbsent bool
}

// Key is the service's key in the Index: "<name>.<namespace>", the way
// the two labels appear in a query name.
func (s *Service) Key() string { return Key(s.Namespace, s.Name) }

// Key returns the Index key of service name in namespace.
func Key(namespace, name string) string { return name + "." + namespace }

// Endpoint is one ready endpoint of an EndpointSlice, validated: the
// only endpoints DNS answers with (internal/compact keeps no others).
type Endpoint struct {
	Addresses []netip.Addr
	// Hostname is the endpoint's hostname, "" when it has none.
	Hostname string
}

// Slice is the part of one EndpointSlice that answers need.
type Slice struct {
	// Name of the EndpointSlice, to order slices deterministically.
	Name string
	// ClusterID is the source-cluster label: a DNS subdomain, possibly of
	// several labels.
	ClusterID string
	// Region is the source-region label: the source cluster's region,
	// "" when it has none (or the label is not a region).
	Region    string
	Endpoints []Endpoint
}

// Config is what Build needs besides the objects.
type Config struct {
	// Zones are the forward zones served, lower-case FQDNs. PTR targets
	// are names in Zones[0].
	Zones []string
	// TTL of every record.
	TTL uint32
	// Shaping shapes headless answers (nil: locality none, no rotation,
	// no cap; answers still fit the client's buffer).
	Shaping *Shaping
}

// Package dnsname parses query names of the Multi-Cluster Services zone
// (KEP-1645 DNS specification) into their parts, without allocating: every
// string it returns is a substring of the query name.
package dnsname

import "strings"

// Kind says what a name under the zone is.
type Kind uint8

const (
	// Unknown is a name the spec never defines (NXDOMAIN).
	Unknown Kind = iota
	// Apex is the zone itself.
	Apex
	// DNSVersion is dns-version.<zone>.
	DNSVersion
	// NSHost is ns.dns.<zone>, the target of the apex NS record.
	NSHost
	// DNSNode is dns.<zone>, an empty non-terminal above NSHost.
	DNSNode
	// SvcNode is svc.<zone>, an empty non-terminal.
	SvcNode
	// Namespace is <ns>.svc.<zone>.
	Namespace
	// Service is <svc>.<ns>.svc.<zone> or a name below it (Prefix != "").
	Service
)

var kindNames = [...]string{"Unknown", "Apex", "DNSVersion", "NSHost", "DNSNode", "SvcNode", "Namespace", "Service"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(?)"
}

// Name is a parsed query name. Its strings are substrings of the query.
type Name struct {
	Kind Kind
	// Namespace is set for Namespace and Service names.
	Namespace string
	// Service is set for Service names.
	Service string
	// Key is "<svc>.<ns>", the service's key in the answer index.
	Key string
	// Prefix is the part of a Service name below <svc>.<ns>.svc.<zone>,
	// without its trailing dot: "" for the service name itself,
	// "_http._tcp" for a port, "web-0.east" for an endpoint.
	Prefix string
}

// Label names the special labels of the zone.
const (
	labelSvc        = "svc"
	labelDNSVersion = "dns-version"
	labelDNS        = "dns"
	labelNS         = "ns"
)

// Parse splits qname, a lower-case fully qualified name inside zone (also
// lower-case and fully qualified; InZone must hold), into its parts.
// Escaped characters never occur in the names the spec defines, so a name
// holding a backslash is Unknown.
func Parse(qname, zone string) Name {
	rel, ok := Relative(qname, zone)
	if !ok {
		return Name{}
	}
	if rel == "" {
		return Name{Kind: Apex}
	}
	// Escapes and empty labels never occur in the names of the spec.
	if strings.IndexByte(rel, '\\') >= 0 || rel[0] == '.' || rel[len(rel)-1] == '.' || strings.Contains(rel, "..") {
		return Name{}
	}
	switch rel {
	case labelDNSVersion:
		return Name{Kind: DNSVersion}
	case labelDNS:
		return Name{Kind: DNSNode}
	case labelNS + "." + labelDNS:
		return Name{Kind: NSHost}
	case labelSvc:
		return Name{Kind: SvcNode}
	}
	// <rest>.svc
	rest, ok := cutLabel(rel, labelSvc)
	if !ok {
		return Name{}
	}
	i := strings.LastIndexByte(rest, '.')
	ns := rest[i+1:]
	if ns == "" {
		return Name{}
	}
	if i < 0 {
		return Name{Kind: Namespace, Namespace: ns}
	}
	rest = rest[:i]
	j := strings.LastIndexByte(rest, '.')
	svc := rest[j+1:]
	if svc == "" {
		return Name{}
	}
	n := Name{Kind: Service, Namespace: ns, Service: svc, Key: rel[j+1 : len(rel)-len(labelSvc)-1]}
	if j >= 0 {
		n.Prefix = rest[:j]
		if n.Prefix == "" {
			return Name{}
		}
	}
	return n
}

// cutLabel removes the last label of name if it equals label, and the dot
// before it: ("a.b.svc", "svc") -> ("a.b", true). A name that is only the
// label or does not end in it gives false.
func cutLabel(name, label string) (string, bool) {
	if len(name) <= len(label)+1 || !strings.HasSuffix(name, label) || name[len(name)-len(label)-1] != '.' {
		return "", false
	}
	return name[:len(name)-len(label)-1], true
}

// Relative returns qname without zone and the dot between them ("" for the
// apex), and whether qname is in zone at all. Both are lower-case FQDNs.
func Relative(qname, zone string) (string, bool) {
	if !InZone(qname, zone) {
		return "", false
	}
	if qname == zone {
		return "", true
	}
	if zone == "." {
		return qname[:len(qname)-1], true
	}
	return qname[:len(qname)-len(zone)-1], true
}

// InZone reports whether qname equals zone or is below it; both are
// lower-case FQDNs. An escaped dot ("a\.zone.") is not a label boundary.
func InZone(qname, zone string) bool {
	if qname == zone || zone == "." {
		return qname != "" && qname[len(qname)-1] == '.'
	}
	if len(qname) <= len(zone) || !strings.HasSuffix(qname, zone) {
		return false
	}
	dot := len(qname) - len(zone) - 1
	if qname[dot] != '.' {
		return false
	}
	// The dot is a label boundary unless an odd number of backslashes
	// escapes it.
	n := 0
	for i := dot - 1; i >= 0 && qname[i] == '\\'; i-- {
		n++
	}
	return n%2 == 0
}

// Match returns the index of the longest zone that holds qname, or -1.
func Match(qname string, zones []string) int {
	best := -1
	for i, z := range zones {
		if InZone(qname, z) && (best < 0 || len(z) > len(zones[best])) {
			best = i
		}
	}
	return best
}

// Lower returns s in ASCII lower case; it allocates only when s holds an
// upper-case letter. DNS names compare case-insensitively in ASCII only
// (RFC 4343), so non-ASCII bytes are left alone.
func Lower(s string) string {
	i := 0
	for ; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			break
		}
	}
	if i == len(s) {
		return s
	}
	b := []byte(s)
	for ; i < len(b); i++ {
		if c := b[i]; 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

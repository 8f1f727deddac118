// Package stanza parses the options of an mcs Corefile stanza that decide
// its answers (its zones, the trusted EndpointSlice managers, and the
// shaping options cluster_id, region, region_property, locality, rotate
// and max_answers) and reads the cluster ID from the About API as the
// plugin does. plugin/mcs's setup
// and `kubectl mcs explain --corefile` share it, so that explain computes
// the answers of the CoreDNS it explains without linking CoreDNS's server
// (plugin/mcs would double the kubectl plugin's binary).
package stanza

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/coredns/caddy/caddyfile"
	"github.com/coredns/coredns/plugin"
	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// Name is the plugin's directive.
const Name = "mcs"

// Defaults and limits of the options.
const (
	DefaultZone = "clusterset.local."
	// MaxAnswers bounds max_answers: more A records than this never fit
	// in a DNS message (65,535 octets, 16 per record).
	MaxAnswers = 4096
)

// Options are the options of a stanza that decide answers besides the
// objects, as Parse reads them.
type Options struct {
	// Managers are the trusted endpointslice.kubernetes.io/managed-by
	// values (endpointslice_managers); nil: any but the Kubernetes
	// endpointslice controller's.
	Managers []string
	// Shaping: cluster_id and region (else read from the
	// ClusterProperties at start-up), locality, rotate, max_answers.
	Shaping answers.Shaping
	// RegionProperty is the ClusterProperty the region is read from when
	// there is no region option (region_property; "":
	// mcsapi.RegionProperty).
	RegionProperty string
}

// Parse parses the option d is at (d.Val() is its name) when it is one
// of those Options holds, and reports whether it was.
func (o *Options) Parse(d *caddyfile.Dispenser) (bool, error) {
	switch d.Val() {
	case "endpointslice_managers":
		args := d.RemainingArgs()
		if len(args) == 0 {
			return true, d.ArgErr()
		}
		for _, m := range args {
			// MANAGER, or MANAGER/SOURCE: both label values.
			for _, part := range strings.SplitN(m, "/", 2) {
				if errs := validation.IsValidLabelValue(part); len(errs) > 0 || part == "" {
					if part == "" {
						errs = append(errs, "empty")
					}
					return true, d.Errf("endpointslice_managers: %q is neither MANAGER nor MANAGER/SOURCE: %q is not a label value: %s", m, part, strings.Join(errs, "; "))
				}
			}
			if !slices.Contains(o.Managers, m) {
				o.Managers = append(o.Managers, m)
			}
		}
	case "cluster_id":
		args := d.RemainingArgs()
		if len(args) != 1 {
			return true, d.ArgErr()
		}
		if err := mcsapi.ValidateClusterID(args[0]); err != nil {
			return true, d.Errf("cluster_id: %v", err)
		}
		o.Shaping.ClusterID = args[0]
	case "region":
		args := d.RemainingArgs()
		if len(args) != 1 {
			return true, d.ArgErr()
		}
		if err := mcsapi.ValidateRegion(args[0]); err != nil {
			return true, d.Errf("region: %v", err)
		}
		o.Shaping.Region = args[0]
	case "region_property":
		args := d.RemainingArgs()
		if len(args) != 1 {
			return true, d.ArgErr()
		}
		if err := mcsapi.ValidateRegionProperty(args[0]); err != nil {
			return true, d.Errf("region_property: %v", err)
		}
		o.RegionProperty = args[0]
	case "locality":
		args := d.RemainingArgs()
		if len(args) != 1 {
			return true, d.ArgErr()
		}
		l, err := ParseLocality(args[0])
		if err != nil {
			return true, d.Err(err.Error())
		}
		o.Shaping.Locality = l
	case "rotate":
		if len(d.RemainingArgs()) != 0 {
			return true, d.ArgErr()
		}
		o.Shaping.Rotate = true
	case "max_answers":
		args := d.RemainingArgs()
		if len(args) != 1 {
			return true, d.ArgErr()
		}
		n, err := ParseMaxAnswers(args[0])
		if err != nil {
			return true, d.Err(err.Error())
		}
		o.Shaping.MaxAnswers = n
	default:
		return false, nil
	}
	return true, nil
}

// ParseLocality reads the argument of locality.
func ParseLocality(s string) (answers.Locality, error) {
	switch s {
	case "local-first":
		return answers.LocalityLocalFirst, nil
	case "none":
		return answers.LocalityNone, nil
	}
	return 0, fmt.Errorf("locality %q is neither local-first nor none", s)
}

// LocalityString is the option's spelling of l ("" for the default).
func LocalityString(l answers.Locality) string {
	switch l {
	case answers.LocalityLocalFirst:
		return "local-first"
	case answers.LocalityNone:
		return "none"
	}
	return ""
}

// ParseMaxAnswers reads the argument of max_answers.
func ParseMaxAnswers(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxAnswers {
		return 0, fmt.Errorf("max_answers %q is not a number in 1..%d", s, MaxAnswers)
	}
	return n, nil
}

// MaxForwardZone is the longest forward zone (as an FQDN) under which
// every service name and SRV name with a port name of up to 15 characters
// (the usual IANA service names) fits RFC 1035's 255 octets (254
// characters): "_" + a 15-character port name + "._sctp." + a
// 63-character service + "." + a 63-character namespace + ".svc." takes
// 155. Port names may be longer (up to 63, DNS labels); an SRV name that
// would then be too long is left out by answers.Build.
const MaxForwardZone = 254 - 155

// Zones normalises the zones of a stanza, its arguments args; CIDRs
// become reverse zones. Without zones the plugin serves clusterset.local.
// At least one zone must be a forward one: it names the services.
func Zones(d *caddyfile.Dispenser, args []string) ([]string, error) {
	if len(args) == 0 {
		return []string{DefaultZone}, nil
	}
	var zones []string
	for _, a := range args {
		hosts, port, err := plugin.SplitHostPort(a)
		if err != nil {
			return nil, d.Errf("zone %q: %v", a, err)
		}
		if port != "" {
			return nil, d.Errf("zone %q: a zone of the mcs plugin takes no port", a)
		}
		for _, h := range hosts {
			z := plugin.Name(h).Normalize()
			if !validZone(z) {
				return nil, d.Errf("zone %q is not a valid domain name", a)
			}
			if !IsReverse(z) && len(z) > MaxForwardZone {
				return nil, d.Errf("zone %q is too long: a forward zone may have at most %d characters, so that every name below it (_<port>._<proto>.<service>.<namespace>.svc.<zone>) fits in 255 octets", a, MaxForwardZone)
			}
			if !slices.Contains(zones, z) {
				zones = append(zones, z)
			}
		}
	}
	if len(ForwardZones(zones)) == 0 {
		return nil, d.Errf("zones %v: at least one zone must be a forward (non-reverse) zone", args)
	}
	return zones, nil
}

// ForwardZones are the zones that are not reverse ones, in order.
func ForwardZones(zones []string) []string {
	var out []string
	for _, z := range zones {
		if !IsReverse(z) {
			out = append(out, z)
		}
	}
	return out
}

// IsReverse reports whether zone is in-addr.arpa., ip6.arpa. or below
// them (dnsutil.IsReverse misses the two themselves).
func IsReverse(zone string) bool {
	for _, r := range []string{"in-addr.arpa.", "ip6.arpa."} {
		if zone == r || strings.HasSuffix(zone, "."+r) {
			return true
		}
	}
	return false
}

// validZone accepts lower-case FQDNs of letters, digits, '-' and '_'.
func validZone(z string) bool {
	if _, ok := dns.IsDomainName(z); !ok {
		return false
	}
	if z == "." {
		return true
	}
	for _, l := range strings.Split(strings.TrimSuffix(z, "."), ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Stanza is one mcs stanza of a Corefile, as Read reads it.
type Stanza struct {
	// Keys are the keys of its server block; File and Line where the
	// stanza starts.
	Keys  []string
	File  string
	Line  int
	Zones []string
	Options
}

// Read reads the mcs stanzas of a Corefile (imports and environment
// variables expanded as CoreDNS expands them): each one's zones and
// Options. It skips the other options (kubeconfig, ttl, namespaces,
// fallthrough): they do not change answers, and CoreDNS checks them.
func Read(filename string, r io.Reader) ([]Stanza, error) {
	blocks, err := caddyfile.Parse(filename, r, nil)
	if err != nil {
		return nil, err
	}
	var out []Stanza
	for _, b := range blocks {
		toks := b.Tokens[Name]
		if len(toks) == 0 {
			continue
		}
		d := caddyfile.NewDispenserTokens(filename, toks)
		for n := 0; d.Next(); n++ {
			if n > 0 {
				return nil, d.Errf("server block %s has more than one mcs stanza", strings.Join(b.Keys, " "))
			}
			s := Stanza{Keys: b.Keys, File: d.File(), Line: d.Line()}
			if s.Zones, err = Zones(&d, d.RemainingArgs()); err != nil {
				return nil, err
			}
			for d.NextBlock() {
				if ok, err := s.Parse(&d); err != nil {
					return nil, err
				} else if !ok {
					d.RemainingArgs()
				}
			}
			out = append(out, s)
		}
	}
	return out, nil
}

package vip

import (
	"errors"
	"fmt"

	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// The VIP models, as --vip-mode names them.
const (
	ModeDerived = "derived-service"
	ModeCIDR    = "clusterset-cidr"
	ModeNone    = "none"
)

// Config is what the VIP flags say.
type Config struct {
	// Mode is --vip-mode.
	Mode string
	// CIDRs are the --clusterset-cidr ranges (clusterset-cidr mode).
	CIDRs []string
	// ClusterSetIPDefault is --clusterset-ip-default: in clusterset-cidr
	// mode, whether an export without the mcs-dns.io/use-clusterset-ip
	// annotation asks for a clusterset-wide VIP.
	ClusterSetIPDefault bool
}

// Validate says what is wrong with the flags, naming them.
func (c Config) Validate() []error {
	var errs []error
	switch c.Mode {
	case ModeDerived, ModeNone:
		if len(c.CIDRs) > 0 {
			errs = append(errs, fmt.Errorf("--clusterset-cidr needs --vip-mode=%s", ModeCIDR))
		}
		if c.ClusterSetIPDefault {
			errs = append(errs, fmt.Errorf("--clusterset-ip-default needs --vip-mode=%s", ModeCIDR))
		}
	case ModeCIDR:
		if _, err := ParsePool(c.CIDRs); err != nil {
			errs = append(errs, fmt.Errorf("--vip-mode=%s needs a valid --clusterset-cidr: %w", ModeCIDR, err))
		}
	default:
		errs = append(errs, fmt.Errorf("--vip-mode must be %s, %s or %s, not %q", ModeDerived, ModeCIDR, ModeNone, c.Mode))
	}
	return errs
}

// ForMode builds the Provider of c.Mode over the members. leftovers, in
// none mode, releases what another mode made (derived Services, whose
// ClusterIPs kube-proxy would otherwise route for ever); nil otherwise.
func ForMode(c Config, ms Members) (p, leftovers Provider, err error) {
	switch c.Mode {
	case ModeDerived:
		return NewDerived(ms), nil, nil
	case ModeCIDR:
		pool, err := ParsePool(c.CIDRs)
		if err != nil {
			return nil, nil, err
		}
		p := NewCIDROrDerived(pool, ms)
		p.CIDR.Default = c.ClusterSetIPDefault
		return p, nil, nil
	case ModeNone:
		return None{}, NewDerived(ms), nil
	}
	return nil, nil, errors.Join(c.Validate()...)
}

// OptIn is the clusterset-cidr policy: whether export e asks for a
// clusterset-wide VIP. Its mcs-dns.io/use-clusterset-ip annotation
// decides when it is "true" or "false", else def
// (--clusterset-ip-default).
func OptIn(e *mcsv1beta1.ServiceExport, def bool) bool {
	switch e.Annotations[mcsapi.AnnotationUseClusterSetIP] {
	case "true":
		return true
	case "false":
		return false
	}
	return def
}

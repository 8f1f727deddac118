package vip

import "fmt"

// The VIP models, as --vip-mode names them.
const (
	ModeDerived = "derived-service"
	ModeCIDR    = "clusterset-cidr"
	ModeNone    = "none"
)

// ForMode builds the Provider of a --vip-mode over the members: cidrs are
// the --clusterset-cidr ranges (clusterset-cidr mode). leftovers, in none
// mode, releases what another mode made (derived Services, whose
// ClusterIPs kube-proxy would otherwise route for ever); nil otherwise.
func ForMode(mode string, cidrs []string, ms Members) (p, leftovers Provider, err error) {
	switch mode {
	case ModeDerived:
		return NewDerived(ms), nil, nil
	case ModeCIDR:
		pool, err := ParsePool(cidrs)
		if err != nil {
			return nil, nil, err
		}
		return NewCIDROrDerived(pool, ms), nil, nil
	case ModeNone:
		return None{}, NewDerived(ms), nil
	}
	return nil, nil, fmt.Errorf("unknown VIP mode %q", mode)
}

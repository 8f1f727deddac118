package vip

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ErrExhausted is returned when a pool has no free address left for an
// import. The import is still written (without that VIP) and reports
// Ready=False; other imports are unaffected.
var ErrExhausted = errors.New("ClusterSet CIDR exhausted")

// Pool is the set of CIDRs clusterset-wide VIPs come from: at most one IPv4
// and one IPv6 prefix.
type Pool struct {
	v4, v6 netip.Prefix
}

// ParsePool parses the --clusterset-cidr values.
func ParsePool(cidrs []string) (*Pool, error) {
	p := &Pool{}
	if len(cidrs) == 0 {
		return nil, errors.New("no ClusterSet CIDR given")
	}
	for _, s := range cidrs {
		pfx, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("ClusterSet CIDR %q: %w", s, err)
		}
		if pfx != pfx.Masked() {
			return nil, fmt.Errorf("ClusterSet CIDR %q has host bits set (did you mean %s?)", s, pfx.Masked())
		}
		dst := &p.v4
		if pfx.Addr().Is6() {
			dst = &p.v6
			if pfx.Addr().Is4In6() {
				return nil, fmt.Errorf("ClusterSet CIDR %q: IPv4-mapped IPv6 is not allowed", s)
			}
		}
		if dst.IsValid() {
			return nil, fmt.Errorf("ClusterSet CIDR %q: at most one CIDR per IP family (already have %s)", s, *dst)
		}
		if pfx.Addr().BitLen()-pfx.Bits() < 2 {
			return nil, fmt.Errorf("ClusterSet CIDR %q is too small: it needs at least 4 addresses", s)
		}
		*dst = pfx
	}
	return p, nil
}

// Families lists the pool's IP families, IPv4 first.
func (p *Pool) Families() []corev1.IPFamily {
	var out []corev1.IPFamily
	if p.v4.IsValid() {
		out = append(out, corev1.IPv4Protocol)
	}
	if p.v6.IsValid() {
		out = append(out, corev1.IPv6Protocol)
	}
	return out
}

func (p *Pool) prefix(f corev1.IPFamily) netip.Prefix {
	if f == corev1.IPv6Protocol {
		return p.v6
	}
	return p.v4
}

// Contains reports whether a is in the pool.
func (p *Pool) Contains(a netip.Addr) bool {
	return (p.v4.IsValid() && p.v4.Contains(a)) || (p.v6.IsValid() && p.v6.Contains(a))
}

// size is the number of usable addresses of a prefix: all but the first
// (the network address) and, for IPv4, the last (broadcast), so that no VIP
// looks like either.
func size(pfx netip.Prefix) *big.Int {
	n := new(big.Int).Lsh(big.NewInt(1), uint(pfx.Addr().BitLen()-pfx.Bits()))
	n.Sub(n, big.NewInt(1))
	if pfx.Addr().Is4() {
		n.Sub(n, big.NewInt(1))
	}
	return n
}

// nth returns the i-th usable address (0-based) of pfx.
func nth(pfx netip.Prefix, i *big.Int) netip.Addr {
	base := new(big.Int).SetBytes(pfx.Addr().AsSlice())
	base.Add(base, big.NewInt(1)) // skip the network address
	base.Add(base, i)
	raw := base.FillBytes(make([]byte, pfx.Addr().BitLen()/8))
	a, _ := netip.AddrFromSlice(raw)
	return a
}

// start is where key's probe begins in a pool of n addresses: a hash, so
// that importers that never talk to each other pick the same first
// candidate for the same service.
func start(key string, f corev1.IPFamily, n *big.Int) *big.Int {
	h := sha256.Sum256([]byte(string(f) + "/" + key))
	v := new(big.Int).SetUint64(binary.BigEndian.Uint64(h[:8]))
	return v.Mod(v, n)
}

// Claim records that the import Key holds IPs, as seen in some member
// cluster since Since (that import's creation time there).
type Claim struct {
	Key   string
	IPs   []netip.Addr
	Since time.Time
}

// earlier orders claims: the older one wins an address; ties go to the
// smaller key, so every importer decides the same way.
func earlier(a, b Claim) bool {
	if !a.Since.Equal(b.Since) {
		return a.Since.Before(b.Since)
	}
	return a.Key < b.Key
}

// Choose returns key's VIPs, one per wanted family the pool has, given the
// claims seen across the clusterset (including key's own). It is pure and
// deterministic, so every importer, racing or not, converges on the same
// answer once they see the same claims:
//   - an address claimed by several imports belongs to the earliest claim;
//   - key keeps an address it already holds (its earliest claim per family);
//   - otherwise it takes the first address, probing from a hash of key,
//     that no other import claims.
//
// missing lists wanted families the pool does not serve. ErrExhausted means
// some wanted family had no free address; the others are still returned.
func (p *Pool) Choose(key string, want []corev1.IPFamily, claims []Claim) (ips []netip.Addr, missing []corev1.IPFamily, err error) {
	x := newClaimIndex()
	x.rank = func(src any) string { return fmt.Sprintf("%08d", src.(int)) } // as given
	for i, c := range claims {
		x.take(i, c)
	}
	return p.choose(key, want, x)
}

// choose is Choose over the claims an index holds.
func (p *Pool) choose(key string, want []corev1.IPFamily, x *claimIndex) (ips []netip.Addr, missing []corev1.IPFamily, err error) {
	if len(want) == 0 {
		want = p.Families()[:1]
	}
	mine := x.claimsOf(key)
	claimed := x.addresses()
	for _, f := range want {
		pfx := p.prefix(f)
		if !pfx.IsValid() {
			missing = append(missing, f)
			continue
		}
		if a, ok := kept(key, pfx, mine, x); ok {
			ips = append(ips, a)
			continue
		}
		n := size(pfx)
		i := start(key, f, n)
		found := false
		// Probe every address once at most. For pools larger than the
		// number of claimed addresses this ends after claimed+1 steps at
		// worst.
		for step := 0; step <= claimed && big.NewInt(int64(step)).Cmp(n) < 0; step++ {
			a := nth(pfx, i)
			if _, taken := x.owner(a, key); !taken {
				ips = append(ips, a)
				found = true
				break
			}
			i.Add(i, big.NewInt(1))
			if i.Cmp(n) >= 0 {
				i.SetInt64(0)
			}
		}
		if !found {
			err = fmt.Errorf("%w: no free %s address in %s", ErrExhausted, f, pfx)
		}
	}
	return ips, missing, err
}

// kept returns the address of pfx's family key already holds (mine, its
// claims, earliest first) and owns.
func kept(key string, pfx netip.Prefix, mine []Claim, x *claimIndex) (netip.Addr, bool) {
	for _, c := range mine {
		for _, a := range c.IPs {
			if !pfx.Contains(a) {
				continue
			}
			if owner, _ := x.owner(a, key); owner == key {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}

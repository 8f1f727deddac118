package dnswire

import (
	"net/netip"
	"strconv"
	"strings"
)

// The reverse names of addresses (RFC 1035 in-addr.arpa., RFC 3596
// ip6.arpa.) in their one canonical form, as dns.ReverseAddr writes it:
// lower case, decimal octets without leading zeros or single hex nibbles,
// every label present. Parsing accepts that form only, so that a name
// maps to an address only when it is that address's reverse name.

const hexDigits = "0123456789abcdef"

// AppendReverse appends the reverse name of ip ("4.3.2.1.in-addr.arpa.",
// or 32 nibbles and "ip6.arpa.") to dst. An IPv6 zone is not part of it.
func AppendReverse(dst []byte, ip netip.Addr) []byte {
	if ip.Is4() {
		a := ip.As4()
		for i := 3; i >= 0; i-- {
			dst = strconv.AppendUint(dst, uint64(a[i]), 10)
			dst = append(dst, '.')
		}
		return append(dst, "in-addr.arpa."...)
	}
	a := ip.As16()
	for i := 15; i >= 0; i-- {
		dst = append(dst, hexDigits[a[i]&0x0f], '.', hexDigits[a[i]>>4], '.')
	}
	return append(dst, "ip6.arpa."...)
}

// ParseReverse returns the address whose reverse name (as AppendReverse
// writes it) is name; false for any other name.
func ParseReverse(name string) (netip.Addr, bool) {
	if rest, ok := strings.CutSuffix(name, ".in-addr.arpa."); ok {
		var a [4]byte
		for i := 3; i >= 0; i-- {
			label := rest
			if i > 0 {
				dot := strings.IndexByte(rest, '.')
				if dot < 0 {
					return netip.Addr{}, false
				}
				label, rest = rest[:dot], rest[dot+1:]
			}
			v, ok := parseOctet(label)
			if !ok {
				return netip.Addr{}, false
			}
			a[i] = v
		}
		return netip.AddrFrom4(a), true
	}
	if rest, ok := strings.CutSuffix(name, ".ip6.arpa."); ok {
		if len(rest) != 63 { // 32 nibbles and the 31 dots between them
			return netip.Addr{}, false
		}
		var a [16]byte
		for k := range 32 {
			if k < 31 && rest[2*k+1] != '.' {
				return netip.Addr{}, false
			}
			nib := strings.IndexByte(hexDigits, rest[2*k])
			if nib < 0 {
				return netip.Addr{}, false
			}
			// Labels go from the low nibble of the last octet up.
			if k%2 == 0 {
				a[15-k/2] |= byte(nib)
			} else {
				a[15-k/2] |= byte(nib) << 4
			}
		}
		return netip.AddrFrom16(a), true
	}
	return netip.Addr{}, false
}

// ParseReversePrefix parses a partial reverse name, written as
// AppendReverse writes its labels: the address prefix it names (as 16
// bytes; the first 4 for IPv4) and its length in bits. A full address (4
// or 32 labels) or the bare in-addr.arpa./ip6.arpa. is not a partial
// name.
func ParseReversePrefix(name string) (v6 bool, prefix [16]byte, bits int, ok bool) {
	if rest, found := strings.CutSuffix(name, ".in-addr.arpa."); found {
		n := strings.Count(rest, ".") + 1
		if n >= 4 {
			return false, prefix, 0, false
		}
		for i := range n {
			label, tail, _ := strings.Cut(rest, ".")
			v, ok := parseOctet(label)
			if !ok {
				return false, prefix, 0, false
			}
			prefix[n-1-i] = v
			rest = tail
		}
		return false, prefix, 8 * n, true
	}
	if rest, found := strings.CutSuffix(name, ".ip6.arpa."); found {
		n := strings.Count(rest, ".") + 1
		if n >= 32 {
			return true, prefix, 0, false
		}
		for i := range n {
			label, tail, _ := strings.Cut(rest, ".")
			if len(label) != 1 {
				return true, prefix, 0, false
			}
			nib := strings.IndexByte(hexDigits, label[0])
			if nib < 0 {
				return true, prefix, 0, false
			}
			k := n - 1 - i // nibble index from the top
			if k%2 == 0 {
				prefix[k/2] |= byte(nib) << 4
			} else {
				prefix[k/2] |= byte(nib)
			}
			rest = tail
		}
		return true, prefix, 4 * n, true
	}
	return false, prefix, 0, false
}

// parseOctet parses a decimal octet as AppendReverse writes it.
func parseOctet(label string) (byte, bool) {
	if len(label) == 0 || len(label) > 3 || len(label) > 1 && label[0] == '0' {
		return 0, false
	}
	v := 0
	for k := 0; k < len(label); k++ {
		c := label[k]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	if v > 255 {
		return 0, false
	}
	return byte(v), true
}

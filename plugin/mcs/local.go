package mcs

import (
	"net"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
)

// boundIPs returns the IPs the server block listens on, or all interface
// addresses when it listens on all of them; loopback addresses only when
// nothing else is there (as CoreDNS's kubernetes plugin, plus that
// fallback so that ns.dns.<zone> always resolves).
func boundIPs(c *caddy.Controller) []net.IP {
	hosts := dnsserver.GetConfig(c).ListenHosts
	if len(hosts) == 0 || hosts[0] == "" {
		hosts = nil
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return nil
		}
		for _, addr := range addrs {
			hosts = append(hosts, addr.String())
		}
	}
	var ips, loopback []net.IP
	for _, host := range hosts {
		ip, _, err := net.ParseCIDR(host)
		if err != nil {
			ip = net.ParseIP(host)
		}
		if ip == nil {
			continue
		}
		if ip4 := ip.To4(); ip4 != nil {
			ip = ip4
		}
		if ip.IsLoopback() {
			loopback = append(loopback, ip)
			continue
		}
		if ip.IsLinkLocalUnicast() {
			continue
		}
		ips = append(ips, ip)
	}
	if len(ips) == 0 {
		return loopback
	}
	return ips
}

package mcs

import (
	"net"
	"sync/atomic"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/dnsutil"
	"github.com/miekg/dns"
	"k8s.io/client-go/rest"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/dnswire"
)

// MCS is the plugin handler.
type MCS struct {
	Next plugin.Handler

	cfg   *config
	zones []*zone
	// zoneNames[i] == zones[i].name, for dnsname.Match.
	zoneNames []string
	index     *answers.Index
	ctl       *controller
	// sourceKey, when set, shares the controller and its answers with
	// every instance whose stanza has the same key (shared.go); started:
	// start ran and stop has not.
	sourceKey string
	started   bool
	// noSubsets: a cache runs before mcs in this server block
	// (cacheInFront), so headless answers that do not fit the client's
	// buffer are truncated with TC rather than cut to a subset: the cache
	// keys replies by name and type only and would return a UDP subset
	// to TCP clients as well, but it stores no truncated reply. Set at
	// start-up, before queries are served.
	noSubsets bool
}

// zone is one zone the plugin is authoritative for, with its static
// records precomputed.
type zone struct {
	name    string
	reverse bool
	// fwd is the zone's index in the answer sets (forward zones only).
	fwd int
	// nsName is the target of the apex NS record: ns.dns.<zone> (for
	// reverse zones, of the first forward zone).
	nsName string
	mbox   string
	ttl    uint32
	txt    []dns.RR // dns-version.<zone> TXT "1.0.0"
	ns     []dns.RR // apex NS
	soa    atomic.Pointer[dns.SOA]
	// addrs holds the A/AAAA records of nsName.
	addrs atomic.Pointer[nsAddrs]
	// soaTail is the SOA record packed for negative replies written as
	// bytes; nil when it could not be packed (they take the dns.Msg path).
	soaTail *dnswire.SOATail
}

type nsAddrs struct{ a, aaaa, all []dns.RR }

// SpecVersion is the MCS DNS schema version served at dns-version.<zone>.
const SpecVersion = "1.0.0"

func newMCS(cfg *config, restCfg *rest.Config) *MCS {
	fwd := cfg.forwardZones()
	if cfg.maxUDP == 0 {
		cfg.maxUDP = DefaultMaxUDPSize
	}
	p := &MCS{cfg: cfg, index: answers.NewIndex(cfg.ttl)}
	fi := 0
	for _, name := range cfg.zones {
		z := &zone{name: name, ttl: cfg.ttl, fwd: -1}
		if isReverse(name) {
			z.reverse = true
			z.nsName = dnsutil.Join("ns.dns", fwd[0])
			z.mbox = dnsutil.Join("hostmaster", fwd[0])
		} else {
			z.fwd = fi
			fi++
			z.nsName = dnsutil.Join("ns.dns", name)
			z.mbox = dnsutil.Join("hostmaster", name)
			z.txt = []dns.RR{&dns.TXT{
				Hdr: dns.RR_Header{Name: dnsutil.Join("dns-version", name), Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: cfg.ttl},
				Txt: []string{SpecVersion},
			}}
		}
		z.ns = []dns.RR{&dns.NS{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: cfg.ttl}, Ns: z.nsName}}
		z.addrs.Store(&nsAddrs{})
		if tail, err := dnswire.NewSOATail(z.soaRR(0)); err == nil {
			z.soaTail = tail
		}
		p.zones = append(p.zones, z)
		p.zoneNames = append(p.zoneNames, name)
	}
	if restCfg != nil {
		sh := cfg.shaping
		p.ctl = newController(restCfg, cfg.namespaces, cfg.managers, p.index, answers.Config{Zones: fwd, TTL: cfg.ttl, Shaping: &sh})
		p.ctl.regionProperty = cfg.regionProperty
	}
	return p
}

// soaRR returns the zone's SOA record for the index's current serial.
// It allocates only when the serial changed.
func (z *zone) soaRR(serial uint32) *dns.SOA {
	if s := z.soa.Load(); s != nil && s.Serial == serial {
		return s
	}
	s := &dns.SOA{
		Hdr:     dns.RR_Header{Name: z.name, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: z.ttl},
		Ns:      z.nsName,
		Mbox:    z.mbox,
		Serial:  serial,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  z.ttl,
	}
	z.soa.Store(s)
	return s
}

// setNSAddrs sets the addresses of ns.dns.<zone>: the addresses the
// server is bound to (as CoreDNS's kubernetes plugin does).
func (p *MCS) setNSAddrs(ips []net.IP) {
	for _, z := range p.zones {
		a := &nsAddrs{}
		for _, ip := range ips {
			hdr := dns.RR_Header{Name: z.nsName, Class: dns.ClassINET, Ttl: z.ttl}
			if ip4 := ip.To4(); ip4 != nil {
				hdr.Rrtype = dns.TypeA
				a.a = append(a.a, &dns.A{Hdr: hdr, A: ip4})
			} else {
				hdr.Rrtype = dns.TypeAAAA
				a.aaaa = append(a.aaaa, &dns.AAAA{Hdr: hdr, AAAA: ip})
			}
		}
		a.all = append(append([]dns.RR{}, a.a...), a.aaaa...)
		z.addrs.Store(a)
	}
}

// synced reports whether the informers have synced once.
func (p *MCS) synced() bool { return p.ctl == nil || p.ctl.synced.Load() }

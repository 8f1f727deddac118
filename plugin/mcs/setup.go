package mcs

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/cache"
	"github.com/coredns/coredns/plugin/pkg/fall"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/memberconn"
	"github.com/mcs-dns/mcs-dns/internal/stanza"
)

const pluginName = "mcs"

var log = clog.NewWithPlugin(pluginName)

func init() { plugin.Register(pluginName, setup) }

// Defaults and limits of the Corefile options.
const (
	DefaultZone = stanza.DefaultZone
	DefaultTTL  = 5
	MaxTTL      = 3600
	// MaxAnswers bounds max_answers: more A records than this never fit
	// in a DNS message (65,535 octets, 16 per record).
	MaxAnswers = stanza.MaxAnswers
	// DefaultMaxUDPSize caps UDP replies whatever buffer a query
	// advertises (the DNS Flag Day 2020 value): a spoofed query is never
	// answered with more than about 20 times its size, and replies are
	// not fragmented. max_udp_size raises or lowers it.
	DefaultMaxUDPSize = 1232
)

// config is a parsed mcs stanza.
type config struct {
	// zones as listed, lower-case FQDNs; forward ones answer the MCS
	// names, reverse ones (in-addr.arpa., ip6.arpa. or below) PTR.
	zones []string
	ttl   uint32
	// maxUDP caps UDP replies (max_udp_size; DefaultMaxUDPSize).
	maxUDP     int
	kubeconfig string
	context    string
	// rest is the client config from the kubeconfig, loaded (and so
	// checked) at parse time; nil means in-cluster.
	rest       *rest.Config
	namespaces []string
	// managers are the trusted endpointslice.kubernetes.io/managed-by
	// values (endpointslice_managers); nil: any but the Kubernetes
	// endpointslice controller's.
	managers []string
	fall     fall.F
	// shaping: cluster_id and region (else read from the
	// ClusterProperties at start-up), locality, rotate, max_answers.
	shaping answers.Shaping
	// regionProperty: region_property ("": mcsapi.RegionProperty).
	regionProperty string
}

func (c *config) forwardZones() []string { return stanza.ForwardZones(c.zones) }

func setup(c *caddy.Controller) error {
	cfg, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	restCfg := cfg.rest
	if restCfg == nil {
		if restCfg, err = rest.InClusterConfig(); err != nil {
			return plugin.Error(pluginName, fmt.Errorf("no kubeconfig given and no in-cluster configuration: %w", err))
		}
	}
	p := newMCS(cfg, restCfg)
	p.attach(sourceKey(cfg, restCfg))
	c.OnStartup(func() error {
		p.setNSAddrs(boundIPs(c))
		if p.noSubsets = cacheInFront(dnsserver.GetConfig(c).Handlers(), p); p.noSubsets {
			log.Infof("cache runs before mcs in this server block: headless answers that do not fit a UDP reply are truncated (TC) instead of cut to a subset, so that the cache never keeps a subset for TCP clients")
		}
		started, err := p.start()
		if err == nil && started {
			err = p.awaitSync(startupWait)
		}
		if err != nil {
			// A permanent error (credentials or RBAC refused, no MCS
			// CRDs, a client configuration that does not load): fail
			// start-up, or the reload, rather than answer SERVFAIL until
			// someone notices.
			p.stop()
			return plugin.Error(pluginName, err)
		}
		return nil
	})
	c.OnShutdown(func() error {
		p.stop()
		return nil
	})
	// A reload from this instance that fails after the new instance's
	// start-up: stop what that start-up started.
	c.OnRestartFailed(func() error {
		stopPending()
		return nil
	})
	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		p.Next = next
		return p
	})
	return nil
}

// cacheInFront reports whether a cache plugin whose zones overlap p's
// forward zones comes before p in handlers, the server block's plugins
// in chain order (dnsserver.Config.Handlers). Such a cache keys replies
// by name, type, class and DO/CD bits, not by transport: a headless
// subset it got over UDP (no TC) would be returned to TCP clients too.
// It does not store truncated replies (CoreDNS v1.15.0 plugin/cache,
// key), which is what p.noSubsets relies on.
func cacheInFront(handlers []plugin.Handler, p *MCS) bool {
	fwd := p.cfg.forwardZones()
	for _, h := range handlers {
		if h == p {
			return false
		}
		c, ok := h.(*cache.Cache)
		if !ok {
			continue
		}
		for _, cz := range c.Zones {
			for _, z := range fwd {
				if dns.IsSubDomain(cz, z) || dns.IsSubDomain(z, cz) {
					return true
				}
			}
		}
	}
	return false
}

// startupWait bounds how long start-up waits for the informers to sync
// (the kubernetes plugin's default startup_timeout), or for a permanent
// error to fail it.
const startupWait = 5 * time.Second

// parse reads one mcs stanza:
//
//	mcs [ZONES...] {
//	    kubeconfig KUBECONFIG [CONTEXT]
//	    ttl SECONDS
//	    namespaces NAMESPACE...
//	    fallthrough [ZONES...]
//	    cluster_id ID
//	    region REGION
//	    region_property NAME
//	    locality local-first|none
//	    rotate
//	    max_answers N
//	    max_udp_size OCTETS
//	}
func parse(c *caddy.Controller) (*config, error) {
	cfg := &config{ttl: DefaultTTL, maxUDP: DefaultMaxUDPSize}
	var opts stanza.Options
	i := 0
	for c.Next() {
		if i > 0 {
			return nil, plugin.ErrOnce
		}
		i++
		zones, err := stanza.Zones(&c.Dispenser, c.RemainingArgs())
		if err != nil {
			return nil, err
		}
		cfg.zones = zones
		for c.NextBlock() {
			switch c.Val() {
			case "kubeconfig":
				args := c.RemainingArgs()
				if len(args) != 1 && len(args) != 2 {
					return nil, c.ArgErr()
				}
				cfg.kubeconfig = args[0]
				if len(args) == 2 {
					cfg.context = args[1]
				}
				rc, err := memberconn.LoadKubeconfig(cfg.kubeconfig, cfg.context)
				if errors.Is(err, memberconn.ErrNoContext) {
					return nil, c.Errf("kubeconfig %s has no current-context: name the context (kubeconfig %s CONTEXT)", cfg.kubeconfig, cfg.kubeconfig)
				}
				if err != nil {
					return nil, c.Errf("%v", err)
				}
				cfg.rest = rc
			case "ttl":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				t, err := strconv.Atoi(args[0])
				if err != nil || t < 0 || t > MaxTTL {
					return nil, c.Errf("ttl %q is not a number of seconds in 0..%d", args[0], MaxTTL)
				}
				cfg.ttl = uint32(t)
			case "max_udp_size":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				n, err := strconv.Atoi(args[0])
				if err != nil || n < dns.MinMsgSize || n > dns.MaxMsgSize {
					return nil, c.Errf("max_udp_size %q is not a number of octets in %d..%d", args[0], dns.MinMsgSize, dns.MaxMsgSize)
				}
				cfg.maxUDP = n
			case "namespaces":
				args := c.RemainingArgs()
				if len(args) == 0 {
					return nil, c.ArgErr()
				}
				for _, ns := range args {
					if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
						return nil, c.Errf("namespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
					}
					// Once each: every name gets its own informers, and a
					// repeated one would start a pair that never syncs.
					if !slices.Contains(cfg.namespaces, ns) {
						cfg.namespaces = append(cfg.namespaces, ns)
					}
				}
			case "fallthrough":
				cfg.fall.SetZonesFromArgs(c.RemainingArgs())
			default:
				// The options that decide answers: shared with
				// kubectl mcs explain.
				ok, err := opts.Parse(&c.Dispenser)
				if err != nil {
					return nil, err
				}
				if !ok {
					return nil, c.Errf("unknown property %q", c.Val())
				}
			}
		}
	}
	cfg.managers, cfg.shaping, cfg.regionProperty = opts.Managers, opts.Shaping, opts.RegionProperty
	return cfg, nil
}

// isReverse reports whether zone is a reverse zone (stanza.IsReverse).
func isReverse(zone string) bool { return stanza.IsReverse(zone) }

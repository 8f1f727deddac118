package cmd

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/dnsname"
)

// The zones the plugin serves by default; --zone mirrors a Corefile that
// names another forward zone. PTR names are looked up as the plugin does
// when its stanza lists the reverse zones.
var reverseZones = []string{"in-addr.arpa.", "ip6.arpa."}

// ttl only fills the computed records: compared answers ignore TTLs.
const ttl = 5

// build turns the objects into an Index exactly as the plugin's answer
// builder does: a rejected import answers nothing; only served slices
// count.
func build(objs map[string]*serviceObjects, zones []string, sh answers.Shaping) *answers.Index {
	ix := answers.NewIndex(ttl)
	cfg := answers.Config{Zones: zones, TTL: ttl, Shaping: &sh}
	for _, so := range objs {
		if so.cimp == nil || so.cimp.Err != nil {
			continue
		}
		var sl []*answers.Slice
		for _, s := range so.slices {
			if s.why == "" {
				sl = append(sl, &s.cs.Slice)
			}
		}
		ix.Put(so.cimp.Service.Key(), answers.Build(&so.cimp.Service, sl, cfg))
	}
	return ix
}

// explainForward fills rep for a name in a forward zone: the objects of
// its service in m, the answer computed from them, every member's export
// of the service (ms), and, without an answer, why.
func (o *ExplainOptions) explainForward(ctx context.Context, ms []*member, m *member, rep *ExplainReport) error {
	ac, qname, zi, qtype := o.answer, o.qname, o.zone, o.qtype
	zone := ac.zones[zi]
	n := dnsname.Parse(qname, zone)
	switch n.Kind {
	case dnsname.Unknown:
		rep.Rcode = dns.RcodeToString[dns.RcodeNameError]
		rep.Reasons = append(rep.Reasons, "name form the spec does not serve: only <svc>.<ns>.svc, <hostname>.<cluster>.<svc>.<ns>.svc and _<port>._<proto>.<svc>.<ns>.svc names exist under "+zone+" (no pod or IP-based names)")
		return nil
	case dnsname.Service, dnsname.Namespace:
	default:
		rep.Rcode = "NOERROR"
		rep.Reasons = append(rep.Reasons, fmt.Sprintf("%s is a name of the zone itself (%s), answered by the plugin without any object", qname, n.Kind))
		return nil
	}
	objs, err := readObjects(ctx, o.Managers, m, n.Namespace)
	if err != nil {
		return err
	}
	// Rotation only turns the order from query to query: the answer
	// shown is the first turn. max_answers cuts it; full is the whole.
	sh := ac.shaping
	sh.Rotate = false
	cut := build(objs, ac.zones, sh)
	ix := cut
	if sh.MaxAnswers > 0 {
		sh.MaxAnswers = 0
		ix = build(objs, ac.zones, sh)
	}
	if n.Kind == dnsname.Namespace {
		rep.Rcode = "NOERROR"
		if ix.ResolveNamespace(n.Namespace) == answers.NXDomain {
			rep.Rcode = dns.RcodeToString[dns.RcodeNameError]
			rep.Reasons = append(rep.Reasons, fmt.Sprintf("no service of namespace %s has a name in %s", n.Namespace, m.Context))
		}
		return nil
	}
	so := objs[key(n.Namespace, n.Service)]
	if so != nil {
		rep.Import = importInfo(so)
		for _, s := range so.slices {
			rep.Slices = append(rep.Slices, s.info)
		}
	}
	switch found, set, node := ix.ResolveService(n.Key, n.Prefix, zi, qtype); found {
	case answers.NXDomain:
		rep.Rcode = dns.RcodeToString[dns.RcodeNameError]
	case answers.NoData:
		rep.Rcode = "NOERROR"
	default:
		rep.Rcode = "NOERROR"
		_, cset, cnode := cut.ResolveService(n.Key, n.Prefix, zi, qtype)
		c := shapedAnswer(set, cset, node, cnode, zi, qname, qtype, n.Key+".svc."+ac.zones[0], ac.shaping.Region)
		rep.Answer, rep.Extra, rep.Local, rep.Tiers = render(c.answer), render(c.extra), render(c.local), c.tiers
		if all := render(c.all); !slices.Equal(all, rep.Answer) {
			rep.All = all
		}
		rep.Shaping.LocalFirst = set.LocalFirst()
	}
	rep.Export = exportsOf(ctx, ms, o.rules, n.Namespace, n.Service)
	if len(rep.Answer) == 0 {
		rep.Reasons = forwardReasons(rep, m, so, ix.Service(n.Key), n, qtype)
	}
	return nil
}

// explainPTR fills rep for a reverse name: the answer computed from the
// objects of m (in --namespace, or all), and the objects that hold the
// address.
func (o *ExplainOptions) explainPTR(ctx context.Context, m *member, rep *ExplainReport) error {
	qname := o.qname
	objs, err := readObjects(ctx, o.Managers, m, o.namespace)
	if err != nil {
		return err
	}
	ix := build(objs, o.answer.zones, o.answer.shaping)
	switch found, targets := ix.ResolveReverse(qname, dns.TypePTR); found {
	case answers.Records:
		rep.Rcode = "NOERROR"
		rep.Answer = render(answers.PTRRecords(qname, targets, ttl))
	case answers.NoData:
		rep.Rcode = "NOERROR"
	default:
		rep.Rcode = dns.RcodeToString[dns.RcodeNameError]
	}
	holders := ptrHolders(objs, m, rep, qname)
	if len(rep.Answer) == 0 {
		if len(holders) == 0 {
			rep.Reasons = append(rep.Reasons, fmt.Sprintf("no ServiceImport VIP or EndpointSlice endpoint in %s has this address (addresses of pods or Services that are not exported have no clusterset PTR)", m.Context))
		}
		rep.Reasons = append(rep.Reasons, holders...)
	}
	return nil
}

// computed is the answer the plugin's code computes for one name.
type computed struct {
	// answer and extra: what the explained CoreDNS answers over TCP
	// (64 KiB), unrotated: local-first and cut to max_answers as it does.
	answer, extra []dns.RR
	// all: every record the name could answer with (differs from answer
	// when max_answers cuts it); local: those of this cluster's endpoints
	// when the answer is local-first.
	all, local []dns.RR
	// tiers: the tier of each record of all, and why, by its rendering
	// (local-first answers only; see ExplainReport.Tiers).
	tiers map[string]string
}

// shapedAnswer computes the records of qtype at node as the plugin's
// handler does (region is the member's, for the tiers' reasons) (answers.Set.Shapes, Ring): full is the set built without
// max_answers, cut the one built with it (the same set when there is
// none), each with its node of the name. Rotation is left out: it only
// turns the order from query to query. base is the service's name in the
// first zone (where PTR targets are).
func shapedAnswer(full, cut *answers.Set, fullNode, cutNode *answers.Node, zone int, qname string, qtype uint16, base, region string) computed {
	var c computed
	c.answer, c.extra = ringRecords(cut, cutNode, zone, qname, qtype)
	c.all = c.answer
	if full != cut {
		c.all, _ = ringRecords(full, fullNode, zone, qname, qtype)
	}
	if full == nil || !full.LocalFirst() {
		return c
	}
	// Each record's endpoint: SRV by its target, A and AAAA by the
	// endpoint name (PTR target) of their address; its tier by the
	// plugin's rule (answers.Set.Tier).
	owners := map[string]string{}
	if qtype != dns.TypeSRV {
		for _, p := range full.PTRs() {
			if _, ok := owners[p.Reverse]; !ok { // the first target names the endpoint
				owners[p.Reverse] = p.Target
			}
		}
	}
	// SRV targets are names of the queried zone: below the service's
	// name there, qname without its _port._proto labels.
	srvBase := strings.ToLower(qname)
	if strings.HasPrefix(srvBase, "_") {
		for range 2 {
			_, srvBase, _ = strings.Cut(srvBase, ".")
		}
	}
	c.tiers = map[string]string{}
	for _, rr := range c.all {
		var owner string
		base := base
		switch r := rr.(type) {
		case *dns.SRV:
			owner, base = strings.ToLower(r.Target), srvBase
		case *dns.A:
			owner = owners[reverseOf(addrOf(r.A))]
		case *dns.AAAA:
			owner = owners[reverseOf(addrOf(r.AAAA))]
		}
		tier, why := answers.TierOther, ""
		if owner != "" {
			tier = full.Tier(owner, base)
			why = "cluster " + clusterOfOwner(owner, base)
		}
		if tier == answers.TierLocal {
			c.local = append(c.local, rr)
		}
		if tier == answers.TierRegion {
			why = region + ", " + why
		}
		desc := tier.String()
		if why != "" {
			desc += " (" + why + ")"
		}
		c.tiers[renderOrdered([]dns.RR{rr})[0]] = desc
	}
	return c
}

// clusterOfOwner is the cluster ID in a per-endpoint name
// "<host>.<cluster ID>.<base>" ("?" when owner is not one).
func clusterOfOwner(owner, base string) string {
	_, rest, ok := strings.Cut(owner, ".")
	id, found := strings.CutSuffix(rest, "."+base)
	if !ok || !found || id == "" {
		return "?"
	}
	return id
}

// addrOf is ip as a netip.Addr (IPv4 unmapped).
func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// ringRecords are the records of the handler's packed path for a TCP
// query with EDNS0 (65,535 octets): the ring's reply at its first
// rotation, unpacked; node.Records when the answer is not shaped, or is
// plain and whole.
func ringRecords(set *answers.Set, node *answers.Node, zone int, qname string, qtype uint16) (answer, extra []dns.RR) {
	shaped, plain := set.Shapes(zone, node, qtype)
	if !shaped {
		return node.Records(qtype)
	}
	ring := set.Ring(zone, node, qname, qtype)
	if ring == nil {
		return node.Records(qtype)
	}
	k, off, withExtra := ring.Choose(dns.MaxMsgSize, true)
	if plain && k == ring.Units() {
		return node.Records(qtype)
	}
	q := new(dns.Msg)
	q.SetQuestion(qname, qtype)
	reply, ok := ring.AppendReply(nil, q, nil, k, off, withExtra)
	m := new(dns.Msg)
	if !ok || m.Unpack(reply) != nil {
		return node.Records(qtype)
	}
	return m.Answer, m.Extra
}

// reverseOf is ip's reverse name, lower case.
func reverseOf(ip netip.Addr) string {
	r, _ := dns.ReverseAddr(ip.String())
	return strings.ToLower(r)
}

// render gives records as "owner TYPE rdata" without TTL and class,
// sorted, so that answers of two sources compare.
func render(rrs []dns.RR) []string {
	out := renderOrdered(rrs)
	slices.Sort(out)
	return out
}

// renderOrdered renders rrs as render does, in their order.
func renderOrdered(rrs []dns.RR) []string {
	out := []string{}
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		f := strings.SplitN(rr.String(), "\t", 5)
		out = append(out, strings.ToLower(f[0])+" "+dns.TypeToString[rr.Header().Rrtype]+" "+strings.ToLower(f[len(f)-1]))
	}
	return out
}

// checkDNS asks the member's CoreDNS, over TCP (whole answers up to 64 KiB).
func checkDNS(server, qname string, qtype uint16, rep *ExplainReport) *DNSCheck {
	if !strings.Contains(server, ":") || strings.HasSuffix(server, "]") {
		server += ":53"
	}
	c := &DNSCheck{Server: server}
	m := new(dns.Msg)
	m.SetQuestion(qname, qtype)
	m.SetEdns0(dns.MaxMsgSize, false)
	// Over TCP: a headless answer over UDP is the subset that fits.
	cl := &dns.Client{Net: "tcp", Timeout: 3 * time.Second}
	r, _, err := cl.Exchange(m, server)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	c.Rcode = dns.RcodeToString[r.Rcode]
	c.Answer = render(r.Answer)
	c.Agrees = c.Rcode == rep.Rcode && slices.Equal(c.Answer, rep.Answer)
	// A rotating server cut to max_answers answers with others of all
	// the records; one cut to 64 KiB, with fewer.
	pool := rep.Answer
	if rep.All != nil {
		pool = rep.All
	}
	if !c.Agrees && c.Rcode == rep.Rcode && len(c.Answer) > 0 && len(c.Answer) < len(pool) {
		c.Subset = !slices.ContainsFunc(c.Answer, func(a string) bool { return !slices.Contains(pool, a) })
		c.Agrees = c.Subset
	}
	// Local-first: no record of this cluster's endpoints after another.
	if c.Agrees && len(rep.Local) > 0 {
		remote := ""
		for _, a := range renderOrdered(r.Answer) {
			switch {
			case !slices.Contains(rep.Local, a):
				if remote == "" {
					remote = a
				}
			case remote != "":
				c.Order = fmt.Sprintf("not local-first: %s (this cluster's) comes after %s", a, remote)
				c.Agrees = false
			}
			if c.Order != "" {
				break
			}
		}
	}
	return c
}

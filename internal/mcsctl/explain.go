package mcsctl

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/compact"
	"github.com/mcs-dns/mcs-dns/internal/dnsname"
	"github.com/mcs-dns/mcs-dns/internal/kubeconfig"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// ExplainReport is what `kubectl mcs explain` prints (-o json|yaml).
type ExplainReport struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Context string `json:"context"`
	Cluster string `json:"cluster"`
	// Import and Slices are the objects in the member that decide the
	// answer (for a PTR name: those holding the address).
	Import *ImportInfo  `json:"import,omitempty"`
	Slices []SliceInfo  `json:"endpointSlices,omitempty"`
	Export []ExportInfo `json:"exports,omitempty"`
	// Rcode and Answer are the answer the plugin's code computes from
	// the objects.
	Rcode  string   `json:"rcode"`
	Answer []string `json:"answer"`
	Extra  []string `json:"extra,omitempty"`
	// Local are the records of Answer of this cluster's endpoints, which
	// a local-first answer lists first (SRV: with priority 0).
	Local []string `json:"local,omitempty"`
	// All is every record the name answers with when max_answers cuts
	// Answer to fewer (a rotating CoreDNS answers with others of them).
	All []string `json:"all,omitempty"`
	// Shaping is how the answer is shaped: as --corefile's stanza and
	// the flags say.
	Shaping *ShapingInfo `json:"shaping,omitempty"`
	// Reasons say why the answer is NXDOMAIN or empty.
	Reasons []string  `json:"reasons,omitempty"`
	DNS     *DNSCheck `json:"dns,omitempty"`
}

// ImportInfo is a ServiceImport as the plugin reads it.
type ImportInfo struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Type      string   `json:"type,omitempty"`
	IPs       []string `json:"ips,omitempty"`
	Ports     []string `json:"ports,omitempty"`
	Clusters  []string `json:"clusters,omitempty"`
	// Rejected says why the plugin answers nothing for it.
	Rejected string `json:"rejected,omitempty"`
}

// SliceInfo is an EndpointSlice labelled with the service's name, and
// whether the plugin serves it.
type SliceInfo struct {
	Name          string `json:"name"`
	SourceCluster string `json:"sourceCluster,omitempty"`
	ManagedBy     string `json:"managedBy,omitempty"`
	// SourceManagedBy is the manager of the source slice a mirrored
	// copy records.
	SourceManagedBy string         `json:"sourceManagedBy,omitempty"`
	Served          bool           `json:"served"`
	NotServed       string         `json:"notServed,omitempty"`
	Endpoints       []EndpointInfo `json:"endpoints"`
}

// EndpointInfo is one endpoint of a slice.
type EndpointInfo struct {
	Addresses []string `json:"addresses"`
	Hostname  string   `json:"hostname,omitempty"`
	Ready     bool     `json:"ready"`
}

// ExportInfo is the ServiceExport of the name's service in one member.
type ExportInfo struct {
	Context  string     `json:"context"`
	Cluster  string     `json:"cluster"`
	Error    string     `json:"error,omitempty"`
	Exported bool       `json:"exported"`
	Valid    *condition `json:"valid,omitempty"`
	Conflict *condition `json:"conflict,omitempty"`
	// NotMirrored says which of the Service's source EndpointSlices and
	// addresses in that member mcs-importer leaves out (untrusted
	// managers, the export policy's addressRanges).
	NotMirrored []string `json:"notMirrored,omitempty"`
}

// DNSCheck is what the member's CoreDNS answered, compared.
type DNSCheck struct {
	Server string   `json:"server"`
	Error  string   `json:"error,omitempty"`
	Rcode  string   `json:"rcode,omitempty"`
	Answer []string `json:"answer,omitempty"`
	Agrees bool     `json:"agrees"`
	// Subset: the server answered with some of the computed records (a
	// headless answer cut to max_answers or to 64 KiB), all of them right.
	Subset bool `json:"subset,omitempty"`
	// Order, when set, says how the server's order differs from a
	// local-first answer's.
	Order string `json:"order,omitempty"`
}

// The zones the plugin serves by default; --zone mirrors a Corefile that
// names another forward zone. PTR names are looked up as the plugin does
// when its stanza lists the reverse zones.
var reverseZones = []string{"in-addr.arpa.", "ip6.arpa."}

// ttl only fills the computed records: compared answers ignore TTLs.
const ttl = 5

// member objects of one service, read once.
type serviceObjects struct {
	imp    *unstructured.Unstructured
	cimp   *compact.Import
	slices []sliceObject
}

type sliceObject struct {
	es      *discoveryv1.EndpointSlice
	cs      *compact.Slice
	why     string // why it is not served, "" when it is
	info    SliceInfo
	service string
}

func runExplain(ctx context.Context, o *Options, args []string, stdout, stderr io.Writer) error {
	if len(args) < 1 || len(args) > 2 {
		return fmt.Errorf("usage: kubectl mcs explain NAME [TYPE] --in CONTEXT")
	}
	qname := dnsname.Lower(dns.Fqdn(args[0]))
	ac, err := resolveConfig(o, qname, stderr)
	if err != nil {
		return err
	}
	reverse := dnsname.Match(qname, reverseZones) >= 0
	zi := dnsname.Match(qname, ac.zones)
	if !reverse && zi < 0 {
		return fmt.Errorf("%s is not in %s or a reverse zone (in-addr.arpa, ip6.arpa)", qname, strings.Join(ac.zones, ", "))
	}
	qtype := dns.TypeA
	switch {
	case len(args) == 2:
		t, ok := dns.StringToType[strings.ToUpper(args[1])]
		if !ok || t == dns.TypeANY {
			return fmt.Errorf("unknown record type %q (A, AAAA, SRV, PTR, TXT, ...)", args[1])
		}
		qtype = t
	case reverse:
		qtype = dns.TypePTR
	case strings.HasPrefix(qname, "_"):
		qtype = dns.TypeSRV
	}
	in := o.In
	if in == "" {
		raw, err := kubeconfig.Raw(o.Kubeconfig)
		if err != nil {
			return err
		}
		if in = raw.CurrentContext; in == "" {
			return fmt.Errorf("--in CONTEXT is required (the kubeconfig has no current context)")
		}
	}
	names, err := contexts(o.Kubeconfig, o.Contexts)
	if err != nil {
		return err
	}
	if !slices.Contains(names, in) {
		if _, err := contexts(o.Kubeconfig, []string{in}); err != nil {
			return err
		}
		names = append(names, in)
	}
	ms := connect(ctx, o, names)
	var target *member
	for _, m := range ms {
		if m.Context == in {
			target = m
		}
	}
	if target.Err != nil {
		return target.Err
	}
	for _, m := range ms {
		if m.Err != nil {
			fmt.Fprintf(stderr, "warning: %v (its ServiceExports are not known)\n", m.Err)
		}
	}
	ac.learnClusterID(ctx, o, target)
	rep := &ExplainReport{Name: qname, Type: dns.TypeToString[qtype], Context: in, Cluster: target.ID, Answer: []string{}, Shaping: &ac.info}
	if reverse {
		err = explainPTR(ctx, o, ac, target, rep, qname)
	} else {
		err = explainForward(ctx, o, ac, ms, target, rep, qname, zi, qtype)
	}
	if err != nil {
		return err
	}
	if o.DNS != "" {
		rep.DNS = checkDNS(o.DNS, qname, qtype, rep)
	}
	switch o.Output {
	case "json", "yaml":
		return printStructured(stdout, o.Output, rep)
	}
	printExplain(stdout, rep)
	return nil
}

// readObjects reads the ServiceImports of namespace ns ("" all) of m and
// the EndpointSlices labelled with a service name, converted as the
// plugin's informer transforms convert them, slices of untrusted
// managers marked as the plugin marks them.
func readObjects(ctx context.Context, o *Options, m *member, ns string) (map[string]*serviceObjects, error) {
	imps, err := listDyn(ctx, m, m.Imports, ns, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	// The plugin watches every slice with the service-name label.
	sls, err := listSlices(ctx, m, ns, mcsapi.LabelServiceName)
	if err != nil {
		return nil, err
	}
	out := map[string]*serviceObjects{}
	get := func(k string) *serviceObjects {
		if out[k] == nil {
			out[k] = &serviceObjects{}
		}
		return out[k]
	}
	now := time.Now()
	for i := range imps {
		u := &imps[i]
		so := get(key(u.GetNamespace(), u.GetName()))
		so.imp, so.cimp = u, compact.ImportFromUnstructured(u, now)
	}
	for i := range sls {
		es := &sls[i]
		cs := compact.SliceFromEndpointSlice(es, now)
		so := sliceObject{es: es, cs: cs, service: cs.ServiceName}
		manager := es.Labels[discoveryv1.LabelManagedBy]
		switch {
		case cs.Err != nil:
			so.why = "rejected: " + cs.Err.Error()
		default:
			so.why = untrusted(o.Managers, manager, es.Labels[mcsapi.LabelSourceManagedBy])
		}
		so.info = SliceInfo{Name: es.Name, SourceCluster: es.Labels[mcsapi.LabelSourceCluster], ManagedBy: manager, SourceManagedBy: es.Labels[mcsapi.LabelSourceManagedBy], Served: so.why == "", NotServed: so.why, Endpoints: []EndpointInfo{}}
		for _, ep := range es.Endpoints {
			ei := EndpointInfo{Addresses: ep.Addresses, Ready: ep.Conditions.Ready == nil || *ep.Conditions.Ready}
			if ep.Hostname != nil {
				ei.Hostname = *ep.Hostname
			}
			so.info.Endpoints = append(so.info.Endpoints, ei)
		}
		s := get(key(es.Namespace, cs.ServiceName))
		s.slices = append(s.slices, so)
	}
	return out, nil
}

// untrusted says why a slice managed by manager is not served under the
// trusted managers ("" when it is): the plugin's rule (compact.Untrusted),
// in words.
func untrusted(managers []string, manager, source string) string {
	switch compact.Untrusted(managers, manager, source) {
	case compact.UntrustedNoManager:
		return "no " + discoveryv1.LabelManagedBy + " label (not a trusted manager; see endpointslice_managers)"
	case compact.UntrustedManagerNotListed:
		return fmt.Sprintf("managed by %q, not one of endpointslice_managers %v", manager, managers)
	case compact.UntrustedSourceManager:
		return fmt.Sprintf("managed by %q copying a slice of %q, not one of endpointslice_managers %v", manager, source, managers)
	case compact.UntrustedKubeController:
		return "managed by the Kubernetes endpointslice controller (a cluster's own Service, never clusterset)"
	}
	return ""
}

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

func explainForward(ctx context.Context, o *Options, ac *answerConfig, ms []*member, m *member, rep *ExplainReport, qname string, zi int, qtype uint16) error {
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
	objs, err := readObjects(ctx, o, m, n.Namespace)
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
		c := shapedAnswer(set, cset, node, cnode, zi, qname, qtype, n.Key+".svc."+ac.zones[0])
		rep.Answer, rep.Extra, rep.Local = render(c.answer), render(c.extra), render(c.local)
		if all := render(c.all); !slices.Equal(all, rep.Answer) {
			rep.All = all
		}
		rep.Shaping.LocalFirst = set.LocalFirst()
	}
	rules, err := rulesOf(o)
	if err != nil {
		return err
	}
	rep.Export = exportsOf(ctx, ms, rules, n.Namespace, n.Service)
	if len(rep.Answer) == 0 {
		rep.Reasons = forwardReasons(rep, m, so, ix.Service(n.Key), n, qtype)
	}
	return nil
}

func importInfo(so *serviceObjects) *ImportInfo {
	if so.imp == nil {
		return nil
	}
	ii := &ImportInfo{Namespace: so.imp.GetNamespace(), Name: so.imp.GetName(), Clusters: importClusters(so.imp)}
	if so.cimp.Err != nil {
		ii.Rejected = so.cimp.Err.Error()
		return ii
	}
	ii.Type = so.cimp.Service.Type.String()
	for _, ip := range so.cimp.Service.IPs {
		ii.IPs = append(ii.IPs, ip.String())
	}
	for _, p := range so.cimp.Service.Ports {
		ii.Ports = append(ii.Ports, fmt.Sprintf("%s %d/%s", orDash(p.Name), p.Port, p.Protocol))
	}
	return ii
}

// exportsOf reads the ServiceExport ns/name in every member and, where it
// is exported, what of its Service's EndpointSlices rules leave out.
func exportsOf(ctx context.Context, ms []*member, rules sourceRules, ns, name string) []ExportInfo {
	out := make([]ExportInfo, len(ms))
	done := make(chan struct{}, len(ms))
	for i, m := range ms {
		go func() {
			defer func() { done <- struct{}{} }()
			ei := ExportInfo{Context: m.Context, Cluster: m.ID}
			if m.Err != nil {
				ei.Error = short(m.Err)
				out[i] = ei
				return
			}
			u, err := m.Dyn.Resource(m.Exports).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				ei.Error = short(classify(m.Context, op{verb: "get", resource: m.Exports.Resource + "." + m.Exports.Group, namespace: ns}, err))
			default:
				ei.Exported = true
				ei.Valid = conditionOf(u, "Valid")
				ei.Conflict = conditionOf(u, "Conflict")
				srcs, err := listSlices(ctx, m, ns, discoveryv1.LabelServiceName+"="+name)
				if err != nil {
					ei.NotMirrored = []string{"its EndpointSlices could not be read: " + short(err)}
					break
				}
				_, ei.NotMirrored = rules.mirrored(m.ID, m.Context, sourceSlices(srcs, ns, name))
			}
			out[i] = ei
		}()
	}
	for range ms {
		<-done
	}
	return out
}

// forwardReasons says why a service name has no answer.
func forwardReasons(rep *ExplainReport, m *member, so *serviceObjects, set *answers.Set, n dnsname.Name, qtype uint16) []string {
	var r []string
	add := func(f string, a ...any) { r = append(r, fmt.Sprintf(f, a...)) }
	var exported, valid, unread []string
	for _, e := range rep.Export {
		switch {
		case e.Error != "":
			unread = append(unread, e.Context+" ("+e.Error+")")
		case !e.Exported:
		case e.Valid == nil:
			exported = append(exported, e.Cluster)
			add("export in %s has no Valid condition yet (is mcs-importer running?)", e.Cluster)
		case e.Valid.Status != "True":
			exported = append(exported, e.Cluster)
			add("export invalid in %s: %s: %s", e.Cluster, e.Valid.Reason, e.Valid.Message)
		default:
			exported = append(exported, e.Cluster)
			valid = append(valid, e.Cluster)
		}
		if e.Conflict != nil && e.Conflict.Status == "True" {
			add("conflict (export in %s): %s: %s", e.Cluster, e.Conflict.Reason, e.Conflict.Message)
		}
		r = append(r, e.NotMirrored...)
	}
	if len(exported) == 0 {
		msg := fmt.Sprintf("not exported: no ServiceExport %s/%s in any member", n.Namespace, n.Service)
		if len(unread) > 0 {
			msg += "; could not read " + strings.Join(unread, ", ")
		}
		r = append(r, msg)
	}
	switch {
	case so == nil || so.imp == nil:
		if len(valid) > 0 {
			add("no ServiceImport %s/%s in %s although exported by %s (is mcs-importer running and importing into %s, and does the namespace exist there?)",
				n.Namespace, n.Service, m.Context, strings.Join(valid, ", "), m.Context)
		}
		return r
	case so.cimp.Err != nil:
		add("the mcs plugin rejects ServiceImport %s/%s: %v", n.Namespace, n.Service, so.cimp.Err)
		return r
	}
	svc := &so.cimp.Service
	ready, unready, unserved := 0, 0, 0
	for _, s := range so.slices {
		for _, ep := range s.info.Endpoints {
			switch {
			case s.why != "":
				unserved++
			case ep.Ready:
				ready++
			default:
				unready++
			}
		}
	}
	for _, s := range so.slices {
		if s.why != "" {
			add("EndpointSlice %s is not served: %s", s.info.Name, s.why)
		}
	}
	if svc.Type == answers.Headless && svc.EndpointsAbsent {
		add("the import's status.endpointSliceObjects is Absent: no endpoint answers")
	}
	noEndpoints := svc.Type == answers.Headless && set == nil
	if noEndpoints {
		add("no ready endpoints: the import is Headless and its served EndpointSlices have %d ready endpoint(s) (%d unready, %d in slices not served)", ready, unready, unserved)
	}
	switch {
	case n.Prefix == "":
		if svc.Type == answers.ClusterSetIP && len(svc.IPs) == 0 {
			add("the ClusterSetIP import has no VIP (spec.ips is empty): the name exists without addresses")
		}
	case strings.HasPrefix(n.Prefix, "_"):
		var named []string
		for _, p := range svc.Ports {
			if p.Name != "" {
				named = append(named, "_"+p.Name+"._"+p.Protocol)
			}
		}
		if !noEndpoints && (set == nil || set.Lookup(0, n.Prefix) == nil) {
			add("no named port %s in the import (SRV names exist for: %s)", n.Prefix, orDash(strings.Join(named, ", ")))
		}
	default:
		host, cluster, _ := strings.Cut(n.Prefix, ".")
		if svc.Type == answers.ClusterSetIP {
			add("name form the spec does not serve: per-endpoint names (<hostname>.<cluster>.<svc>.<ns>.svc) exist only for Headless services; this import is ClusterSetIP")
			break
		}
		if cluster == "" {
			add("name form the spec does not serve: a name below a service is <hostname>.<cluster-id> or _<port>._<proto>")
			break
		}
		clusters := importClusters(so.imp)
		if !slices.Contains(clusters, cluster) {
			add("member withdrawn: the import does not list cluster %s (status.clusters: %s); mcs-importer withdraws a cluster's endpoints when its export goes away or once it has been unreachable for longer than the importer's --endpoint-grace-period",
				cluster, orDash(strings.Join(clusters, ", ")))
		}
		found := false
		for _, s := range so.slices {
			if s.info.SourceCluster != cluster {
				continue
			}
			// The object's own endpoints: the plugin's view keeps only
			// the ready ones.
			for _, ep := range s.info.Endpoints {
				name := ep.Hostname
				if name == "" && len(ep.Addresses) > 0 {
					if ip, err := compact.ParseIP(ep.Addresses[0]); err == nil {
						name = answers.DashedIP(ip)
					}
				}
				if name != host {
					continue
				}
				found = true
				switch {
				case s.why != "":
					add("endpoint %s of cluster %s is in EndpointSlice %s, which is not served", host, cluster, s.info.Name)
				case !ep.Ready:
					add("endpoint %s of cluster %s is not ready", host, cluster)
				}
			}
		}
		if !found && !noEndpoints && slices.Contains(clusters, cluster) {
			add("no endpoint with hostname %s from cluster %s in this member's EndpointSlices", host, cluster)
		}
	}
	if len(r) == 0 && rep.Rcode == "NOERROR" {
		add("the name exists but has no %s records (NODATA)", dns.TypeToString[qtype])
	}
	return r
}

func explainPTR(ctx context.Context, o *Options, ac *answerConfig, m *member, rep *ExplainReport, qname string) error {
	objs, err := readObjects(ctx, o, m, o.Namespace)
	if err != nil {
		return err
	}
	ix := build(objs, ac.zones, ac.shaping)
	switch found, targets := ix.ResolveReverse(qname, dns.TypePTR); found {
	case answers.Records:
		rep.Rcode = "NOERROR"
		rep.Answer = render(answers.PTRRecords(qname, targets, ttl))
	case answers.NoData:
		rep.Rcode = "NOERROR"
	default:
		rep.Rcode = dns.RcodeToString[dns.RcodeNameError]
	}
	// The objects holding the address.
	var holders []string
	for _, k := range slices.Sorted(maps.Keys(objs)) {
		so := objs[k]
		if so.cimp != nil && so.cimp.Err == nil {
			for _, ip := range so.cimp.Service.IPs {
				if reverseOf(ip) == qname {
					rep.Import = importInfo(so)
					holders = append(holders, fmt.Sprintf("VIP of %s ServiceImport %s", so.cimp.Service.Type, k))
				}
			}
		}
		for _, s := range so.slices {
			for _, ep := range s.info.Endpoints {
				for _, a := range ep.Addresses {
					ip, err := netip.ParseAddr(a)
					if err != nil || reverseOf(ip) != qname {
						continue
					}
					rep.Slices = append(rep.Slices, s.info)
					if rep.Import == nil {
						rep.Import = importInfo(so)
					}
					switch {
					case s.why != "":
						holders = append(holders, fmt.Sprintf("endpoint of %s in EndpointSlice %s, which is not served: %s", k, s.info.Name, s.why))
					case !ep.Ready:
						holders = append(holders, fmt.Sprintf("endpoint of %s in EndpointSlice %s, not ready", k, s.info.Name))
					case so.cimp == nil:
						holders = append(holders, fmt.Sprintf("endpoint of %s, which has no ServiceImport in %s", k, m.Context))
					case so.cimp.Err == nil && so.cimp.Service.Type == answers.ClusterSetIP:
						holders = append(holders, fmt.Sprintf("endpoint of ClusterSetIP service %s: PTR records exist for its VIP, not its endpoints", k))
					}
				}
			}
		}
	}
	if len(rep.Answer) == 0 {
		if len(holders) == 0 {
			rep.Reasons = append(rep.Reasons, fmt.Sprintf("no ServiceImport VIP or EndpointSlice endpoint in %s has this address (addresses of pods or Services that are not exported have no clusterset PTR)", m.Context))
		}
		rep.Reasons = append(rep.Reasons, holders...)
	}
	return nil
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

func printExplain(w io.Writer, rep *ExplainReport) {
	fmt.Fprintf(w, "%s %s in %s (cluster %s)\n\n", rep.Name, rep.Type, rep.Context, rep.Cluster)
	if len(rep.Export) > 0 {
		fmt.Fprintln(w, "ServiceExports:")
		for _, e := range rep.Export {
			switch {
			case e.Error != "":
				fmt.Fprintf(w, "  %s: %s\n", e.Context, e.Error)
			case !e.Exported:
				fmt.Fprintf(w, "  %s: none\n", e.Cluster)
			default:
				fmt.Fprintf(w, "  %s: Valid=%s Conflict=%s\n", e.Cluster, condString(e.Valid), condString(e.Conflict))
				for _, n := range e.NotMirrored {
					fmt.Fprintf(w, "    %s\n", n)
				}
			}
		}
	}
	if i := rep.Import; i != nil {
		fmt.Fprintf(w, "ServiceImport %s/%s: type=%s ips=%s ports=%s clusters=%s\n", i.Namespace, i.Name, orDash(i.Type),
			orDash(strings.Join(i.IPs, ",")), orDash(strings.Join(i.Ports, ", ")), orDash(strings.Join(i.Clusters, ",")))
		if i.Rejected != "" {
			fmt.Fprintf(w, "  rejected by the plugin: %s\n", i.Rejected)
		}
	} else {
		fmt.Fprintln(w, "ServiceImport: none")
	}
	for _, s := range rep.Slices {
		served := "served"
		if !s.Served {
			served = "NOT served: " + s.NotServed
		}
		fmt.Fprintf(w, "EndpointSlice %s: source-cluster=%s managed-by=%s (%s)\n", s.Name, orDash(s.SourceCluster), orDash(s.ManagedBy), served)
		for _, ep := range s.Endpoints {
			fmt.Fprintf(w, "  %s hostname=%s ready=%v\n", strings.Join(ep.Addresses, ","), orDash(ep.Hostname), ep.Ready)
		}
	}
	if sh := rep.Shaping; sh != nil {
		fmt.Fprintf(w, "\nShaping%s: %s\n", orEmpty(" (mcs stanza at ", sh.Corefile, ")"), shapingString(sh))
	}
	fmt.Fprintf(w, "\nAnswer (the plugin's code on these objects): %s\n", rep.Rcode)
	// Local-first: this cluster's endpoints first, as the plugin lists them.
	for _, local := range []bool{true, false} {
		for _, a := range rep.Answer {
			if slices.Contains(rep.Local, a) != local {
				continue
			}
			if local {
				fmt.Fprintf(w, "  %s   (local, first)\n", a)
			} else {
				fmt.Fprintf(w, "  %s\n", a)
			}
		}
	}
	if len(rep.All) > 0 {
		fmt.Fprintf(w, "  (max_answers %d: %d records in all; a rotating server answers with others of them)\n", rep.Shaping.MaxAnswers, len(rep.All))
	}
	for _, a := range rep.Extra {
		fmt.Fprintf(w, "  (additional) %s\n", a)
	}
	if len(rep.Reasons) > 0 {
		fmt.Fprintln(w, "Why:")
		for _, r := range rep.Reasons {
			fmt.Fprintf(w, "  - %s\n", r)
		}
	}
	if d := rep.DNS; d != nil {
		switch {
		case d.Error != "":
			fmt.Fprintf(w, "\nCoreDNS at %s: no answer: %s\n", d.Server, d.Error)
		case d.Subset:
			fmt.Fprintf(w, "\nCoreDNS at %s agrees: %s, with %d of the %d records (max_answers, or 64 KiB)\n", d.Server, d.Rcode, len(d.Answer), len(rep.Answer))
		case d.Agrees:
			fmt.Fprintf(w, "\nCoreDNS at %s agrees: %s\n", d.Server, d.Rcode)
		default:
			fmt.Fprintf(w, "\nCoreDNS at %s DISAGREES: %s\n", d.Server, d.Rcode)
			if d.Order != "" {
				fmt.Fprintf(w, "  %s\n", d.Order)
			}
			for _, a := range d.Answer {
				fmt.Fprintf(w, "  %s\n", a)
			}
		}
	}
}

func condString(c *condition) string {
	if c == nil {
		return "?"
	}
	if c.Reason == "" {
		return c.Status
	}
	return c.Status + "(" + c.Reason + ")"
}

// shapingString is sh in the Corefile's words.
func shapingString(sh *ShapingInfo) string {
	parts := []string{"locality " + sh.Locality}
	if sh.ClusterID != "" {
		parts = append(parts, fmt.Sprintf("cluster ID %s (%s)", sh.ClusterID, sh.ClusterIDFrom))
	} else {
		parts = append(parts, "no cluster ID"+orEmpty(" (", sh.ClusterIDFrom, ")"))
	}
	if sh.Rotate {
		parts = append(parts, "rotate (the answer shown is one turn)")
	}
	if sh.MaxAnswers > 0 {
		parts = append(parts, fmt.Sprintf("max_answers %d", sh.MaxAnswers))
	}
	if sh.LocalFirst {
		parts = append(parts, "this answer is local-first")
	}
	return strings.Join(parts, ", ")
}

func orEmpty(prefix, s, suffix string) string {
	if s == "" {
		return ""
	}
	return prefix + s + suffix
}

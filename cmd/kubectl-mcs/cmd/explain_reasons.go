package cmd

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/compact"
	"github.com/mcs-dns/mcs-dns/internal/dnsname"
)

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

// ptrHolders are the objects of m holding the address of the reverse
// name qname, in words: the imports whose VIP it is and the endpoints
// that have it, with why each has no PTR record. They go to rep's Import
// and Slices.
func ptrHolders(objs map[string]*serviceObjects, m *member, rep *ExplainReport, qname string) []string {
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
	return holders
}

package cmd

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/compact"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// status compares the snapshots of every member; rules say which source
// endpoints mcs-importer mirrors.
func status(snaps []*snapshot, rules sourceRules) *StatusReport {
	rep := &StatusReport{Services: []ServiceStatus{}}
	keys := map[string]bool{}
	for _, s := range snaps {
		mi := MemberInfo{Context: s.m.Context, ClusterID: s.m.ID, ExportVersion: s.m.Exports.Version, ImportVersion: s.m.Imports.Version}
		if s.err != nil {
			mi.Error = s.err.Error()
		}
		rep.Members = append(rep.Members, mi)
		if !s.usable() {
			continue
		}
		for _, e := range s.exports {
			keys[key(e.GetNamespace(), e.GetName())] = true
		}
		for _, i := range s.imports {
			keys[key(i.GetNamespace(), i.GetName())] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		ns, name, _ := strings.Cut(k, "/")
		rep.Services = append(rep.Services, serviceStatus(snaps, ns, name, rules))
	}
	return rep
}

func serviceStatus(snaps []*snapshot, ns, name string, rules sourceRules) ServiceStatus {
	st := ServiceStatus{Namespace: ns, Name: name, Exports: []ExportStatus{}}
	k := key(ns, name)
	var problems []string
	problem := func(f string, a ...any) {
		if p := fmt.Sprintf(f, a...); !slices.Contains(problems, p) {
			problems = append(problems, p)
		}
	}
	// want: the ready addresses of each valid export, by cluster ID, for
	// exporters that could be read.
	want := map[string]map[netip.Addr]bool{}
	readable := map[string]bool{}
	anyValid, svcType := false, ""
	for _, s := range snaps {
		if !s.usable() {
			problem("%s: %s", s.m.Context, short(s.err))
			continue
		}
		readable[s.m.ID] = true
		for i := range s.exports {
			e := &s.exports[i]
			if e.GetNamespace() != ns || e.GetName() != name {
				continue
			}
			es := ExportStatus{Cluster: s.m.ID, Context: s.m.Context,
				Valid:    conditionOf(e, "Valid"),
				Ready:    conditionOf(e, "Ready"),
				Conflict: conditionOf(e, "Conflict"),
			}
			srcs, notes := rules.mirrored(s.m.ID, s.m.Context, sourceSlices(s.source, ns, name))
			for _, n := range notes {
				problem("%s", n)
			}
			addrs := readyAddrs(srcs)
			es.ReadyEndpoints = len(addrs)
			switch {
			case es.Valid == nil:
				problem("export in %s has no Valid condition (is mcs-importer running?)", s.m.ID)
			case es.Valid.Status != "True":
				problem("export in %s invalid: %s", s.m.ID, es.Valid.Reason)
			default:
				anyValid = true
				want[s.m.ID] = addrs
			}
			if es.Conflict != nil && es.Conflict.Status == "True" {
				problem("conflict: %s", es.Conflict.Message)
			}
			if svc := s.services[k]; svc != nil && svcType == "" {
				svcType = answers.ClusterSetIP.String()
				if svc.Spec.ClusterIP == corev1.ClusterIPNone {
					svcType = answers.Headless.String()
				}
			}
			st.Exports = append(st.Exports, es)
		}
	}
	if len(st.Exports) == 0 {
		problem("not exported in any member that could be read")
	}
	total := 0
	for _, a := range want {
		total += len(a)
	}
	if anyValid && total == 0 {
		problem("no ready endpoints")
	}
	for _, s := range snaps {
		mv := MemberView{Context: s.m.Context, Cluster: s.m.ID}
		if !s.usable() {
			mv.Error = short(s.err)
			st.Members = append(st.Members, mv)
			continue
		}
		for i := range s.imports {
			u := &s.imports[i]
			if u.GetNamespace() != ns || u.GetName() != name {
				continue
			}
			mv.Import = true
			// The import as the plugin reads it (invalid ips left out).
			imp := compact.ImportFromUnstructured(u, time.Now())
			if imp.Err != nil {
				problem("import in %s rejected by the mcs plugin: %v", s.m.Context, imp.Err)
				continue
			}
			mv.Type = imp.Service.Type.String()
			for _, ip := range imp.Service.IPs {
				mv.IPs = append(mv.IPs, ip.String())
			}
			if mv.Type == answers.ClusterSetIP.String() && len(mv.IPs) == 0 {
				problem("import in %s has no VIP (spec.ips)", s.m.Context)
			}
			if svcType == "" || svcType != mv.Type {
				svcType = mv.Type
			}
		}
		got := map[string]map[netip.Addr]bool{}
		for i := range s.mirrored {
			es := &s.mirrored[i]
			if es.Namespace != ns || es.Labels[mcsapi.LabelServiceName] != name {
				continue
			}
			cs := compact.SliceFromEndpointSlice(es, time.Now())
			if cs.Err != nil {
				problem("mirrored EndpointSlice %s/%s in %s rejected by the mcs plugin: %v", ns, es.Name, s.m.Context, cs.Err)
				continue
			}
			id := cs.Slice.ClusterID
			if got[id] == nil {
				got[id] = map[netip.Addr]bool{}
			}
			for _, ep := range cs.Slice.Endpoints { // the ready ones
				for _, a := range ep.Addresses {
					got[id][a] = true
				}
			}
		}
		if len(got) > 0 {
			mv.Endpoints = map[string]int{}
			for id, a := range got {
				mv.Endpoints[id] = len(a)
			}
		}
		switch {
		case !mv.Import && s.namespaces != nil && !s.namespaces[ns]:
			mv.NoNamespace = true
		case !mv.Import && anyValid:
			problem("missing import in %s", s.m.Context)
		case mv.Import && !anyValid && len(st.Exports) > 0:
			problem("import in %s but no valid export", s.m.Context)
		}
		if mv.Import {
			for _, id := range slices.Sorted(maps.Keys(want)) {
				if d := diff(got[id], want[id]); d != "" {
					problem("stale in %s: %s from %s (%s has %d)", s.m.Context, d, id, id, len(want[id]))
				}
			}
			for _, id := range slices.Sorted(maps.Keys(got)) {
				if _, ok := want[id]; !ok && readable[id] && len(got[id]) > 0 {
					problem("stale in %s: %d ready endpoints from %s, which has no valid export", s.m.Context, len(got[id]), id)
				}
			}
		}
		st.Members = append(st.Members, mv)
	}
	st.Type = svcType
	st.Problems = problems
	return st
}

// sourceSlices are the slices of Service ns/name among a member's own.
func sourceSlices(all []discoveryv1.EndpointSlice, ns, name string) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for i := range all {
		if all[i].Namespace == ns && all[i].Labels[discoveryv1.LabelServiceName] == name {
			out = append(out, &all[i])
		}
	}
	return out
}

// diff says how got differs from want ("" when equal).
func diff(got, want map[netip.Addr]bool) string {
	if maps.Equal(got, want) {
		return ""
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%d ready endpoints", len(got))
	}
	return "other ready addresses"
}

package mcsctl

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/compact"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// StatusReport is what `kubectl mcs status` prints (-o json|yaml).
type StatusReport struct {
	Members  []MemberInfo    `json:"members"`
	Services []ServiceStatus `json:"services"`
}

// MemberInfo is one member as the tool reached it.
type MemberInfo struct {
	Context       string `json:"context"`
	ClusterID     string `json:"clusterID,omitempty"`
	ExportVersion string `json:"exportVersion,omitempty"`
	ImportVersion string `json:"importVersion,omitempty"`
	// Error says why the member could not be read.
	Error string `json:"error,omitempty"`
}

// ServiceStatus is one exported (or imported) service across the
// clusterset.
type ServiceStatus struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Type is the import's type where a member has the import, else the
	// one the exporters' Services imply.
	Type     string         `json:"type,omitempty"`
	Exports  []ExportStatus `json:"exports"`
	Members  []MemberView   `json:"members"`
	Problems []string       `json:"problems,omitempty"`
}

// ExportStatus is one ServiceExport: its conditions, as mcs-importer set
// them, and the ready endpoints of the exporting cluster's own slices.
type ExportStatus struct {
	Cluster        string     `json:"cluster"`
	Context        string     `json:"context"`
	Valid          *condition `json:"valid,omitempty"`
	Ready          *condition `json:"ready,omitempty"`
	Conflict       *condition `json:"conflict,omitempty"`
	ReadyEndpoints int        `json:"readyEndpoints"`
}

// MemberView is the service as one member sees it: its ServiceImport and
// the ready endpoints of the slices mcs-importer mirrored into it, per
// source cluster.
type MemberView struct {
	Context string `json:"context"`
	Cluster string `json:"cluster,omitempty"`
	Error   string `json:"error,omitempty"`
	Import  bool   `json:"import"`
	// NoNamespace: the member lacks the namespace, so no import is due.
	NoNamespace bool           `json:"noNamespace,omitempty"`
	Type        string         `json:"type,omitempty"`
	IPs         []string       `json:"ips,omitempty"`
	Endpoints   map[string]int `json:"readyEndpoints,omitempty"`
}

func runStatus(ctx context.Context, o *Options, service string, stdout, stderr io.Writer) error {
	names, err := contexts(o.Kubeconfig, o.Contexts)
	if err != nil {
		return err
	}
	rules, err := rulesOf(o)
	if err != nil {
		return err
	}
	ms := connect(ctx, o, names)
	snaps := fetch(ctx, ms, o.Namespace, service)
	rep := status(snaps, rules)
	usable := 0
	for _, s := range snaps {
		if s.usable() {
			usable++
		} else {
			fmt.Fprintf(stderr, "warning: %v\n", s.err)
		}
	}
	if usable == 0 {
		return fmt.Errorf("no member could be read")
	}
	switch o.Output {
	case "json", "yaml":
		return printStructured(stdout, o.Output, rep)
	}
	printStatusTable(stdout, rep)
	return nil
}

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

func printStatusTable(w io.Writer, rep *StatusReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"SERVICE", "TYPE", "EXPORTS"}
	for _, m := range rep.Members {
		head = append(head, strings.ToUpper(m.Context))
	}
	head = append(head, "PROBLEMS")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, s := range rep.Services {
		row := []string{s.Namespace + "/" + s.Name, orDash(s.Type), exportsCell(s.Exports)}
		for _, mv := range s.Members {
			row = append(row, memberCell(mv))
		}
		p := "-"
		if len(s.Problems) > 0 {
			p = "!! " + strings.Join(s.Problems, "; ")
		}
		row = append(row, p)
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// exportsCell is "east:ok west:invalid(NoService)": ok when the export
// is valid, ready and in no conflict, else what is not.
func exportsCell(es []ExportStatus) string {
	if len(es) == 0 {
		return "-"
	}
	var parts []string
	for _, e := range es {
		var bad []string
		switch {
		case e.Valid == nil:
			bad = append(bad, "no-conditions")
		case e.Valid.Status != "True":
			bad = append(bad, "invalid("+e.Valid.Reason+")")
		}
		if e.Conflict != nil && e.Conflict.Status == "True" {
			bad = append(bad, "conflict("+e.Conflict.Reason+")")
		}
		if e.Valid != nil && e.Valid.Status == "True" && e.Ready != nil && e.Ready.Status != "True" {
			bad = append(bad, "not-ready("+e.Ready.Reason+")")
		}
		if len(bad) == 0 {
			bad = []string{"ok"}
		}
		parts = append(parts, e.Cluster+":"+strings.Join(bad, ","))
	}
	return strings.Join(parts, " ")
}

// memberCell is a member's column: its VIP (or "headless") and ready
// endpoints per source cluster, "no import", or why it could not be read.
func memberCell(mv MemberView) string {
	switch {
	case mv.Error != "":
		return "!! " + mv.Error
	case mv.NoNamespace:
		return "(no namespace)"
	case !mv.Import:
		return "!! no import"
	}
	var parts []string
	switch {
	case len(mv.IPs) > 0:
		parts = append(parts, strings.Join(mv.IPs, ","))
	case mv.Type == answers.Headless.String():
		parts = append(parts, "headless")
	default:
		parts = append(parts, "no-vip")
	}
	var eps []string
	for _, id := range slices.Sorted(maps.Keys(mv.Endpoints)) {
		eps = append(eps, id+"="+strconv.Itoa(mv.Endpoints[id]))
	}
	if len(eps) == 0 {
		eps = []string{"0"}
	}
	return strings.Join(parts, " ") + " eps:" + strings.Join(eps, ",")
}

package cmd

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/mcs-dns/mcs-dns/internal/answers"
)

func printStatusTable(w io.Writer, rep *StatusReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"SERVICE", "TYPE", "EXPORTS", "IMPORTED"}
	for _, m := range rep.Members {
		head = append(head, strings.ToUpper(m.Context))
	}
	head = append(head, "PROBLEMS")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, s := range rep.Services {
		row := []string{s.Namespace + "/" + s.Name, orDash(s.Type), exportsCell(s.Exports), importedCell(s.Members)}
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

// importedCell is "2/3": in how many of the members that have the
// namespace the ServiceImport is (what the exports' Ready condition
// counts, read here from the members themselves).
func importedCell(ms []MemberView) string {
	n, of := 0, 0
	for _, mv := range ms {
		if mv.NoNamespace {
			continue
		}
		of++
		if mv.Import && mv.Error == "" {
			n++
		}
	}
	if of == 0 {
		return "-"
	}
	return strconv.Itoa(n) + "/" + strconv.Itoa(of)
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

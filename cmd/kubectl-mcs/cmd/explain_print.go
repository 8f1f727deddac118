package cmd

import (
	"fmt"
	"io"
	"strings"
)

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
	// Local-first: by tier, as the plugin lists them, each with its tier
	// and why.
	for _, tier := range []string{"local", "region", "other", ""} {
		for _, a := range rep.Answer {
			t := rep.Tiers[a]
			if tierName(t) != tier {
				continue
			}
			if t != "" {
				fmt.Fprintf(w, "  %s   (%s)\n", a, t)
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

// tierName is the tier of a Tiers description ("" none).
func tierName(desc string) string {
	name, _, _ := strings.Cut(desc, " ")
	return name
}

// shapingString is sh in the Corefile's words.
func shapingString(sh *ShapingInfo) string {
	parts := []string{"locality " + sh.Locality}
	if sh.ClusterID != "" {
		parts = append(parts, fmt.Sprintf("cluster ID %s (%s)", sh.ClusterID, sh.ClusterIDFrom))
	} else {
		parts = append(parts, "no cluster ID"+orEmpty(" (", sh.ClusterIDFrom, ")"))
	}
	if sh.Region != "" {
		parts = append(parts, fmt.Sprintf("region %s (%s)", sh.Region, sh.RegionFrom))
	} else if sh.RegionFrom != "" {
		parts = append(parts, "no region ("+sh.RegionFrom+")")
	}
	if sh.Rotate {
		parts = append(parts, "rotate (the answer shown is one turn)")
	}
	if sh.MaxAnswers > 0 {
		parts = append(parts, fmt.Sprintf("max_answers %d", sh.MaxAnswers))
	}
	if sh.LocalFirst {
		parts = append(parts, "this answer is local-first (local, then region, then other)")
	}
	return strings.Join(parts, ", ")
}

func orEmpty(prefix, s, suffix string) string {
	if s == "" {
		return ""
	}
	return prefix + s + suffix
}

package cmd

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/mcs-dns/mcs-dns/internal/answers"
	"github.com/mcs-dns/mcs-dns/internal/dnsname"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/internal/memberconn"
	"github.com/mcs-dns/mcs-dns/internal/stanza"
)

// ShapingInfo is how explain shapes the answer: as the explained
// CoreDNS's mcs stanza does (--corefile), with the flags on top.
type ShapingInfo struct {
	// Corefile is the stanza read, FILE:LINE ("" without --corefile).
	Corefile string `json:"corefile,omitempty"`
	// ClusterID is the member's own cluster ID ("" none: no endpoint is
	// local), and ClusterIDFrom where it comes from or why there is none.
	ClusterID     string `json:"clusterID,omitempty"`
	ClusterIDFrom string `json:"clusterIDFrom,omitempty"`
	// Region is the member's region ("" none: no endpoint is in the
	// region tier), and RegionFrom where it comes from or why there is
	// none.
	Region     string `json:"region,omitempty"`
	RegionFrom string `json:"regionFrom,omitempty"`
	// Locality is local-first, none or default.
	Locality   string `json:"locality"`
	Rotate     bool   `json:"rotate,omitempty"`
	MaxAnswers int    `json:"maxAnswers,omitempty"`
	// LocalFirst: this answer lists the member's own endpoints first,
	// then those of its region's clusters (SRV: priorities 0, 10, and
	// 20 for the others; 10 without a region).
	LocalFirst bool `json:"localFirst,omitempty"`
}

// answerConfig is what the explained CoreDNS answers with besides the
// objects: its forward zones (PTR targets are names in the first) and
// its shaping. The trusted managers go to ExplainOptions.Managers.
type answerConfig struct {
	zones   []string
	shaping answers.Shaping
	// regionProperty is the stanza's region_property ("": the default).
	regionProperty string
	info           ShapingInfo
}

// resolveConfig reads the mcs stanza of --corefile that serves qname,
// with the plugin's own parser, and lays the explicit flags over it.
func resolveConfig(o *ExplainOptions) (*answerConfig, error) {
	qname := o.qname
	ac := &answerConfig{zones: []string{dnsname.Lower(dns.Fqdn(o.Zone))}}
	if o.Corefile != "" {
		f, err := os.Open(o.Corefile)
		if err != nil {
			return nil, fmt.Errorf("--corefile: %w", err)
		}
		stanzas, err := stanza.Read(o.Corefile, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("--corefile: %w", err)
		}
		var serving []stanza.Stanza
		var all []string
		for _, s := range stanzas {
			all = append(all, fmt.Sprintf("%s at line %d", strings.Join(s.Zones, " "), s.Line))
			if dnsname.Match(qname, s.Zones) >= 0 {
				serving = append(serving, s)
			}
		}
		if len(serving) == 0 {
			if len(all) == 0 {
				return nil, fmt.Errorf("--corefile %s has no mcs stanza", o.Corefile)
			}
			return nil, fmt.Errorf("no mcs stanza of --corefile %s serves %s (its mcs stanzas serve: %s)", o.Corefile, qname, strings.Join(all, "; "))
		}
		s := serving[0]
		if len(serving) > 1 {
			fmt.Fprintf(o.ErrOut, "warning: %d mcs stanzas of %s serve %s; using the one at line %d\n", len(serving), o.Corefile, qname, s.Line)
		}
		ac.zones = stanza.ForwardZones(s.Zones)
		ac.shaping = s.Shaping
		ac.info.Corefile = fmt.Sprintf("%s:%d", s.File, s.Line)
		if s.Shaping.ClusterID != "" {
			ac.info.ClusterIDFrom = "cluster_id in " + ac.info.Corefile
		}
		if s.Shaping.Region != "" {
			ac.info.RegionFrom = "region in " + ac.info.Corefile
		}
		ac.regionProperty = s.RegionProperty
		if !o.explicit["endpointslice-managers"] {
			o.Managers = s.Managers
		}
	}
	if o.explicit["zone"] {
		ac.zones = []string{dnsname.Lower(dns.Fqdn(o.Zone))}
	}
	if o.explicit["cluster-id"] {
		if err := mcsapi.ValidateClusterID(o.ClusterID); err != nil {
			return nil, fmt.Errorf("--cluster-id: %w", err)
		}
		ac.shaping.ClusterID, ac.info.ClusterIDFrom = o.ClusterID, "--cluster-id"
	}
	if o.explicit["region"] {
		if err := mcsapi.ValidateRegion(o.Region); err != nil {
			return nil, fmt.Errorf("--region: %w", err)
		}
		ac.shaping.Region, ac.info.RegionFrom = o.Region, "--region"
	}
	if o.explicit["locality"] {
		if o.Locality == "default" {
			ac.shaping.Locality = answers.LocalityDefault
		} else {
			l, err := stanza.ParseLocality(o.Locality)
			if err != nil {
				return nil, fmt.Errorf("--locality: %w (or default)", err)
			}
			ac.shaping.Locality = l
		}
	}
	if o.explicit["max-answers"] {
		ac.shaping.MaxAnswers = 0
		if o.MaxAnswers != 0 {
			n, err := stanza.ParseMaxAnswers(strconv.Itoa(o.MaxAnswers))
			if err != nil {
				return nil, fmt.Errorf("--max-answers: %w (or 0: as many as fit)", err)
			}
			ac.shaping.MaxAnswers = n
		}
	}
	return ac, nil
}

// learnClusterID reads the member's cluster ID and region as the plugin
// does at start-up (memberconn.ReadValidClusterID, ReadRegion) when none
// was given and some answer could be local-first; without an ID, no
// endpoint is local, without a region none is in the region tier.
func (ac *answerConfig) learnClusterID(ctx context.Context, timeout time.Duration, m *member) {
	defer ac.describe()
	if ac.shaping.Locality == answers.LocalityNone {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if ac.shaping.ClusterID == "" {
		id, err := memberconn.ReadValidClusterID(ctx, m.Dyn)
		if err != nil {
			ac.info.ClusterIDFrom = "none, so no answer is local-first: " + err.Error()
			return
		}
		ac.shaping.ClusterID, ac.info.ClusterIDFrom = id, "ClusterProperty "+mcsapi.ClusterIDProperty
	}
	if ac.shaping.Region == "" {
		prop := ac.regionProperty
		if prop == "" {
			prop = mcsapi.RegionProperty
		}
		switch region, err := memberconn.ReadRegion(ctx, m.Dyn, prop); {
		case err != nil:
			ac.info.RegionFrom = "none, so no region tier: " + err.Error()
		case region == "":
			ac.info.RegionFrom = "none (no ClusterProperty " + prop + "), so no region tier"
		default:
			ac.shaping.Region, ac.info.RegionFrom = region, "ClusterProperty "+prop
		}
	}
}

func (ac *answerConfig) describe() {
	sh := &ac.shaping
	ac.info.ClusterID, ac.info.Region, ac.info.Rotate, ac.info.MaxAnswers = sh.ClusterID, sh.Region, sh.Rotate, sh.MaxAnswers
	if ac.info.Locality = stanza.LocalityString(sh.Locality); ac.info.Locality == "" {
		ac.info.Locality = "default"
	}
}

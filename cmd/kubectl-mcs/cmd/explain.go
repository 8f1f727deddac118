package cmd

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/mcs-dns/mcs-dns/internal/dnsname"
	"github.com/mcs-dns/mcs-dns/internal/memberconn"
)

// ExplainOptions are the options of kubectl mcs explain.
type ExplainOptions struct {
	memberFlags

	// In is the member explain answers for (default: --context, then the
	// kubeconfig's current context).
	In string
	// DNS, when set, is the member's CoreDNS to ask and compare with.
	DNS string
	// Managers mirror a Corefile's endpointslice_managers (nil: the
	// plugin's default rule).
	Managers []string
	// Zone is the forward zone the plugin serves.
	Zone string
	// Corefile, when set, is the Corefile of the CoreDNS explained: its
	// mcs stanza gives the zones, endpointslice_managers and answer
	// shaping, unless the flags below (or Managers, Zone) are given.
	Corefile string
	// ClusterID, Region, Locality and MaxAnswers mirror the stanza's
	// cluster_id, region, locality and max_answers.
	ClusterID  string
	Region     string
	Locality   string
	MaxAnswers int

	// Set by Complete.
	qname    string
	typeArg  string // the TYPE argument, "" when not given
	target   string // the member explained
	explicit map[string]bool
	answer   *answerConfig
	// Set by Validate.
	qtype   uint16
	reverse bool
	zone    int // index in answer.zones of the name's zone
	members []string
	rules   sourceRules
}

// NewExplainOptions are explain's options with their defaults.
func NewExplainOptions(streams genericiooptions.IOStreams) *ExplainOptions {
	return &ExplainOptions{memberFlags: newMemberFlags(streams), Zone: "clusterset.local", explicit: map[string]bool{}}
}

// NewCmdExplain is kubectl mcs explain.
func NewCmdExplain(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewExplainOptions(streams)
	cmd := &cobra.Command{
		Use:   "explain NAME [TYPE] --in CONTEXT",
		Short: "Why one clusterset.local name answers as it does in one member",
		Long: `For a clusterset.local name (svc.ns.svc.clusterset.local,
host.cluster.svc.ns.svc.clusterset.local,
_port._proto.svc.ns.svc.clusterset.local, x.x.x.x.in-addr.arpa): the objects
in that member that decide its answer, the answer the mcs plugin's own code
computes from them, and why it is NXDOMAIN or empty. --dns also asks that
member's CoreDNS and says whether the two agree. Answers are shaped as that
CoreDNS shapes them (local-first, max_answers) when --corefile names its
Corefile, or with --cluster-id, --locality and --max-answers.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return fmt.Errorf("usage: kubectl mcs explain NAME [TYPE] --in CONTEXT")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if err := o.Complete(c, args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(c)
		},
	}
	fs := cmd.Flags()
	o.addFlags(fs, "the member context explained when --in is not given (default: the kubeconfig's current context)")
	fs.StringVar(&o.In, "in", "", "the member context whose answer to explain (default: --context, then the kubeconfig's current context)")
	fs.StringVar(&o.DNS, "dns", "", "address (host[:port]) of that member's CoreDNS, to ask and compare")
	fs.StringSliceVar(&o.Managers, "endpointslice-managers", nil, "the trusted EndpointSlice managers, as the Corefile's endpointslice_managers (default: the plugin's default rule)")
	fs.StringVar(&o.Zone, "zone", o.Zone, "the forward zone the mcs plugin serves")
	fs.StringVar(&o.Corefile, "corefile", "", "the Corefile of that member's CoreDNS; its mcs stanza gives the zones, endpointslice_managers and answer shaping (cluster_id, locality, rotate, max_answers) unless flags override them")
	fs.StringVar(&o.ClusterID, "cluster-id", "", "the member's cluster ID for local-first answers, as the Corefile's cluster_id (default: the Corefile's, else the member's ClusterProperty cluster.clusterset.k8s.io, as the plugin reads it)")
	fs.StringVar(&o.Region, "region", "", "the member's region for the region tier of local-first answers, as the Corefile's region (default: the Corefile's, else the member's region ClusterProperty, region_property or region.topology.kubernetes.io, as the plugin reads it)")
	fs.StringVar(&o.Locality, "locality", "", "local-first, none or default, as the Corefile's locality (default: the Corefile's, else default: local-first for imports whose trafficDistribution asks for closeness)")
	fs.IntVar(&o.MaxAnswers, "max-answers", 0, "at most this many endpoints per headless answer, as the Corefile's max_answers (0: as many as fit; default: the Corefile's)")
	return cmd
}

// Complete reads the arguments and the flags, the member explained, and
// the answer's configuration: --corefile's mcs stanza for the name with
// the flags given laid over it.
func (o *ExplainOptions) Complete(c *cobra.Command, args []string) error {
	o.qname = dnsname.Lower(dns.Fqdn(args[0]))
	if len(args) == 2 {
		o.typeArg = args[1]
	}
	if c != nil {
		c.Flags().Visit(func(f *pflag.Flag) { o.explicit[f.Name] = true })
	}
	if err := o.complete(); err != nil {
		return err
	}
	ac, err := resolveConfig(o)
	if err != nil {
		return err
	}
	o.answer = ac
	if o.target = o.In; o.target == "" {
		o.target = o.context
	}
	return nil
}

// Validate checks the options before any member is asked: the output
// format and timeout, that the name is in a zone explained and its type
// is one, and the member contexts against the kubeconfig.
func (o *ExplainOptions) Validate() error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.answer == nil {
		return fmt.Errorf("explain: options not completed")
	}
	if o.In != "" && o.context != "" && o.In != o.context {
		return fmt.Errorf("--in %q and --context %q name different members: give one", o.In, o.context)
	}
	o.reverse = dnsname.Match(o.qname, reverseZones) >= 0
	o.zone = dnsname.Match(o.qname, o.answer.zones)
	if !o.reverse && o.zone < 0 {
		return fmt.Errorf("%s is not in %s or a reverse zone (in-addr.arpa, ip6.arpa)", o.qname, strings.Join(o.answer.zones, ", "))
	}
	o.qtype = dns.TypeA
	switch {
	case o.typeArg != "":
		t, ok := dns.StringToType[strings.ToUpper(o.typeArg)]
		if !ok || t == dns.TypeANY {
			return fmt.Errorf("unknown record type %q (A, AAAA, SRV, PTR, TXT, ...)", o.typeArg)
		}
		o.qtype = t
	case o.reverse:
		o.qtype = dns.TypePTR
	case strings.HasPrefix(o.qname, "_"):
		o.qtype = dns.TypeSRV
	}
	if o.target == "" {
		raw, err := memberconn.RawKubeconfig(o.kubeconfig)
		if err != nil {
			return err
		}
		if o.target = raw.CurrentContext; o.target == "" {
			return fmt.Errorf("--in CONTEXT is required (the kubeconfig has no current context)")
		}
	}
	names, err := contexts(o.kubeconfig, o.Contexts)
	if err != nil {
		return err
	}
	if !slices.Contains(names, o.target) {
		if _, err := contexts(o.kubeconfig, []string{o.target}); err != nil {
			return err
		}
		names = append(names, o.target)
	}
	o.members = names
	o.rules, err = rulesOf(&o.memberFlags)
	return err
}

// Run reads the member explained (and every member's ServiceExport of
// the name's service), computes the answer, asks CoreDNS with --dns, and
// prints the report.
func (o *ExplainOptions) Run(c *cobra.Command) error {
	rep, err := o.report(c.Context(), true)
	if err != nil {
		return err
	}
	switch o.Output {
	case "json", "yaml":
		return printStructured(o.Out, o.Output, rep)
	}
	printExplain(o.Out, rep)
	return nil
}

// report is the report Run prints; warn says whether members that cannot
// be read are warned of on ErrOut.
func (o *ExplainOptions) report(ctx context.Context, warn bool) (*ExplainReport, error) {
	ms := connect(ctx, &o.memberFlags, o.members)
	var target *member
	for _, m := range ms {
		if m.Context == o.target {
			target = m
		}
	}
	if target.Err != nil {
		return nil, target.Err
	}
	for _, m := range ms {
		if m.Err != nil && warn {
			fmt.Fprintf(o.ErrOut, "warning: %v (its ServiceExports are not known)\n", m.Err)
		}
	}
	ac := o.answer
	ac.learnClusterID(ctx, o.requestTimeout, target)
	rep := &ExplainReport{Name: o.qname, Type: dns.TypeToString[o.qtype], Context: o.target, Cluster: target.ID, Answer: []string{}, Shaping: &ac.info}
	var err error
	if o.reverse {
		err = o.explainPTR(ctx, target, rep)
	} else {
		err = o.explainForward(ctx, ms, target, rep)
	}
	if err != nil {
		return nil, err
	}
	if o.DNS != "" {
		rep.DNS = checkDNS(o.DNS, o.qname, o.qtype, rep)
	}
	return rep, nil
}

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
	// Tiers say, for each record of Answer of a local-first answer, its
	// endpoint's tier and why: "local (cluster east)", "region
	// (eu-west-1, cluster north)" or "other (cluster south)".
	Tiers map[string]string `json:"tiers,omitempty"`
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

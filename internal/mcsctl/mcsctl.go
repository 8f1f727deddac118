// Package mcsctl is `kubectl mcs`, the operator's view of a clusterset
// served by mcs-importer and the mcs CoreDNS plugin: `status` compares
// every member's exports, imports and mirrored endpoints; `explain`
// shows, for one clusterset.local name in one member, the objects that
// decide its answer, that answer computed with the plugin's own code, and
// why it is empty. It only reads. cmd/kubectl-mcs is a thin main around
// Run.
package mcsctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// Options are the flags of both commands.
type Options struct {
	// Kubeconfig is the kubeconfig file ("" = $KUBECONFIG, then
	// ~/.kube/config).
	Kubeconfig string
	// Contexts are the member contexts (default: all of the kubeconfig).
	Contexts []string
	// Namespace limits status (and explain's PTR search) to one
	// namespace ("" = all).
	Namespace string
	// Output is table, json or yaml.
	Output string
	// RequestTimeout bounds each request to a member.
	RequestTimeout time.Duration

	// In is the member explain answers for (default: the current context).
	In string
	// DNS, when set, is the member's CoreDNS to ask and compare with.
	DNS string
	// Managers mirror a Corefile's endpointslice_managers (nil: the
	// plugin's default rule).
	Managers []string
	// SourceManagers mirror mcs-importer's --endpointslice-managers: the
	// managers of the source EndpointSlices it mirrors (status).
	SourceManagers []string
	// ExportPolicy is mcs-importer's --export-policy file, when given:
	// source endpoints outside its addressRanges are reported as not
	// mirrored (status, explain).
	ExportPolicy string
	// Zone is the forward zone the plugin serves.
	Zone string
	// Corefile, when set, is the Corefile of the CoreDNS explained: its
	// mcs stanza gives the zones, endpointslice_managers and answer
	// shaping, unless the flags below (or Managers, Zone) are given.
	Corefile string
	// ClusterID, Locality and MaxAnswers mirror the stanza's cluster_id,
	// locality and max_answers.
	ClusterID  string
	Locality   string
	MaxAnswers int

	// explicit are the flags given on the command line.
	explicit map[string]bool
}

const usage = `kubectl mcs: the state of a Multi-Cluster Services clusterset (mcs-importer
and the mcs CoreDNS plugin), read from every member cluster. It only reads.

Usage:
  kubectl mcs status [SERVICE] [flags]
      One row per exported service: the exporting clusters and their
      exports' Valid/Ready/Conflict conditions, each member's ServiceImport
      (VIP) and the ready endpoints it has per source cluster, and problems
      (missing import, stale endpoints, conflict, invalid export, member
      unreachable).
  kubectl mcs explain NAME [TYPE] --in CONTEXT [--dns ADDR] [flags]
      For a clusterset.local name (svc.ns.svc.clusterset.local,
      host.cluster.svc.ns.svc.clusterset.local,
      _port._proto.svc.ns.svc.clusterset.local, x.x.x.x.in-addr.arpa): the
      objects in that member that decide its answer, the answer the mcs
      plugin's own code computes from them, and why it is NXDOMAIN or
      empty. --dns also asks that member's CoreDNS and says whether the
      two agree. Answers are shaped as that CoreDNS shapes them (local-first,
      max_answers) when --corefile names its Corefile, or with
      --cluster-id, --locality and --max-answers.

Flags:
`

// Run runs kubectl mcs with args (without the program name) and returns
// the exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if err := run(ctx, args, stdout, stderr); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := &Options{Output: "table", RequestTimeout: 5 * time.Second, Zone: "clusterset.local"}
	fs := pflag.NewFlagSet("kubectl mcs", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file with one context per member cluster (default: $KUBECONFIG, then ~/.kube/config)")
	fs.StringSliceVar(&o.Contexts, "contexts", nil, "comma-separated member contexts (default: every context of the kubeconfig)")
	fs.StringVarP(&o.Namespace, "namespace", "n", "", "only this namespace (default: all namespaces)")
	fs.StringVarP(&o.Output, "output", "o", o.Output, "output format: table, json or yaml")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "bound on each request to a member; a member that does not answer in time is shown as unreachable")
	fs.StringVar(&o.In, "in", "", "explain: the member context whose answer to explain (default: the kubeconfig's current context)")
	fs.StringVar(&o.DNS, "dns", "", "explain: address (host[:port]) of that member's CoreDNS, to ask and compare")
	fs.StringSliceVar(&o.SourceManagers, "source-managers", []string{"endpointslice-controller.k8s.io"}, "status, explain: the managers of the source EndpointSlices mcs-importer mirrors; give the importer's --endpointslice-managers, which kubectl mcs cannot read (slices of exported Services without a manager or with another are reported as not mirrored, under this rule, not the importer's)")
	fs.StringVar(&o.ExportPolicy, "export-policy", "", "status, explain: a copy of the file mcs-importer's --export-policy names, which kubectl mcs cannot read; endpoint addresses of exported Services outside its addressRanges are reported as not mirrored (without it, nothing is reported for the policy)")
	fs.StringSliceVar(&o.Managers, "endpointslice-managers", nil, "explain: the trusted EndpointSlice managers, as the Corefile's endpointslice_managers (default: the plugin's default rule)")
	fs.StringVar(&o.Zone, "zone", o.Zone, "explain: the forward zone the mcs plugin serves")
	fs.StringVar(&o.Corefile, "corefile", "", "explain: the Corefile of that member's CoreDNS; its mcs stanza gives the zones, endpointslice_managers and answer shaping (cluster_id, locality, rotate, max_answers) unless flags override them")
	fs.StringVar(&o.ClusterID, "cluster-id", "", "explain: the member's cluster ID for local-first answers, as the Corefile's cluster_id (default: the Corefile's, else the member's ClusterProperty cluster.clusterset.k8s.io, as the plugin reads it)")
	fs.StringVar(&o.Locality, "locality", "", "explain: local-first, none or default, as the Corefile's locality (default: the Corefile's, else default: local-first for imports whose trafficDistribution asks for closeness)")
	fs.IntVar(&o.MaxAnswers, "max-answers", 0, "explain: at most this many endpoints per headless answer, as the Corefile's max_answers (0: as many as fit; default: the Corefile's)")
	help := fs.BoolP("help", "h", false, "show this help")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w (see kubectl mcs --help)", err)
	}
	o.explicit = map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { o.explicit[f.Name] = true })
	rest := fs.Args()
	if *help || len(rest) == 0 {
		fmt.Fprint(stdout, usage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		if *help {
			return pflag.ErrHelp
		}
		return errors.New("a command is required: status or explain")
	}
	switch o.Output {
	case "table", "json", "yaml":
	default:
		return fmt.Errorf("-o %q: want table, json or yaml", o.Output)
	}
	if o.RequestTimeout <= 0 {
		return fmt.Errorf("--request-timeout must be positive")
	}
	switch rest[0] {
	case "status":
		if len(rest) > 2 {
			return fmt.Errorf("usage: kubectl mcs status [SERVICE]")
		}
		svc := ""
		if len(rest) == 2 {
			svc = rest[1]
		}
		return runStatus(ctx, o, svc, stdout, stderr)
	case "explain":
		return runExplain(ctx, o, rest[1:], stdout, stderr)
	}
	return fmt.Errorf("unknown command %q: want status or explain", rest[0])
}

func printStructured(w io.Writer, format string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if raw, err = yaml.JSONToYAML(raw); err != nil {
			return err
		}
		_, err = w.Write(raw)
		return err
	}
	_, err = fmt.Fprintln(w, strings.TrimSpace(string(raw)))
	return err
}

// Package cmd is `kubectl mcs`, the operator's view of a clusterset
// served by mcs-importer and the mcs CoreDNS plugin: `status` compares
// every member's exports, imports and mirrored endpoints; `explain`
// shows, for one clusterset.local name in one member, the objects that
// decide its answer, that answer computed with the plugin's own code, and
// why it is empty; `wait` polls that computation until the name answers
// in the members named. Those three only read. `join` makes a cluster a
// member (the CRDs, the importer's identity and a token in it, its context
// in the importer's kubeconfig Secret), `unjoin` undoes exactly that, and
// `dns` adds the clusterset.local forwarding to a member's cluster DNS.
//
// It is shaped like kubectl's own commands (k8s.io/sample-cli-plugin): a
// cobra command per subcommand, each with one options type (StatusOptions,
// ExplainOptions) whose Complete, Validate and Run are called in that
// order, and which registers only its own flags; --kubeconfig, --context,
// -n/--namespace and --request-timeout are genericclioptions.ConfigFlags.
//
// The files: mcs.go (the root command, Run), options.go (the flags both
// subcommands have), connect.go (reaching the members), sources.go (what
// mcs-importer mirrors), fetch.go (reading a member's objects for status),
// status*.go (the comparison and its table), explain.go (its options and
// flow), explain_read.go (the objects of one name), explain_answer.go (the
// answer, computed and asked of CoreDNS), explain_shaping.go (--corefile
// and the shaping flags), explain_reasons.go (why an answer is empty) and
// explain_print.go; wait.go; join.go, join_flags.go (the flags unjoin shares),
// joinobjects.go (the objects join writes and how), unjoin.go, dns.go and
// corefile.go (the Corefile block's text editing).
package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"
)

const rootLong = `kubectl mcs: the state of a Multi-Cluster Services clusterset (mcs-importer
and the mcs CoreDNS plugin), read from every member cluster; status, explain and wait only read.

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
  kubectl mcs wait NAME [TYPE] [--for resolvable|endpoints=N] [--in CONTEXT]... [--timeout D]
      Waits until the name answers as asked in every member named (and,
      with --dns CONTEXT=ADDR, in its CoreDNS); exit code 0 when it does,
      1 when some member did not by --timeout (explain's reasons printed),
      2 when it could not start.

It also sets members up (these write):

  kubectl mcs join --hosting-context HOST --member-context MEMBER [flags]
      Make a cluster a member: the CRDs, the importer's identity and a
      token in it, its context in the importer's kubeconfig Secret in HOST.
  kubectl mcs unjoin --hosting-context HOST --member-context MEMBER
      Undo join: exactly what join added goes.
  kubectl mcs dns --context MEMBER [--apply | --undo] [--server IP]
      The Corefile block that sends clusterset.local from the member's
      cluster DNS to our CoreDNS: printed, applied or removed.`

// NewCmdMCS is the root command, kubectl mcs, with its subcommands
// status and explain.
func NewCmdMCS(streams genericiooptions.IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "mcs",
		Short: "The state of a Multi-Cluster Services clusterset, read from every member cluster",
		Long:  rootLong,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl mcs",
		},
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return errors.New("a command is required: status, explain, wait, join, unjoin or dns")
		},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see %s --help)", err, c.CommandPath())
	})
	root.AddCommand(NewCmdStatus(streams), NewCmdExplain(streams), NewCmdWait(streams), NewCmdJoin(streams), NewCmdUnjoin(streams), NewCmdDNS(streams))
	return root
}

// Run runs kubectl mcs with args (without the program name) and returns
// the exit code: 0, or after printing the error to stderr 1 (wait: 1 when
// the condition was not met, 2 when it could not be checked).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := NewCmdMCS(genericiooptions.IOStreams{In: strings.NewReader(""), Out: stdout, ErrOut: stderr})
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "error: %v\n", err)
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
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

package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// StatusOptions are the options of kubectl mcs status.
type StatusOptions struct {
	memberFlags
	// Service, when set, is the one service shown (the argument).
	Service string

	members []string
	rules   sourceRules
}

// NewStatusOptions are status's options with their defaults.
func NewStatusOptions(streams genericiooptions.IOStreams) *StatusOptions {
	return &StatusOptions{memberFlags: newMemberFlags(streams)}
}

// NewCmdStatus is kubectl mcs status.
func NewCmdStatus(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewStatusOptions(streams)
	cmd := &cobra.Command{
		Use:   "status [SERVICE]",
		Short: "Every member's exports, imports and mirrored endpoints, compared",
		Long: `One row per exported service: the exporting clusters and their exports'
Valid/Ready/Conflict conditions, each member's ServiceImport (VIP) and the
ready endpoints it has per source cluster, and problems (missing import,
stale endpoints, conflict, invalid export, member unreachable).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return fmt.Errorf("usage: kubectl mcs status [SERVICE]")
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
	o.addFlags(cmd.Flags(), "the one member to read, when --contexts is not given (default: every context of the kubeconfig)")
	return cmd
}

// Complete reads the argument and the flags.
func (o *StatusOptions) Complete(_ *cobra.Command, args []string) error {
	if len(args) == 1 {
		o.Service = args[0]
	}
	return o.complete()
}

// Validate checks the options before any member is asked: the output
// format, the timeout, the contexts against the kubeconfig, and the
// export policy file.
func (o *StatusOptions) Validate() error {
	if err := o.validate(); err != nil {
		return err
	}
	if len(o.Contexts) > 0 && o.context != "" {
		return fmt.Errorf("--context and --contexts: give one (--context reads one member, --contexts several)")
	}
	want := o.Contexts
	if o.context != "" {
		want = []string{o.context}
	}
	var err error
	if o.members, err = contexts(o.kubeconfig, want); err != nil {
		return err
	}
	o.rules, err = rulesOf(&o.memberFlags)
	return err
}

// Run reads every member and prints the comparison.
func (o *StatusOptions) Run(c *cobra.Command) error {
	ctx := c.Context()
	ms := connect(ctx, &o.memberFlags, o.members)
	snaps := fetch(ctx, ms, o.namespace, o.Service)
	rep := status(snaps, o.rules)
	usable := 0
	for _, s := range snaps {
		if s.usable() {
			usable++
		} else {
			fmt.Fprintf(o.ErrOut, "warning: %v\n", s.err)
		}
	}
	if usable == 0 {
		return fmt.Errorf("no member could be read")
	}
	switch o.Output {
	case "json", "yaml":
		return printStructured(o.Out, o.Output, rep)
	}
	printStatusTable(o.Out, rep)
	return nil
}

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

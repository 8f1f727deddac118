package cmd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Exit codes of kubectl mcs wait (and of Run for any command whose error
// carries one).
const (
	// ExitNotMet: the condition was not met in every member by --timeout.
	ExitNotMet = 1
	// ExitCannotCheck: wait could not start checking (bad arguments or
	// flags, a kubeconfig or context that does not load).
	ExitCannotCheck = 2
)

// exitError is an error with the exit code Run returns for it.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func cannotCheck(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: ExitCannotCheck, err: err}
}

// WaitOptions are the options of kubectl mcs wait.
type WaitOptions struct {
	memberFlags

	// In are the members that must answer (default: --context, else
	// every member of --contexts).
	In []string
	// For is the condition: resolvable, or endpoints=N.
	For string
	// Timeout bounds the wait; Interval is the time between checks.
	Timeout, Interval time.Duration
	// DNS are CONTEXT=ADDR pairs: that member's CoreDNS must also answer.
	DNS []string
	// Managers and Zone are as explain's.
	Managers []string
	Zone     string

	// Set by Complete.
	args      []string
	explicit  map[string]bool
	endpoints int // endpoints=N; 0: resolvable
	dnsOf     map[string]string
	// Set by Validate: one explain per member waited for.
	targets  []string
	explains map[string]*ExplainOptions
}

// NewWaitOptions are wait's options with their defaults.
func NewWaitOptions(streams genericiooptions.IOStreams) *WaitOptions {
	return &WaitOptions{memberFlags: newMemberFlags(streams), For: "resolvable", Timeout: 5 * time.Minute,
		Interval: time.Second, Zone: "clusterset.local", explicit: map[string]bool{}}
}

// NewCmdWait is kubectl mcs wait.
func NewCmdWait(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewWaitOptions(streams)
	cmd := &cobra.Command{
		Use:   "wait NAME [TYPE] [--for resolvable|endpoints=N] [--in CONTEXT]... [--timeout D]",
		Short: "Wait until a clusterset.local name answers in the members named",
		Long: `Waits until a clusterset.local name (svc.ns.svc.clusterset.local, or any
name explain takes) answers as asked in every member named by --in (default:
--context, else every member of --contexts), read from that member's objects
as the mcs plugin reads them; with --dns CONTEXT=ADDR that member's CoreDNS
must also answer so. --for resolvable (the default): the name answers TYPE
(default A; SRV for _port._proto names) with at least one record.
--for endpoints=N: the service has at least N ready endpoint addresses in
the slices the plugin serves in that member.

Prints one line per member as it becomes ready. Exit code 0: every member
answers as asked; 1: some member did not by --timeout (the reasons, as
explain gives them, are printed); 2: wait could not start (bad arguments,
flags or kubeconfig).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return cannotCheck(errors.New("usage: kubectl mcs wait NAME [TYPE] [--for resolvable|endpoints=N]"))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if err := o.Complete(c, args); err != nil {
				return cannotCheck(err)
			}
			if err := o.Validate(); err != nil {
				return cannotCheck(err)
			}
			return o.Run(c)
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return cannotCheck(fmt.Errorf("%w (see %s --help)", err, c.CommandPath()))
	})
	fs := cmd.Flags()
	o.addFlags(fs, "the member that must answer when --in is not given")
	fs.StringSliceVar(&o.In, "in", nil, "a member context that must answer (repeat, or comma-separate; default: --context, else every member of --contexts)")
	fs.StringVar(&o.For, "for", o.For, "resolvable (the name answers with at least one record) or endpoints=N (at least N ready endpoint addresses)")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "how long to wait")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "time between checks")
	fs.StringSliceVar(&o.DNS, "dns", nil, "CONTEXT=ADDR: that member's CoreDNS (host[:port]) must answer too (repeat for several members)")
	fs.StringSliceVar(&o.Managers, "endpointslice-managers", nil, "the trusted EndpointSlice managers, as the Corefile's endpointslice_managers (default: the plugin's default rule)")
	fs.StringVar(&o.Zone, "zone", o.Zone, "the forward zone the mcs plugin serves")
	return cmd
}

// Complete reads the arguments and flags.
func (o *WaitOptions) Complete(c *cobra.Command, args []string) error {
	o.args = args
	if c != nil {
		c.Flags().Visit(func(f *pflag.Flag) { o.explicit[f.Name] = true })
	}
	if err := o.complete(); err != nil {
		return err
	}
	switch {
	case o.For == "resolvable":
	case strings.HasPrefix(o.For, "endpoints="):
		n, err := strconv.Atoi(strings.TrimPrefix(o.For, "endpoints="))
		if err != nil || n < 1 {
			return fmt.Errorf("--for %q: want endpoints=N with N at least 1", o.For)
		}
		o.endpoints = n
	default:
		return fmt.Errorf("--for %q: want resolvable or endpoints=N", o.For)
	}
	o.dnsOf = map[string]string{}
	for _, d := range o.DNS {
		ctx, addr, ok := strings.Cut(d, "=")
		if !ok || ctx == "" || addr == "" {
			return fmt.Errorf("--dns %q: want CONTEXT=ADDR", d)
		}
		o.dnsOf[ctx] = addr
	}
	return nil
}

// Validate checks the options and prepares one explain per member waited
// for, before any member is asked.
func (o *WaitOptions) Validate() error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.Timeout <= 0 || o.Interval <= 0 {
		return errors.New("--timeout and --interval must be positive")
	}
	o.targets = o.In
	if len(o.targets) == 0 && o.context != "" {
		o.targets = []string{o.context}
	}
	if len(o.targets) == 0 {
		names, err := contexts(o.kubeconfig, o.Contexts)
		if err != nil {
			return err
		}
		o.targets = names
	}
	for ctx := range o.dnsOf {
		if !slices.Contains(o.targets, ctx) {
			return fmt.Errorf("--dns names %q, which is not a member waited for (%s)", ctx, strings.Join(o.targets, ", "))
		}
	}
	o.explains = map[string]*ExplainOptions{}
	for _, t := range o.targets {
		e := NewExplainOptions(o.IOStreams)
		e.memberFlags = o.memberFlags
		// The same flags, but no --context: the member is --in's.
		e.ConfigFlags = &genericclioptions.ConfigFlags{KubeConfig: o.ConfigFlags.KubeConfig, Context: new(string),
			Namespace: o.ConfigFlags.Namespace, Timeout: o.ConfigFlags.Timeout}
		e.In, e.DNS, e.Managers, e.Zone = t, o.dnsOf[t], o.Managers, o.Zone
		for _, f := range []string{"endpointslice-managers", "zone"} {
			e.explicit[f] = o.explicit[f]
		}
		if err := e.Complete(nil, o.args); err != nil {
			return err
		}
		if err := e.Validate(); err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
		o.explains[t] = e
	}
	return nil
}

// Run checks every member waited for each Interval until each answers as
// asked (printing a line for each as it does) or Timeout passes.
func (o *WaitOptions) Run(c *cobra.Command) error {
	ctx, cancel := context.WithTimeout(c.Context(), o.Timeout)
	defer cancel()
	start := time.Now()
	pending := slices.Clone(o.targets)
	why := map[string]string{}
	for {
		var still []string
		for _, t := range pending {
			e := o.explains[t]
			rep, err := e.report(ctx, false)
			if err != nil && ctx.Err() != nil {
				still = append(still, t) // cut short by the timeout: the last reason stands
				continue
			}
			ok, answer, reason := o.met(e, rep, err)
			if !ok {
				why[t] = reason
				still = append(still, t)
				continue
			}
			fmt.Fprintf(o.Out, "%s: %s %s %s: %s (after %s)\n", t, e.qname, qtypeOf(e), o.For, answer, time.Since(start).Round(time.Millisecond))
		}
		pending = still
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			for _, t := range pending {
				r := why[t]
				if r == "" {
					r = "not checked within the timeout"
				}
				fmt.Fprintf(o.Out, "%s: %s %s not %s after %s: %s\n", t, o.explains[t].qname, qtypeOf(o.explains[t]), o.For, o.Timeout, r)
			}
			if err := c.Context().Err(); err != nil {
				return &exitError{code: ExitNotMet, err: err}
			}
			return &exitError{code: ExitNotMet, err: fmt.Errorf("%d of %d member(s) not %s after %s: %s",
				len(pending), len(o.targets), o.For, o.Timeout, strings.Join(pending, ", "))}
		case <-time.After(o.Interval):
		}
	}
}

// qtypeOf is the record type e asks for.
func qtypeOf(e *ExplainOptions) string { return dns.TypeToString[e.qtype] }

// met says whether rep answers as asked, with the answer (when it does)
// or the reason (when it does not).
func (o *WaitOptions) met(e *ExplainOptions, rep *ExplainReport, err error) (bool, string, string) {
	if err != nil {
		return false, "", err.Error()
	}
	reasons := func(fallback string) string {
		if len(rep.Reasons) > 0 {
			return strings.Join(rep.Reasons, "; ")
		}
		return fallback
	}
	var answer string
	if o.endpoints > 0 {
		n := readyAddresses(rep.Slices)
		if n < o.endpoints {
			return false, "", reasons(fmt.Sprintf("%d of %d ready endpoint addresses", n, o.endpoints))
		}
		answer = fmt.Sprintf("%d ready endpoint addresses", n)
	} else {
		if rep.Rcode != "NOERROR" || len(rep.Answer) == 0 {
			return false, "", reasons(fmt.Sprintf("%s with no records", rep.Rcode))
		}
		answer = strings.Join(rep.Answer, ", ")
	}
	if e.DNS != "" {
		d := rep.DNS
		switch {
		case d == nil:
			return false, "", "CoreDNS not asked"
		case d.Error != "":
			return false, "", fmt.Sprintf("CoreDNS at %s: %s", d.Server, d.Error)
		case !d.Agrees && !d.Subset:
			return false, "", fmt.Sprintf("CoreDNS at %s answers %s %s, not as the objects say (%s)", d.Server, d.Rcode, strings.Join(d.Answer, ", "), strings.Join(rep.Answer, ", "))
		case o.endpoints == 0 && len(d.Answer) == 0:
			return false, "", fmt.Sprintf("CoreDNS at %s answers %s with no records", d.Server, d.Rcode)
		}
		answer += " (CoreDNS at " + d.Server + " agrees)"
	}
	return true, answer, ""
}

// readyAddresses counts the distinct addresses of ready endpoints in the
// slices the plugin serves.
func readyAddresses(slices []SliceInfo) int {
	seen := map[string]bool{}
	for _, s := range slices {
		if !s.Served {
			continue
		}
		for _, ep := range s.Endpoints {
			if !ep.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				seen[a] = true
			}
		}
	}
	return len(seen)
}

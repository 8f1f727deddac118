package cmd

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// defaultRequestTimeout bounds each request to a member unless
// --request-timeout says otherwise.
const defaultRequestTimeout = 5 * time.Second

// memberFlags are the flags status and explain both have: how to reach
// the members (ConfigFlags' --kubeconfig, --context, -n/--namespace and
// --request-timeout, with --contexts), the output format, and
// mcs-importer's rules for what it mirrors. Each subcommand's options
// embed their own.
type memberFlags struct {
	// ConfigFlags holds --kubeconfig, --context, -n/--namespace and
	// --request-timeout, and no other of kubectl's flags.
	ConfigFlags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams

	// Contexts are the member contexts (--contexts; default: all of the
	// kubeconfig).
	Contexts []string
	// Output is table, json or yaml.
	Output string
	// SourceManagers mirror mcs-importer's --endpointslice-managers: the
	// managers of the source EndpointSlices it mirrors.
	SourceManagers []string
	// ExportPolicy is mcs-importer's --export-policy file, when given:
	// source endpoints outside its addressRanges are reported as not
	// mirrored.
	ExportPolicy string

	// Set by complete, from ConfigFlags.
	kubeconfig     string        // "" = $KUBECONFIG, then ~/.kube/config
	context        string        // --context ("" = not given)
	namespace      string        // "" = all namespaces
	requestTimeout time.Duration // bound on each request to a member
}

func newMemberFlags(streams genericiooptions.IOStreams) memberFlags {
	timeout := defaultRequestTimeout.String()
	return memberFlags{
		ConfigFlags: &genericclioptions.ConfigFlags{
			KubeConfig: new(string),
			Context:    new(string),
			Namespace:  new(string),
			Timeout:    &timeout,
		},
		IOStreams:      streams,
		Output:         "table",
		SourceManagers: []string{"endpointslice-controller.k8s.io"},
	}
}

// addFlags registers the flags; contextHelp is --context's meaning in
// the subcommand.
func (f *memberFlags) addFlags(fs *pflag.FlagSet, contextHelp string) {
	f.ConfigFlags.AddFlags(fs)
	// ConfigFlags' own help speaks of one cluster; say what they mean here.
	fs.Lookup("kubeconfig").Usage = "kubeconfig file with one context per member cluster (default: $KUBECONFIG, then ~/.kube/config)"
	fs.Lookup("context").Usage = contextHelp
	fs.Lookup("namespace").Usage = "only this namespace (default: all namespaces)"
	fs.Lookup("request-timeout").Usage = "bound on each request to a member (a duration such as 10s, or seconds); a member that does not answer in time is shown as unreachable"
	fs.StringSliceVar(&f.Contexts, "contexts", nil, "comma-separated member contexts (default: every context of the kubeconfig)")
	fs.StringVarP(&f.Output, "output", "o", f.Output, "output format: table, json or yaml")
	fs.StringSliceVar(&f.SourceManagers, "source-managers", f.SourceManagers, "the managers of the source EndpointSlices mcs-importer mirrors; give the importer's --endpointslice-managers, which kubectl mcs cannot read (slices of exported Services without a manager or with another are reported as not mirrored, under this rule, not the importer's)")
	fs.StringVar(&f.ExportPolicy, "export-policy", "", "a copy of the file mcs-importer's --export-policy names, which kubectl mcs cannot read; endpoint addresses of exported Services outside its addressRanges are reported as not mirrored (without it, nothing is reported for the policy)")
}

// complete reads ConfigFlags.
func (f *memberFlags) complete() error {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	f.kubeconfig = str(f.ConfigFlags.KubeConfig)
	f.context = str(f.ConfigFlags.Context)
	f.namespace = str(f.ConfigFlags.Namespace)
	d, err := parseTimeout(str(f.ConfigFlags.Timeout))
	if err != nil {
		return err
	}
	f.requestTimeout = d
	return nil
}

// parseTimeout reads --request-timeout as kubectl does: a duration, or a
// number of seconds.
func parseTimeout(s string) (time.Duration, error) {
	if s == "" {
		return defaultRequestTimeout, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("--request-timeout %q: want a duration such as 10s, or a number of seconds", s)
	}
	return d, nil
}

func (f *memberFlags) validate() error {
	switch f.Output {
	case "table", "json", "yaml":
	default:
		return fmt.Errorf("-o %q: want table, json or yaml", f.Output)
	}
	if f.requestTimeout <= 0 {
		return errors.New("--request-timeout must be positive")
	}
	return nil
}

package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	memberdeploy "github.com/mcs-dns/mcs-dns/deploy/member"
	"github.com/mcs-dns/mcs-dns/internal/memberconn"
)

// Where kubectl mcs dns looks: the cluster DNS's Corefile (kubeadm's and
// most distributions' name) and our CoreDNS's Service (deploy/coredns).
const (
	clusterDNSNamespace = "kube-system"
	clusterDNSConfigMap = "coredns"
	clusterDNSKey       = "Corefile"
	mcsDNSService       = "mcs-dns"
)

// DNSOptions are the options of kubectl mcs dns.
type DNSOptions struct {
	ConfigFlags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams

	// Server is the address clusterset.local is forwarded to (default:
	// the ClusterIP of Service mcs-dns in mcs-dns-system).
	Server string
	// Apply writes the block into the ConfigMap; Undo removes it.
	Apply, Undo bool

	kube kubernetes.Interface
}

// NewDNSOptions are dns's options with their defaults.
func NewDNSOptions(streams genericiooptions.IOStreams) *DNSOptions {
	timeout := "30s"
	return &DNSOptions{
		ConfigFlags: &genericclioptions.ConfigFlags{KubeConfig: new(string), Context: new(string), Timeout: &timeout},
		IOStreams:   streams,
	}
}

// NewCmdDNS is kubectl mcs dns.
func NewCmdDNS(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewDNSOptions(streams)
	cmd := &cobra.Command{
		Use:   "dns --context MEMBER [--apply | --undo] [--server IP]",
		Short: "Send clusterset.local from the member's cluster DNS to our CoreDNS (the Corefile block, printed or applied)",
		Long: `The server block that sends clusterset.local from a member's cluster DNS
(ConfigMap kube-system/coredns, key Corefile) to our CoreDNS, as in
corefile-examples/forward-from-cluster-dns.Corefile, forwarding to --server
(default: the ClusterIP of Service mcs-dns in mcs-dns-system). Without
--apply or --undo it prints the block and changes nothing. --apply adds it
between two marker lines (again: nothing to change, or the address
replaced); --undo removes exactly that block, giving back the Corefile as
it was. A clusterset.local block written by hand is left alone (an error).
CoreDNS loads the new Corefile by itself when it has the reload plugin.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.Complete(c); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(c.Context())
		},
	}
	o.ConfigFlags.AddFlags(cmd.Flags())
	cmd.Flags().Lookup("context").Usage = "kubeconfig context of the member cluster (default: the current context)"
	cmd.Flags().StringVar(&o.Server, "server", "", "address to forward clusterset.local to (default: the ClusterIP of Service "+mcsDNSService+" in "+memberdeploy.Namespace+")")
	cmd.Flags().BoolVar(&o.Apply, "apply", false, "write the block into "+clusterDNSNamespace+"/"+clusterDNSConfigMap)
	cmd.Flags().BoolVar(&o.Undo, "undo", false, "remove the block --apply wrote from "+clusterDNSNamespace+"/"+clusterDNSConfigMap)
	return cmd
}

// Complete builds the client.
func (o *DNSOptions) Complete(_ *cobra.Command) error {
	d, err := parseTimeout(*o.ConfigFlags.Timeout)
	if err != nil {
		return err
	}
	cfg, err := memberconn.LoadKubeconfig(*o.ConfigFlags.KubeConfig, *o.ConfigFlags.Context)
	if err != nil {
		return err
	}
	cfg.UserAgent = "kubectl-mcs"
	cfg.Timeout = d
	o.kube, err = kubernetes.NewForConfig(cfg)
	return err
}

// Validate checks the flags.
func (o *DNSOptions) Validate() error {
	if o.Apply && o.Undo {
		return errors.New("--apply and --undo: give one")
	}
	if o.Undo && o.Server != "" {
		return errors.New("--undo removes the block whatever its address: drop --server")
	}
	if o.Server != "" && net.ParseIP(o.Server) == nil {
		return fmt.Errorf("--server %q: want an IP address", o.Server)
	}
	return nil
}

// Run prints, applies or undoes the block.
func (o *DNSOptions) Run(ctx context.Context) error {
	cms := o.kube.CoreV1().ConfigMaps(clusterDNSNamespace)
	where := clusterDNSNamespace + "/" + clusterDNSConfigMap
	cm, err := cms.Get(ctx, clusterDNSConfigMap, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("no ConfigMap %s: this cluster's DNS is not configured there; add the block of corefile-examples/forward-from-cluster-dns.Corefile to its configuration by hand", where)
		}
		return fmt.Errorf("reading ConfigMap %s: %w", where, err)
	}
	corefile, ok := cm.Data[clusterDNSKey]
	if !ok {
		return fmt.Errorf("ConfigMap %s has no key %s", where, clusterDNSKey)
	}
	if o.Undo {
		out, changed, err := RemoveClustersetBlock(corefile)
		if err != nil {
			return fmt.Errorf("ConfigMap %s: %w", where, err)
		}
		if !changed {
			fmt.Fprintf(o.Out, "nothing to change: %s has no block of kubectl mcs dns\n", where)
			return nil
		}
		if err := o.write(ctx, cm.DeepCopy(), out); err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "removed the clusterset.local block from %s\n", where)
		return nil
	}
	server := o.Server
	if server == "" {
		svc, err := o.kube.CoreV1().Services(memberdeploy.Namespace).Get(ctx, mcsDNSService, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading Service %s/%s for its ClusterIP (deploy/coredns; or give --server): %w", memberdeploy.Namespace, mcsDNSService, err)
		}
		server = svc.Spec.ClusterIP
		if net.ParseIP(server) == nil {
			return fmt.Errorf("the Service %s/%s has no ClusterIP (%q): give --server", memberdeploy.Namespace, mcsDNSService, server)
		}
	}
	out, changed, err := AddClustersetBlock(corefile, server)
	if err != nil {
		return fmt.Errorf("ConfigMap %s: %w", where, err)
	}
	if !changed {
		fmt.Fprintf(o.Out, "nothing to change: %s forwards clusterset.local to %s\n", where, server)
		return nil
	}
	if !o.Apply {
		fmt.Fprintf(o.Out, "the block to add to %s, key %s (--apply adds it, --undo removes it):\n\n", where, clusterDNSKey)
		fmt.Fprint(o.Out, clustersetBlock(server))
		return nil
	}
	if err := o.write(ctx, cm.DeepCopy(), out); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "%s now forwards clusterset.local to %s\n", where, server)
	if !strings.Contains(corefile, "reload") {
		fmt.Fprintf(o.Out, "its Corefile has no reload plugin: restart the cluster DNS (kubectl -n %s rollout restart deployment/coredns)\n", clusterDNSNamespace)
	}
	return nil
}

func (o *DNSOptions) write(ctx context.Context, cm *corev1.ConfigMap, corefile string) error {
	cm.Data[clusterDNSKey] = corefile
	if _, err := o.kube.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return nil
}

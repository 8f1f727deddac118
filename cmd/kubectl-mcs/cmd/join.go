package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	memberdeploy "github.com/mcs-dns/mcs-dns/deploy/member"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/internal/memberconn"
)

// JoinOptions are the options of kubectl mcs join.
type JoinOptions struct {
	joinFlags
	// ClusterID is the member's cluster ID (default: its ClusterProperty,
	// else the member context's name).
	ClusterID string
	// Rotate replaces the member's token: its token Secret is deleted
	// (which revokes the token) and made again.
	Rotate bool
	// TokenTimeout bounds the wait for the member's token controller to
	// fill the token Secret.
	TokenTimeout time.Duration
	// Wait, when positive, is how long to wait for the importer to report
	// the member up, read from ImporterMetrics (its /metrics URL).
	Wait            time.Duration
	ImporterMetrics string
}

// NewJoinOptions are join's options with their defaults.
func NewJoinOptions(streams genericiooptions.IOStreams) *JoinOptions {
	return &JoinOptions{joinFlags: newJoinFlags(streams), TokenTimeout: time.Minute}
}

// NewCmdJoin is kubectl mcs join.
func NewCmdJoin(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewJoinOptions(streams)
	cmd := &cobra.Command{
		Use:   "join --hosting-context CONTEXT --member-context CONTEXT",
		Short: "Make a cluster a member: CRDs, the importer's identity and token in it, its context in the importer's kubeconfig Secret",
		Long: `Make a cluster a member of the clusterset mcs-importer serves. In the member:
the MCS and About API CRDs (if absent), the importer's identity of
deploy/member (namespace mcs-dns-system, ServiceAccount mcs-importer-member,
its ClusterRole, bindings and leader-election Role, the aggregated export
roles), the ClusterProperty cluster.clusterset.k8s.io naming its cluster ID
(if absent) and a long-lived token Secret of mcs-importer-member. In the
hosting cluster: a context named after the cluster ID in the importer's
kubeconfig Secret, with the member's server, CA and that token.

A cluster ID that is invalid, or that another member of the Secret already
has, is refused. Every object join creates is labelled
app.kubernetes.io/managed-by=kubectl-mcs and annotated
mcs-dns.io/created-by=kubectl-mcs-join, so that unjoin removes exactly
those. Running it again changes nothing; --rotate replaces the token.`,
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
	o.addFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.ClusterID, "cluster-id", "", "the member's cluster ID, written to its ClusterProperty when it has none (default: the member context's name)")
	cmd.Flags().BoolVar(&o.Rotate, "rotate", false, "replace the member's token: delete its token Secret (revoking the token), make it again and put the new token in the kubeconfig Secret")
	cmd.Flags().DurationVar(&o.TokenTimeout, "token-timeout", o.TokenTimeout, "how long to wait for the member's token controller to fill the token Secret")
	cmd.Flags().DurationVar(&o.Wait, "wait", 0, "after joining, wait this long for the importer to report the member up (mcs_importer_member_state) at --importer-metrics; 0: do not wait")
	cmd.Flags().StringVar(&o.ImporterMetrics, "importer-metrics", "", "the importer's metrics URL for --wait, e.g. http://localhost:8080/metrics after kubectl port-forward deployment/mcs-importer 8080")
	return cmd
}

// Complete reads the flags and builds the clients.
func (o *JoinOptions) Complete(c *cobra.Command) error {
	return o.complete(c.Flags())
}

// Validate checks what needs no cluster.
func (o *JoinOptions) Validate() error {
	if o.ClusterID != "" {
		if err := mcsapi.ValidateClusterID(o.ClusterID); err != nil {
			return fmt.Errorf("--cluster-id: %w", err)
		}
	}
	if o.TokenTimeout <= 0 {
		return errors.New("--token-timeout must be positive")
	}
	switch {
	case o.Wait < 0:
		return errors.New("--wait must not be negative")
	case o.Wait > 0 && o.ImporterMetrics == "":
		return errors.New("--wait needs --importer-metrics: the importer's metrics URL (for one in a pod: kubectl port-forward deployment/mcs-importer 8080, then http://localhost:8080/metrics)")
	case o.Wait > 0 && o.DryRun:
		return errors.New("--wait and --dry-run: give one")
	}
	return nil
}

// memberID decides the member's cluster ID: its ClusterProperty's value
// when it has one (which --cluster-id must then equal), else --cluster-id,
// else the member context's name. hasProperty says whether the member
// already has a ClusterProperty.
func (o *JoinOptions) memberID(ctx context.Context) (id string, hasProperty bool, err error) {
	have, err := memberconn.ReadClusterID(ctx, o.memberDyn)
	switch {
	case errors.Is(err, memberconn.ErrNoClusterProperty):
		id = o.ClusterID
		if id == "" {
			id = o.MemberContext
		}
		if err := mcsapi.ValidateClusterID(id); err != nil {
			return "", false, fmt.Errorf("member %q: the context name is not a valid cluster ID; give one with --cluster-id: %w", o.MemberContext, err)
		}
		return id, false, nil
	case err != nil:
		return "", false, fmt.Errorf("member %q: %w", o.MemberContext, err)
	}
	if err := mcsapi.ValidateClusterID(have); err != nil {
		return "", false, fmt.Errorf("member %q: its ClusterProperty %s: %w (fix it first)", o.MemberContext, mcsapi.ClusterIDProperty, err)
	}
	if o.ClusterID != "" && o.ClusterID != have {
		return "", false, fmt.Errorf("member %q already has cluster ID %q (ClusterProperty %s), not --cluster-id %q: join keeps a cluster's ID; drop --cluster-id, or change the ClusterProperty yourself first",
			o.MemberContext, have, mcsapi.ClusterIDProperty, o.ClusterID)
	}
	return have, true, nil
}

// checkClash refuses an ID another member of the kubeconfig Secret has:
// a context of that name for another server, or another context whose
// cluster reports that ID (its ClusterProperty, read with the Secret's
// own credentials, else its context name). A context for this member's
// server under another name is refused too: the member is joined already.
func (o *JoinOptions) checkClash(ctx context.Context, kc *clientcmdapi.Config, id string) error {
	names := make([]string, 0, len(kc.Contexts))
	for name := range kc.Contexts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		c := kc.Contexts[name]
		server := ""
		if cl := kc.Clusters[c.Cluster]; cl != nil {
			server = cl.Server
		}
		same := sameServer(server, o.server)
		switch {
		case name == id && same:
			continue // this member, joined before
		case name == id:
			return fmt.Errorf("cluster ID %q is taken: %s already has a context %q for another member (server %s)", id, o.secretRef(), name, server)
		case same:
			return fmt.Errorf("member %q (server %s) is in %s already, as context %q: to join it as %q, unjoin it first", o.MemberContext, o.server, o.secretRef(), name, id)
		}
		other, how := o.otherID(ctx, kc, name)
		if other == id {
			return fmt.Errorf("cluster ID %q is taken: context %q of %s (server %s) has it (%s)", id, name, o.secretRef(), server, how)
		}
	}
	return nil
}

// otherID reads the cluster ID of another context of the Secret's
// kubeconfig as the importer would, and says where it came from.
func (o *JoinOptions) otherID(ctx context.Context, kc *clientcmdapi.Config, name string) (string, string) {
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, &clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
	if err == nil {
		// Another member that does not answer costs at most this.
		cfg.Timeout = min(o.requestTimeout, 10*time.Second)
		var dyn dynamic.Interface
		if dyn, err = dynamic.NewForConfig(cfg); err == nil {
			var id, src string
			if id, src, err = memberconn.MemberClusterID(ctx, dyn, name); err == nil {
				if src == memberconn.MemberIDFromProperty {
					return id, "its ClusterProperty"
				}
				return id, "its context name"
			}
		}
	}
	fmt.Fprintf(o.ErrOut, "warning: cannot read the cluster ID of context %q of %s (%v); taking its context name\n", name, o.secretRef(), err)
	return name, "its context name"
}

// Run joins the member.
func (o *JoinOptions) Run(ctx context.Context) error {
	o.findSecret(ctx)
	r := &report{out: o.Out, dryRun: o.DryRun}
	mw := "member"
	id, hasProperty, err := o.memberID(ctx)
	if err != nil {
		return err
	}
	if _, err := o.hostKube.CoreV1().Namespaces().Get(ctx, o.SecretNamespace, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("hosting cluster %q has no namespace %s: create it first (kubectl --context %s create namespace %s)", o.HostingContext, o.SecretNamespace, o.HostingContext, o.SecretNamespace)
		}
		return fmt.Errorf("hosting cluster %q: %w", o.HostingContext, err)
	}
	sec, kc, err := o.hostingKubeconfig(ctx)
	if err != nil {
		return err
	}
	if err := o.checkClash(ctx, kc, id); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "joining member %q (server %s) as cluster ID %q into %s of hosting cluster %q\n", o.MemberContext, o.server, id, o.secretRef(), o.HostingContext)

	crdObjs, identity, err := memberObjects()
	if err != nil {
		return err
	}
	created := false
	for _, obj := range crdObjs {
		verb, err := ensure(ctx, o.memberDyn, obj, o.DryRun)
		if err != nil {
			return fmt.Errorf("member %q: %w", o.MemberContext, err)
		}
		r.line(mw, verb, objName(obj), "")
		created = created || verb == "create"
	}
	if created && !o.DryRun {
		for _, obj := range crdObjs {
			if err := waitFor(ctx, 30*time.Second, "CRD "+obj.GetName()+" established", func(ctx context.Context) (bool, error) {
				return crdEstablished(ctx, o.memberDyn, obj.GetName())
			}); err != nil {
				return fmt.Errorf("member %q: %w", o.MemberContext, err)
			}
		}
	}
	for _, obj := range identity {
		verb, err := ensure(ctx, o.memberDyn, obj, o.DryRun)
		if err != nil {
			return fmt.Errorf("member %q: %w", o.MemberContext, err)
		}
		r.line(mw, verb, objName(obj), "")
	}
	cp := clusterPropertyObject(id)
	if hasProperty {
		r.line(mw, "", objName(cp), "cluster ID "+id)
	} else {
		if !o.DryRun {
			// A CRD just established may take a moment to be served.
			err = waitFor(ctx, 30*time.Second, "creating "+objName(cp), func(ctx context.Context) (bool, error) {
				_, err := ensure(ctx, o.memberDyn, cp, false)
				return err == nil, err
			})
			if err != nil {
				return fmt.Errorf("member %q: %w", o.MemberContext, err)
			}
		}
		r.line(mw, "create", objName(cp), "cluster ID "+id)
	}

	token, err := o.token(ctx, r)
	if err != nil {
		return err
	}

	// The hosting cluster: this member's context in the kubeconfig Secret.
	ca := o.memberCfg.CAData
	if len(ca) == 0 && o.memberCfg.CAFile != "" {
		if ca, err = os.ReadFile(o.memberCfg.CAFile); err != nil {
			return fmt.Errorf("member %q: reading its CA file: %w", o.MemberContext, err)
		}
	}
	wantCluster := &clientcmdapi.Cluster{
		Server:                   o.server,
		CertificateAuthorityData: ca,
		TLSServerName:            o.memberCfg.ServerName,
		InsecureSkipTLSVerify:    o.memberCfg.Insecure,
	}
	wantUser := &clientcmdapi.AuthInfo{Token: token}
	wantCtx := &clientcmdapi.Context{Cluster: id, AuthInfo: id}
	hw := "hosting"
	what := "context " + id + " in " + o.secretRef()
	same := kc.Clusters[id] != nil && kc.AuthInfos[id] != nil && kc.Contexts[id] != nil &&
		sameCluster(kc.Clusters[id], wantCluster) && kc.AuthInfos[id].Token == token && token != "" &&
		kc.Contexts[id].Cluster == id && kc.Contexts[id].AuthInfo == id && kc.Contexts[id].Namespace == ""
	switch {
	case same:
		r.line(hw, "", what, "")
	default:
		verb := "update"
		if kc.Contexts[id] == nil {
			verb = "create"
		}
		if !o.DryRun {
			kc.Clusters[id], kc.AuthInfos[id], kc.Contexts[id] = wantCluster, wantUser, wantCtx
			if kc.CurrentContext == "" {
				kc.CurrentContext = id
			}
			if err := o.writeHostingKubeconfig(ctx, sec, kc); err != nil {
				return err
			}
		}
		why := ""
		if sec == nil {
			why = "the Secret is created"
		}
		r.line(hw, verb, what, why)
	}
	o.summary(ctx, r, id)
	if o.Wait > 0 {
		return o.waitUp(ctx, id)
	}
	return nil
}

func sameCluster(a, b *clientcmdapi.Cluster) bool {
	return a.Server == b.Server && string(a.CertificateAuthorityData) == string(b.CertificateAuthorityData) &&
		a.TLSServerName == b.TLSServerName && a.InsecureSkipTLSVerify == b.InsecureSkipTLSVerify &&
		a.CertificateAuthority == "" && a.ProxyURL == ""
}

// token ensures the member's token Secret (made again with --rotate) and
// returns its token once the token controller has filled it; "" with
// --dry-run when there is none yet.
func (o *JoinOptions) token(ctx context.Context, r *report) (string, error) {
	want := tokenSecretObject()
	secrets := o.memberKube.CoreV1().Secrets(memberdeploy.Namespace)
	have, err := secrets.Get(ctx, tokenSecretName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		have = nil
	case err != nil:
		return "", fmt.Errorf("member %q: reading %s: %w", o.MemberContext, objName(want), err)
	}
	if have != nil && (have.Type != corev1.SecretTypeServiceAccountToken || have.Annotations[corev1.ServiceAccountNameKey] != memberdeploy.ServiceAccount) {
		return "", fmt.Errorf("member %q: %s exists but is not a token Secret of ServiceAccount %s: remove or rename it", o.MemberContext, objName(want), memberdeploy.ServiceAccount)
	}
	// A token Secret made by hand and rotated stays the user's.
	handMade := have != nil && have.Annotations[createdByAnnotation] != createdByValue
	if have != nil && o.Rotate {
		if !o.DryRun {
			if err := secrets.Delete(ctx, tokenSecretName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &have.UID}}); err != nil && !apierrors.IsNotFound(err) {
				return "", fmt.Errorf("member %q: deleting %s: %w", o.MemberContext, objName(want), err)
			}
			if err := waitFor(ctx, 30*time.Second, objName(want)+" gone", func(ctx context.Context) (bool, error) {
				_, err := secrets.Get(ctx, tokenSecretName, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			}); err != nil {
				return "", err
			}
		}
		r.line("member", "delete", objName(want), "--rotate: revokes the old token")
		have = nil
	}
	if have == nil {
		if o.DryRun {
			r.line("member", "create", objName(want), "long-lived token of "+memberdeploy.ServiceAccount)
			return "", nil
		}
		obj := want.DeepCopy()
		if !handMade {
			markCreated(obj)
		}
		if _, err := o.memberDyn.Resource(gvrOf["Secret"]).Namespace(memberdeploy.Namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return "", fmt.Errorf("member %q: creating %s: %w", o.MemberContext, objName(want), err)
		}
		r.line("member", "create", objName(want), "long-lived token of "+memberdeploy.ServiceAccount)
	} else {
		r.line("member", "", objName(want), "")
	}
	var token string
	err = waitFor(ctx, o.TokenTimeout, "the token controller to fill "+objName(want)+" (is kube-controller-manager's serviceaccount-token controller running in the member?)", func(ctx context.Context) (bool, error) {
		s, err := secrets.Get(ctx, tokenSecretName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		token = string(s.Data[corev1.ServiceAccountTokenKey])
		return token != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("member %q: %w", o.MemberContext, err)
	}
	return token, nil
}

// summary ends join's output: what changed, and what is left to do for
// the importer to use the member.
func (o *JoinOptions) summary(ctx context.Context, r *report, id string) {
	switch {
	case r.changes == 0:
		fmt.Fprintf(o.Out, "nothing to change: member %q is joined as %q\n", o.MemberContext, id)
	case o.DryRun:
		fmt.Fprintf(o.Out, "dry run: %s would change; nothing was changed\n", plural(r.changes, "object"))
		return
	default:
		fmt.Fprintf(o.Out, "joined: %s changed\n", plural(r.changes, "object"))
	}
	d, err := o.hostKube.AppsV1().Deployments(o.SecretNamespace).Get(ctx, importerDeployment, metav1.GetOptions{})
	if err == nil {
		if ctxs, ok := deploymentContexts(d.Spec.Template.Spec.Containers); ok && !slices.Contains(ctxs, id) {
			fmt.Fprintf(o.Out, "next: the importer's --contexts (%s) does not list %q: add it to Deployment %s/%s (deploy/importer/deployment.yaml)\n",
				strings.Join(ctxs, ","), id, o.SecretNamespace, importerDeployment)
		}
	} else {
		fmt.Fprintf(o.Out, "next: list %q in the importer's --contexts (deploy/importer/deployment.yaml)\n", id)
	}
	if r.changes > 0 {
		fmt.Fprintf(o.Out, "next: the importer reads its kubeconfig at start: kubectl --context %s -n %s rollout restart deployment/%s\n",
			o.HostingContext, o.SecretNamespace, importerDeployment)
	}
	fmt.Fprintf(o.Out, `check: the importer reports the member up:
  kubectl --context %s -n %s port-forward deployment/%s 8080 &
  curl -s localhost:8080/metrics | grep 'mcs_importer_member_state{cluster="%s",state="up"}'   # 1 when up
  curl -s localhost:8080/readyz                                                         # member %s: up
`, o.HostingContext, o.SecretNamespace, importerDeployment, id, id)
}

// deploymentContexts reads --contexts from the importer container's
// arguments.
func deploymentContexts(containers []corev1.Container) ([]string, bool) {
	for _, c := range containers {
		args := append(slices.Clone(c.Command), c.Args...)
		for i, a := range args {
			a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
			var v string
			switch {
			case strings.HasPrefix(a, "contexts="):
				v = strings.TrimPrefix(a, "contexts=")
			case a == "contexts" && i+1 < len(args):
				v = args[i+1]
			default:
				continue
			}
			var out []string
			for _, p := range strings.Split(v, ",") {
				if p = strings.TrimSpace(p); p != "" {
					out = append(out, p)
				}
			}
			return out, true
		}
	}
	return nil, false
}

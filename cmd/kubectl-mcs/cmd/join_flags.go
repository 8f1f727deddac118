package cmd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	memberdeploy "github.com/mcs-dns/mcs-dns/deploy/member"
	"github.com/mcs-dns/mcs-dns/internal/memberconn"
)

// Defaults of where the importer's kubeconfig lives in the hosting
// cluster: deploy/importer's namespace, Deployment and Secret.
const (
	defaultSecretNamespace = memberdeploy.Namespace
	defaultSecretName      = "mcs-importer-kubeconfig"
	importerDeployment     = "mcs-importer"
	importerVolume         = "kubeconfig"
)

// joinFlags are the flags join and unjoin share: the kubeconfig (with a
// context for the hosting cluster and one for the member), where the
// importer's kubeconfig Secret is, and --dry-run.
type joinFlags struct {
	ConfigFlags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams

	HostingContext  string
	MemberContext   string
	SecretNamespace string
	SecretName      string
	MemberServer    string
	DryRun          bool

	kubeconfig     string
	requestTimeout time.Duration
	secretNameSet  bool

	hostCfg, memberCfg *rest.Config
	hostKube           kubernetes.Interface
	memberKube         kubernetes.Interface
	memberDyn          dynamic.Interface
	server             string // the member's API server URL as the importer reaches it
}

func newJoinFlags(streams genericiooptions.IOStreams) joinFlags {
	timeout := "30s"
	return joinFlags{
		// Only --kubeconfig and --request-timeout: the contexts are
		// --hosting-context and --member-context.
		ConfigFlags:     &genericclioptions.ConfigFlags{KubeConfig: new(string), Timeout: &timeout},
		IOStreams:       streams,
		SecretNamespace: defaultSecretNamespace,
	}
}

func (f *joinFlags) addFlags(fs *pflag.FlagSet) {
	f.ConfigFlags.AddFlags(fs)
	fs.Lookup("kubeconfig").Usage = "kubeconfig file with the hosting and the member context (default: $KUBECONFIG, then ~/.kube/config)"
	fs.Lookup("request-timeout").Usage = "bound on each request (a duration such as 10s, or seconds)"
	fs.StringVar(&f.HostingContext, "hosting-context", "", "kubeconfig context of the cluster that runs mcs-importer and holds its kubeconfig Secret (required)")
	fs.StringVar(&f.MemberContext, "member-context", "", "kubeconfig context of the member cluster, with rights to create CRDs, RBAC and Secrets there (required)")
	fs.StringVar(&f.SecretNamespace, "secret-namespace", f.SecretNamespace, "namespace of the importer's kubeconfig Secret in the hosting cluster")
	fs.StringVar(&f.SecretName, "secret-name", "", "name of the importer's kubeconfig Secret (default: the Secret the mcs-importer Deployment there mounts as its kubeconfig volume, else "+defaultSecretName+")")
	fs.StringVar(&f.MemberServer, "member-server", "", "the member's API server URL as the importer reaches it (default: the member context's server)")
	fs.BoolVar(&f.DryRun, "dry-run", false, "print what would change (create, update, delete or unchanged, per object) and change nothing")
}

// complete checks the flags and builds the clients; it asks no cluster.
func (f *joinFlags) complete(fs *pflag.FlagSet) error {
	if f.ConfigFlags.KubeConfig != nil {
		f.kubeconfig = *f.ConfigFlags.KubeConfig
	}
	d, err := parseTimeout(*f.ConfigFlags.Timeout)
	if err != nil {
		return err
	}
	if d <= 0 {
		return errors.New("--request-timeout must be positive")
	}
	f.requestTimeout = d
	f.secretNameSet = fs.Changed("secret-name")
	switch {
	case f.HostingContext == "":
		return errors.New("--hosting-context is required: the context of the cluster that runs mcs-importer")
	case f.MemberContext == "":
		return errors.New("--member-context is required: the context of the member cluster")
	case f.SecretNamespace == "":
		return errors.New("--secret-namespace must not be empty")
	}
	if f.hostCfg, err = memberconn.LoadKubeconfig(f.kubeconfig, f.HostingContext); err != nil {
		return err
	}
	if f.memberCfg, err = memberconn.LoadKubeconfig(f.kubeconfig, f.MemberContext); err != nil {
		return err
	}
	for _, cfg := range []*rest.Config{f.hostCfg, f.memberCfg} {
		cfg.UserAgent = "kubectl-mcs"
		cfg.Timeout = f.requestTimeout
		cfg.QPS, cfg.Burst = 50, 100
	}
	if f.hostKube, err = kubernetes.NewForConfig(f.hostCfg); err != nil {
		return err
	}
	if f.memberKube, err = kubernetes.NewForConfig(f.memberCfg); err != nil {
		return err
	}
	if f.memberDyn, err = dynamic.NewForConfig(f.memberCfg); err != nil {
		return err
	}
	f.server = f.MemberServer
	if f.server == "" {
		f.server = f.memberCfg.Host
	}
	return nil
}

// findSecret sets the Secret's name when --secret-name is not given.
func (f *joinFlags) findSecret(ctx context.Context) {
	if !f.secretNameSet {
		f.SecretName = f.importerSecretName(ctx)
	}
}

// importerSecretName is the Secret the importer Deployment in the hosting
// cluster mounts as its kubeconfig (kustomize's secretGenerator adds a
// hash to the name), else the default.
func (f *joinFlags) importerSecretName(ctx context.Context) string {
	d, err := f.hostKube.AppsV1().Deployments(f.SecretNamespace).Get(ctx, importerDeployment, metav1.GetOptions{})
	if err != nil {
		return defaultSecretName
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == importerVolume && v.Secret != nil && v.Secret.SecretName != "" {
			return v.Secret.SecretName
		}
	}
	return defaultSecretName
}

// secretRef names the importer's kubeconfig Secret in messages.
func (f *joinFlags) secretRef() string {
	return fmt.Sprintf("Secret/%s/%s", f.SecretNamespace, f.SecretName)
}

// hostingKubeconfig reads the importer's kubeconfig Secret: nil when
// there is none, and its kubeconfig (empty when the Secret has none).
func (f *joinFlags) hostingKubeconfig(ctx context.Context) (*corev1.Secret, *clientcmdapi.Config, error) {
	sec, err := f.hostKube.CoreV1().Secrets(f.SecretNamespace).Get(ctx, f.SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, clientcmdapi.NewConfig(), nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("hosting cluster %q: reading %s: %w", f.HostingContext, f.secretRef(), err)
	}
	raw := sec.Data[kubeconfigKey]
	if len(raw) == 0 {
		return sec, clientcmdapi.NewConfig(), nil
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("hosting cluster %q: %s, key %s: %w", f.HostingContext, f.secretRef(), kubeconfigKey, err)
	}
	return sec, kc, nil
}

// writeHostingKubeconfig stores kc in the Secret (creating it, marked as
// join's, when sec is nil).
func (f *joinFlags) writeHostingKubeconfig(ctx context.Context, sec *corev1.Secret, kc *clientcmdapi.Config) error {
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	secrets := f.hostKube.CoreV1().Secrets(f.SecretNamespace)
	if sec == nil {
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: f.SecretName, Namespace: f.SecretNamespace,
				Labels:      map[string]string{managedByLabel: managedByValue},
				Annotations: map[string]string{createdByAnnotation: createdByValue},
			},
			Data: map[string][]byte{kubeconfigKey: raw},
		}, metav1.CreateOptions{})
	} else {
		sec = sec.DeepCopy()
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		sec.Data[kubeconfigKey] = raw
		_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("hosting cluster %q: writing %s: %w", f.HostingContext, f.secretRef(), err)
	}
	return nil
}

// contextsOf returns the contexts of kc whose cluster's server is server.
func contextsOf(kc *clientcmdapi.Config, server string) []string {
	var out []string
	for name, c := range kc.Contexts {
		if cl := kc.Clusters[c.Cluster]; cl != nil && sameServer(cl.Server, server) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func sameServer(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}

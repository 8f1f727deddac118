// Package cluster starts real member clusters for tests: each one its own
// kube-apiserver and etcd (via controller-runtime's envtest), with the
// mcs-api and About API CRDs installed and, optionally, the cluster's
// ClusterProperty set. Nothing here fakes an API server.
//
// The binaries come from `make tools` (.cache/k8s/<version>/ at the
// repository root). Point the harness elsewhere with MCS_DNS_K8S_ASSETS (or
// the envtest-standard KUBEBUILDER_ASSETS): a folder holding kube-apiserver
// and etcd.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-dns/mcs-dns/deploy/crds"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// KubernetesVersion is the kube-apiserver version `make tools` builds.
const KubernetesVersion = "1.37.2"

// Service CIDRs: wide enough for 10,000+ ClusterIPs, dual-stack so that
// IPv6 and dual-stack Services can be tested.
const (
	ServiceCIDRv4 = "10.96.0.0/16"
	ServiceCIDRv6 = "fd00:10:96::/108"
)

// Spec describes one member cluster to start.
type Spec struct {
	// Name is the kubeconfig context name.
	Name string
	// ClusterID, if set, is written to the About API ClusterProperty
	// cluster.clusterset.k8s.io. If empty no ClusterProperty is created and
	// consumers fall back to the context name.
	ClusterID string
	// SkipMCSCRDs leaves the mcs-api CRDs out (for tests of clusters
	// without MCS, or that install an older API themselves).
	SkipMCSCRDs bool
	// IPv4Only gives the cluster an IPv4 Service range only (clusters are
	// dual-stack otherwise).
	IPv4Only bool
	// ControlPlane also runs kube-controller-manager (Deployments,
	// ReplicaSets, StatefulSets, EndpointSlices, namespaces, garbage
	// collection, service accounts and their tokens, aggregated
	// ClusterRoles) and kwok, which runs
	// one simulated Node (NodeName) that every Pod is bound to: Pods reach
	// Running with pod IPs from PodCIDR and readiness, without containers.
	// Without it there are no controllers: tests write EndpointSlices by
	// hand.
	ControlPlane bool
	// PodCIDR is the simulated Node's pod ranges, comma-separated, at most
	// one per family (default 10.<100+n>.0.0/24 and, unless IPv4Only,
	// fd00:10:<100+n>::/112 for the n-th cluster started together): a Pod
	// gets an address from each.
	PodCIDR string
	// Exec, with ControlPlane, answers `kubectl exec` into the cluster's
	// pods by running the command on this host.
	Exec *Exec
}

// Cluster is one running member cluster.
type Cluster struct {
	Name string
	// ID is the cluster's ID: its ClusterProperty if set, else Name.
	ID      string
	Config  *rest.Config
	Kube    kubernetes.Interface
	MCS     mcsclient.Interface
	Dynamic dynamic.Interface

	env *envtest.Environment
	cp  *controlPlane
	// apiArgs, while StopAPIServer has stopped the API server, is its
	// command line; restarted is the one StartAPIServer started.
	apiArgs   []string
	restarted *apiServerProc
}

// Set is a group of member clusters sharing one kubeconfig file.
type Set struct {
	Clusters []*Cluster
	// Kubeconfig is a file with one context per cluster, named after it.
	Kubeconfig string
}

// Get returns the cluster with the given name, or nil.
func (s *Set) Get(name string) *Cluster {
	for _, c := range s.Clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Names starts clusters with the given names and no ClusterProperty.
func Names(names ...string) []Spec {
	specs := make([]Spec, len(names))
	for i, n := range names {
		specs[i] = Spec{Name: n}
	}
	return specs
}

// AssetsDir returns the folder holding kube-apiserver and etcd.
func AssetsDir() (string, error) {
	for _, env := range []string{"MCS_DNS_K8S_ASSETS", "KUBEBUILDER_ASSETS"} {
		if dir := os.Getenv(env); dir != "" {
			return dir, checkAssets(dir, env)
		}
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, ".cache", "k8s", KubernetesVersion)
	return dir, checkAssets(dir, "the default cache")
}

func checkAssets(dir, from string) error {
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return fmt.Errorf("%s not found in %s (from %s): run `make tools`, or set MCS_DNS_K8S_ASSETS to a folder holding kube-apiserver and etcd", bin, dir, from)
		}
	}
	return nil
}

// repoRoot walks up from the working directory to this module's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if raw, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && isOurModule(raw) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the mcs-dns repository root above the working directory")
		}
		dir = parent
	}
}

func isOurModule(gomod []byte) bool {
	const line = "module github.com/mcs-dns/mcs-dns\n"
	return len(gomod) >= len(line) && string(gomod[:len(line)]) == line
}

// Start starts one cluster per spec, in parallel, and registers their
// shutdown with t.Cleanup (which runs even when the test fails). With
// -short it skips the test.
func Start(t testing.TB, specs ...Spec) *Set {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real API servers; skipped with -short")
	}
	set, err := StartClusters(specs...)
	if set != nil {
		t.Cleanup(set.Stop)
	}
	if err != nil {
		t.Fatalf("starting member clusters: %v", err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := set.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatalf("writing kubeconfig: %v", err)
	}
	return set
}

// StartClusters is Start for callers without a testing.TB (the demo and
// benchmarks); the caller must call Stop. On error the clusters that did
// start are returned so that they can be stopped.
func StartClusters(specs ...Spec) (*Set, error) {
	dir, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	all, err := crds.All()
	if err != nil {
		return nil, err
	}
	set := &Set{Clusters: make([]*Cluster, len(specs))}
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			set.Clusters[i], errs[i] = startOne(dir, spec, all, i)
		}()
	}
	wg.Wait()
	// Keep only the clusters that started, so Stop has no nil entries.
	started := set.Clusters[:0]
	for _, c := range set.Clusters {
		if c != nil {
			started = append(started, c)
		}
	}
	set.Clusters = started
	return set, errors.Join(errs...)
}

// startSlots bounds the control planes one process starts at once: a
// kube-apiserver's start is CPU-bound, so a dozen started together on a
// small machine each take a dozen times as long (and an attempt that runs
// out of time is retried, which costs more), while started a few at a time
// the last is up no later.
var startSlots = make(chan struct{}, 3)

func startOne(assets string, spec Spec, all []*apiextensionsCRD, index int) (*Cluster, error) {
	crdList := all
	if spec.SkipMCSCRDs {
		crdList = nil
		for _, c := range all {
			if c.Spec.Group != mcsapi.Group {
				crdList = append(crdList, c)
			}
		}
	}
	// envtest mutates the CRDs it installs; give each cluster its own copies.
	own := make([]*apiextensionsCRD, len(crdList))
	for i, c := range crdList {
		own[i] = c.DeepCopy()
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDs:                  own,
		ErrorIfCRDPathMissing: true,
		// envtest's defaults (20 s per start attempt, 10 s for the CRDs
		// to be served) are for one control plane on an idle machine; a
		// test package starting a dozen on two cores needs more.
		ControlPlaneStartTimeout: 2 * time.Minute,
		CRDInstallOptions:        envtest.CRDInstallOptions{MaxTime: time.Minute},
	}
	serviceRanges := ServiceCIDRv4 + "," + ServiceCIDRv6
	if spec.IPv4Only {
		serviceRanges = ServiceCIDRv4
	}
	api := env.ControlPlane.GetAPIServer()
	api.Configure().
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none").
		Set("service-cluster-ip-range", serviceRanges)
	if spec.ControlPlane {
		// kwok's Node answers exec on 127.0.0.1 (its only address).
		api.Configure().Set("kubelet-preferred-address-types", "InternalIP")
	}
	startSlots <- struct{}{}
	cfg, err := env.Start()
	<-startSlots
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("cluster %s: %w", spec.Name, err)
	}
	c := &Cluster{Name: spec.Name, ID: spec.Name, Config: cfg, env: env}
	// Tests create objects quickly; the default 5 QPS would throttle them.
	cfg.QPS, cfg.Burst = 500, 1000
	if c.Kube, err = kubernetes.NewForConfig(cfg); err == nil {
		if c.MCS, err = mcsclient.NewForConfig(cfg); err == nil {
			c.Dynamic, err = dynamic.NewForConfig(cfg)
		}
	}
	if err != nil {
		return c, fmt.Errorf("cluster %s: clients: %w", spec.Name, err)
	}
	if spec.ClusterID != "" {
		if err := c.SetClusterID(context.Background(), spec.ClusterID); err != nil {
			return c, fmt.Errorf("cluster %s: %w", spec.Name, err)
		}
	}
	if spec.ControlPlane {
		c.cp, err = startControlPlane(assets, c, spec, api.CertDir, index)
		if err != nil {
			return c, fmt.Errorf("cluster %s: control plane: %w", spec.Name, err)
		}
	}
	return c, nil
}

// SetClusterID creates or updates the cluster's About API ClusterProperty
// cluster.clusterset.k8s.io.
func (c *Cluster) SetClusterID(ctx context.Context, id string) error {
	if err := c.SetClusterProperty(ctx, mcsapi.ClusterIDProperty, id); err != nil {
		return err
	}
	c.ID = id
	return nil
}

// SetClusterProperty creates or updates the cluster's About API
// ClusterProperty name with value (the region's, say).
func (c *Cluster) SetClusterProperty(ctx context.Context, name, value string) error {
	props := c.Dynamic.Resource(mcsapi.ClusterPropertyGVR)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": mcsapi.ClusterPropertyGVR.GroupVersion().String(),
		"kind":       "ClusterProperty",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"value": value},
	}}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	existing, err := props.Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		obj.SetResourceVersion(existing.GetResourceVersion())
		_, err = props.Update(ctx, obj, metav1.UpdateOptions{})
	} else {
		_, err = props.Create(ctx, obj, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("setting ClusterProperty %s=%s: %w", name, value, err)
	}
	return nil
}

// DeleteClusterProperty deletes the cluster's About API ClusterProperty
// name; one that does not exist is no error.
func (c *Cluster) DeleteClusterProperty(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := c.Dynamic.Resource(mcsapi.ClusterPropertyGVR).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting ClusterProperty %s: %w", name, err)
	}
	return nil
}

// Stop stops the cluster's apiserver and etcd. It is safe to call twice.
func (c *Cluster) Stop() error {
	if c == nil || c.env == nil {
		return nil
	}
	env := c.env
	c.env = nil
	cpErr := c.cp.stop(false)
	var apiErr error
	if p := c.restarted; p != nil {
		c.restarted = nil
		apiErr = stopProc(p.cmd.Process.Pid, p.done)
	}
	return errors.Join(cpErr, apiErr, env.Stop())
}

// Stop stops every cluster of the set, in parallel.
func (s *Set) Stop() {
	var wg sync.WaitGroup
	for _, c := range s.Clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "stopping cluster %s: %v\n", c.Name, err)
			}
		}()
	}
	wg.Wait()
}

// WriteKubeconfig writes a kubeconfig with one context (and cluster and
// user) per member cluster, named after it, and records its path in s.
func (s *Set) WriteKubeconfig(path string) error {
	kc := clientcmdapi.NewConfig()
	for _, c := range s.Clusters {
		kc.Clusters[c.Name] = &clientcmdapi.Cluster{
			Server:                   c.Config.Host,
			CertificateAuthorityData: c.Config.CAData,
		}
		kc.AuthInfos[c.Name] = &clientcmdapi.AuthInfo{
			ClientCertificateData: c.Config.CertData,
			ClientKeyData:         c.Config.KeyData,
			Token:                 c.Config.BearerToken,
		}
		kc.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name}
	}
	if len(s.Clusters) > 0 {
		kc.CurrentContext = s.Clusters[0].Name
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return err
	}
	s.Kubeconfig = path
	return nil
}

type apiextensionsCRD = apiextensionsv1.CustomResourceDefinition

package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Exec answers `kubectl exec` into a control-plane cluster's pods: the
// requested command runs on this host, in WorkDir, with Env added to this
// process's environment (there are no containers).
type Exec struct {
	WorkDir string
	Env     map[string]string
}

// NodeName is the simulated Node every Pod of a control-plane cluster runs on.
const NodeName = "kwok-node-0"

// controlPlane is what Spec.ControlPlane runs next to the API server.
type controlPlane struct {
	procs  []*exec.Cmd
	exec   *execServer
	cancel context.CancelFunc
	done   sync.WaitGroup
	dir    string
}

// controllers are the kube-controller-manager controllers a member needs
// for Deployments, StatefulSets and Services to behave as in a real cluster,
// and for aggregated ClusterRoles to reach the built-in admin/edit/view.
var controllers = []string{
	"deployment", "replicaset", "statefulset", "endpointslice", "endpointslicemirroring",
	"namespace", "garbagecollector", "serviceaccount", "serviceaccount-token",
	"clusterrole-aggregation",
}

// startControlPlane starts kube-controller-manager and kwok for c, creates
// the simulated Node and binds every Pod to it (there is no scheduler: one
// Node, nothing to choose).
func startControlPlane(assets string, c *Cluster, spec Spec, certDir string, index int) (*controlPlane, error) {
	for _, bin := range []string{"kube-controller-manager", "kwok"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("%s: %w (run `make tools`)", bin, err)
		}
	}
	dir, err := os.MkdirTemp("", "mcs-dns-controlplane-"+spec.Name+"-")
	if err != nil {
		return nil, err
	}
	cp := &controlPlane{dir: dir}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeAdminKubeconfig(c, kubeconfig); err != nil {
		return cp, err
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, c.Config.CAData, 0o600); err != nil {
		return cp, err
	}
	start := func(name string, args ...string) error {
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			return err
		}
		cmd := exec.Command(filepath.Join(assets, name), args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		// Its own process group (stopped as one), and gone with us.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logf.Close()
			return fmt.Errorf("starting %s: %w", name, err)
		}
		logf.Close()
		cp.procs = append(cp.procs, cmd)
		return nil
	}
	if err := start("kube-controller-manager",
		"--kubeconfig="+kubeconfig,
		"--controllers="+strings.Join(controllers, ","),
		"--service-account-private-key-file="+filepath.Join(certDir, "sa-signer.key"),
		"--root-ca-file="+caFile,
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--concurrent-endpoint-syncs=5",
	); err != nil {
		return cp, err
	}

	// Pods get an address in each family the Node has a range of, as in a
	// dual-stack cluster.
	podCIDRs := strings.Split(spec.PodCIDR, ",")
	if spec.PodCIDR == "" {
		podCIDRs = []string{fmt.Sprintf("10.%d.0.0/24", 100+index)}
		if !spec.IPv4Only {
			podCIDRs = append(podCIDRs, fmt.Sprintf("fd00:10:%d::/112", 100+index))
		}
	}
	podCIDR := podCIDRs[0]
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--config=" + filepath.Join(assets, "kwok-stages.yaml"),
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-ip=127.0.0.1",
		"--cidr=" + podCIDR,
	}
	if err := start("kwok", args...); err != nil {
		return cp, err
	}
	if spec.Exec != nil {
		if cp.exec, err = startExecServer(spec.Exec); err != nil {
			return cp, err
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cp.cancel = cancel
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: NodeName, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{"kubernetes.io/hostname": NodeName, "type": "kwok"}},
		Spec: corev1.NodeSpec{PodCIDR: podCIDR, PodCIDRs: podCIDRs},
	}
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	if _, err := c.Kube.CoreV1().Nodes().Create(cctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return cp, fmt.Errorf("creating the simulated Node: %w", err)
	}
	if cp.exec != nil {
		// The API server sends a pod's exec to its Node's kubelet port.
		if err := setKubeletPort(cctx, c, cp.exec.port); err != nil {
			return cp, err
		}
	}
	cp.done.Add(1)
	go func() {
		defer cp.done.Done()
		bindPods(ctx, c)
	}()
	return cp, nil
}

// bindPods binds every unscheduled Pod to the simulated Node until ctx is
// done: the one decision a scheduler would make here.
func bindPods(ctx context.Context, c *Cluster) {
	lw := cache.NewFilteredListWatchFromClient(c.Kube.CoreV1().RESTClient(), "pods", metav1.NamespaceAll,
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", "").String()
		})
	bind := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			return
		}
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
			Target: corev1.ObjectReference{Kind: "Node", Name: NodeName}}
		for attempt := 0; attempt < 5 && ctx.Err() == nil; attempt++ {
			bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := c.Kube.CoreV1().Pods(p.Namespace).Bind(bctx, b, metav1.CreateOptions{})
			cancel()
			if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    bind,
			UpdateFunc: func(_, n any) { bind(n) },
		},
	})
	ctrl.RunWithContext(ctx)
}

// setKubeletPort sets the simulated Node's kubelet port (kwok, which
// runs no server here, leaves it unset), until it reads back.
func setKubeletPort(ctx context.Context, c *Cluster, port int) error {
	for {
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err == nil && n.Status.DaemonEndpoints.KubeletEndpoint.Port == int32(port) {
			return nil
		}
		if err == nil {
			n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
			_, err = c.Kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		}
		if err != nil && !apierrors.IsConflict(err) && ctx.Err() != nil {
			return fmt.Errorf("setting the simulated Node's kubelet port: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeAdminKubeconfig writes a kubeconfig for c's admin user.
func writeAdminKubeconfig(c *Cluster, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
	kc.AuthInfos["c"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.Config.CertData, ClientKeyData: c.Config.KeyData, Token: c.Config.BearerToken}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "c"}
	kc.CurrentContext = "c"
	return clientcmd.WriteToFile(*kc, path)
}

// stop stops kwok and kube-controller-manager (their process groups) and
// the binder, and removes the folder of their logs unless keepLogs.
func (cp *controlPlane) stop(keepLogs bool) error {
	if cp == nil {
		return nil
	}
	if cp.cancel != nil {
		cp.cancel()
	}
	cp.done.Wait()
	cp.exec.close()
	var errs []error
	for _, cmd := range cp.procs {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		waited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-waited
		}
	}
	if !keepLogs {
		errs = append(errs, os.RemoveAll(cp.dir))
	}
	return errors.Join(errs...)
}

// Logs returns the end of the control plane's logs (kube-controller-manager,
// kwok), for a failing test.
func (c *Cluster) Logs() string {
	if c.cp == nil {
		return ""
	}
	var b strings.Builder
	for _, name := range []string{"kube-controller-manager", "kwok"} {
		data, err := os.ReadFile(filepath.Join(c.cp.dir, name+".log"))
		if err != nil {
			continue
		}
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		fmt.Fprintf(&b, "--- %s (%s) ---\n%s\n", name, c.Name, data)
	}
	return b.String()
}

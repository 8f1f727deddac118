package cluster_test

import (
	"bytes"
	"context"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"

	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// A cluster with a real control plane: a Deployment's and a StatefulSet's
// Pods run on the simulated Node with pod IPs from its range, the
// endpointslice controller publishes them (with StatefulSet hostnames),
// a Pod turned unready leaves the ready set, a deleted namespace is
// emptied, and `kubectl exec` runs the command on this host with the
// configured environment (as the MCS conformance suite's DNS specs do).
func TestControlPlane(t *testing.T) {
	set := cluster.Start(t, cluster.Spec{Name: "cp", ControlPlane: true, PodCIDR: "10.199.0.0/24",
		Exec: &cluster.Exec{WorkDir: t.TempDir(), Env: map[string]string{"MCS_DNS_GREETING": "hello from kwok"}}})
	c := set.Clusters[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	defer func() {
		if t.Failed() {
			t.Log(c.Logs())
		}
	}()
	ns := "apps"
	_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	labels := map[string]string{"app": "web"}
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
	}
	_, err = c.Kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: pod},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	dbLabels := map[string]string{"app": "db"}
	dbPod := pod.DeepCopy()
	dbPod.Labels = dbLabels
	_, err = c.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: dbLabels, Ports: []corev1.ServicePort{{Name: "pg", Port: 5432}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Kube.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), ServiceName: "db",
			Selector: &metav1.LabelSelector{MatchLabels: dbLabels}, Template: *dbPod},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	podRange := netip.MustParsePrefix("10.199.0.0/24")
	ready := func(svc string) (ips, hostnames []string) {
		sl, err := c.Kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
		if err != nil {
			return nil, nil
		}
		for _, s := range sl.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					ips = append(ips, e.Addresses...)
					if e.Hostname != nil {
						hostnames = append(hostnames, *e.Hostname)
					}
				}
			}
		}
		sort.Strings(hostnames)
		return ips, hostnames
	}
	start := time.Now()
	require.Eventually(t, func() bool {
		ips, _ := ready("web")
		_, hosts := ready("db")
		return len(ips) == 2 && strings.Join(hosts, ",") == "db-0,db-1"
	}, 2*time.Minute, 200*time.Millisecond, "Deployment and StatefulSet endpoints never ready")
	t.Logf("measured: 2 Deployment and 2 StatefulSet pods ready in EndpointSlices %s after creation", time.Since(start).Round(time.Millisecond))
	ips, _ := ready("web")
	for _, ip := range ips {
		assert.True(t, podRange.Contains(netip.MustParseAddr(ip)), "pod IP %s outside the Node's range", ip)
	}

	// exec, as the conformance suite does it (TTY, no stdin).
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	require.NotEmpty(t, pods.Items)
	req := c.Kube.CoreV1().RESTClient().Post().Resource("pods").Name(pods.Items[0].Name).Namespace(ns).SubResource("exec")
	req.VersionedParams(&corev1.PodExecOptions{Command: []string{"sh", "-c", "echo $MCS_DNS_GREETING"}, Stdout: true, Stderr: true, TTY: true}, scheme.ParameterCodec)
	var stdout, stderr bytes.Buffer
	require.Eventually(t, func() bool {
		ex, err := remotecommand.NewSPDYExecutor(c.Config, "POST", req.URL())
		if err != nil {
			return false
		}
		stdout.Reset()
		stderr.Reset()
		ectx, ecancel := context.WithTimeout(ctx, 10*time.Second)
		defer ecancel()
		err = ex.StreamWithContext(ectx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr, Tty: true})
		if err != nil {
			t.Logf("exec: %v", err)
		}
		return strings.Contains(stdout.String(), "hello from kwok")
	}, time.Minute, time.Second, "exec output %q %q", stdout.String(), stderr.String())

	// A Pod turned unready (its Ready condition, as a failing probe would
	// make it) leaves the ready endpoints.
	p := pods.Items[0]
	p.Status.Conditions = setReady(p.Status.Conditions, corev1.ConditionFalse)
	_, err = c.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, &p, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { ips, _ := ready("web"); return len(ips) == 1 }, time.Minute, 200*time.Millisecond)

	// The namespace controller empties a deleted namespace.
	require.NoError(t, c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return err != nil
	}, 2*time.Minute, 500*time.Millisecond, "namespace never deleted")
}

func setReady(conds []corev1.PodCondition, s corev1.ConditionStatus) []corev1.PodCondition {
	out := []corev1.PodCondition{}
	for _, c := range conds {
		if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			c.Status = s
		}
		out = append(out, c)
	}
	return out
}

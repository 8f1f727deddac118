package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

// mintBoundToken makes a token of the member role's ServiceAccount bound
// to a new Secret named name (deleting the Secret revokes the token) and
// writes it to path in one rename.
func mintBoundToken(t *testing.T, ctx context.Context, c *cluster.Cluster, name, path string) {
	mintBoundTokenOf(t, ctx, c, "mcs-importer-member", name, path)
}

// mintBoundTokenOf is mintBoundToken for ServiceAccount sa.
func mintBoundTokenOf(t *testing.T, ctx context.Context, c *cluster.Cluster, sa, name, path string) {
	t.Helper()
	sec, err := c.Kube.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := c.Kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](3600),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: name, UID: sec.UID},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path+".new", []byte(tr.Status.Token), 0o600))
	require.NoError(t, os.Rename(path+".new", path))
}

// waitRefused waits until c refuses token (its Secret deleted) and returns
// when it did.
func waitRefused(t *testing.T, ctx context.Context, c *cluster.Cluster, token []byte) time.Time {
	t.Helper()
	cfg := rest.CopyConfig(c.Config)
	cfg.CertData, cfg.KeyData, cfg.BearerToken = nil, nil, string(token)
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return apierrors.IsUnauthorized(err)
	}, time.Minute, 100*time.Millisecond, "the old token still works")
	return time.Now()
}

// The importer with a kubeconfig that names token files, as a mounted
// ServiceAccount token or Secret is: one member's token is replaced (a new
// one in the file, then the old one revoked). The importer goes on with
// the new one by itself at its first refusal, without a restart and long
// before client-go's own re-read (a minute): that member stays up within
// its grace period (30 s here: nothing is withdrawn), and an export made
// after the revocation is imported into it.
func TestImporterTokenReplaced(t *testing.T) {
	bins := procs.Build(t)
	set := cluster.Start(t, cluster.Spec{Name: "east", ClusterID: "east"}, cluster.Spec{Name: "west", ClusterID: "west"})
	east, west := set.Clusters[0], set.Clusters[1]
	applyRBAC(t, set)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	dir := t.TempDir()
	kc := clientcmdapi.NewConfig()
	for _, c := range set.Clusters {
		path := filepath.Join(dir, c.Name+".token")
		mintBoundToken(t, ctx, c, "importer-token-1", path)
		kc.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
		kc.AuthInfos[c.Name] = &clientcmdapi.AuthInfo{TokenFile: path}
		kc.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name}
	}
	kc.CurrentContext = "east"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, kubeconfig))

	for _, c := range set.Clusters {
		_, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	export := func(c *cluster.Cluster, name string) { exportShop(ctx, t, c, name) }
	imported := func(c *cluster.Cluster, name string) bool { return importedShop(ctx, c, name) }
	addr := fmt.Sprintf("127.0.0.1:%d", procs.FreePort(t))
	imp := procs.Start(t, "mcs-importer", bins.Importer, "--kubeconfig", kubeconfig, "--contexts", "east,west",
		"--metrics-addr", addr, "--health-probe-interval", "200ms", "--endpoint-grace-period", "30s")
	readyz := func() string { return readyzAt(addr) }
	export(west, "cart")
	require.Eventually(t, func() bool { return imported(east, "cart") }, time.Minute, 200*time.Millisecond, "never imported:\n%s", imp.Output())

	before, err := east.MCS.MulticlusterV1beta1().ServiceImports("shop").Get(ctx, "cart", metav1.GetOptions{})
	require.NoError(t, err)
	oldToken, err := os.ReadFile(filepath.Join(dir, "east.token"))
	require.NoError(t, err)
	mintBoundToken(t, ctx, east, "importer-token-2", filepath.Join(dir, "east.token"))
	require.NoError(t, east.Kube.CoreV1().Secrets(namespace).Delete(ctx, "importer-token-1", metav1.DeleteOptions{}))
	revoked := time.Now()
	refused := waitRefused(t, ctx, east, oldToken)
	t.Logf("measured: the old token refused %s after its Secret was deleted", refused.Sub(revoked).Round(time.Millisecond))
	export(west, "pay")
	require.Eventually(t, func() bool { return imported(east, "pay") }, time.Minute, 200*time.Millisecond,
		"nothing written to east with the new token:\n%s", imp.Output())
	t.Logf("measured: an export made once the old token was refused was imported into that member %s later", time.Since(refused).Round(time.Millisecond))
	require.Eventually(t, func() bool { return strings.Contains(readyz(), "member east: up") }, 30*time.Second, 100*time.Millisecond, "readyz:\n%s", readyz())
	after, err := east.MCS.MulticlusterV1beta1().ServiceImports("shop").Get(ctx, "cart", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before.UID, after.UID, "the import was never withdrawn and made again")
	assert.NotContains(t, imp.Output(), "withdrawn after the grace period")
}

// Our CoreDNS with a kubeconfig that names a token file: the token is
// replaced (a new one in the file, the old one revoked) and the API server
// restarted, so that every list and watch starts again and the old token
// is refused. The plugin reads the file again at that refusal and serves an
// import made then within seconds, where client-go alone keeps the token
// it read for a minute (the token here was read less than that before).
func TestCoreDNSTokenReplaced(t *testing.T) {
	bins := procs.Build(t)
	set := cluster.Start(t, cluster.Spec{Name: "east", ClusterID: "east"})
	east := set.Clusters[0]
	applyRBAC(t, set)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := east.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	imp := func(name, ip string) {
		_, err := east.MCS.MulticlusterV1beta1().ServiceImports("shop").Create(ctx, &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{ip},
				Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	dir := t.TempDir()
	tokenPath := filepath.Join(dir, "coredns.token")
	mintBoundTokenOf(t, ctx, east, "mcs-dns", "coredns-token-1", tokenPath)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["east"] = &clientcmdapi.Cluster{Server: east.Config.Host, CertificateAuthorityData: east.Config.CAData}
	kc.AuthInfos["east"] = &clientcmdapi.AuthInfo{TokenFile: tokenPath}
	kc.Contexts["east"] = &clientcmdapi.Context{Cluster: "east", AuthInfo: "east"}
	kc.CurrentContext = "east"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, kubeconfig))

	imp("cart", "10.250.1.1")
	srv := procs.StartCoreDNS(t, bins.CoreDNS, fmt.Sprintf("clusterset.local {\n    mcs {\n        kubeconfig %s east\n    }\n}\n", kubeconfig))
	answers := func(name, ip string) bool {
		r, err := procs.Query(srv.Addr, "udp", name+".shop.svc.clusterset.local.", dns.TypeA)
		return err == nil && len(r.Answer) == 1 && r.Answer[0].(*dns.A).A.String() == ip
	}
	require.Eventually(t, func() bool { return answers("cart", "10.250.1.1") }, 30*time.Second, 100*time.Millisecond, "never answered:\n%s", srv.Output())
	started := time.Now()

	oldToken, err := os.ReadFile(tokenPath)
	require.NoError(t, err)
	mintBoundTokenOf(t, ctx, east, "mcs-dns", "coredns-token-2", tokenPath)
	require.NoError(t, east.Kube.CoreV1().Secrets(namespace).Delete(ctx, "coredns-token-1", metav1.DeleteOptions{}))
	waitRefused(t, ctx, east, oldToken)
	// The running watches outlive a revocation; a restart ends them.
	require.NoError(t, east.StopAPIServer())
	require.NoError(t, east.StartAPIServer(ctx))
	back := time.Now()
	imp("pay", "10.250.1.2")
	require.Less(t, time.Since(started), 45*time.Second, "too slow a machine: client-go's own re-read may come first")
	require.Eventually(t, func() bool { return answers("pay", "10.250.1.2") }, 20*time.Second, 100*time.Millisecond,
		"the import made once the old token was refused is not served:\n%s", srv.Output())
	t.Logf("measured: served %s after the API server was back (%s after CoreDNS first answered)",
		time.Since(back).Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
	assert.True(t, answers("cart", "10.250.1.1"), "the first import is still served")
}

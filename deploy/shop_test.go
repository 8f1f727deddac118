package deploy_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/test/cluster"
)

// exportShop makes Service shop/name (port 80) in c and exports it.
func exportShop(ctx context.Context, t *testing.T, c *cluster.Cluster, name string) {
	t.Helper()
	_, err := c.Kube.CoreV1().Services("shop").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.MCS.MulticlusterV1beta1().ServiceExports("shop").Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// importedShop reports whether c imports shop/name with a VIP.
func importedShop(ctx context.Context, c *cluster.Cluster, name string) bool {
	si, err := c.MCS.MulticlusterV1beta1().ServiceImports("shop").Get(ctx, name, metav1.GetOptions{})
	return err == nil && len(si.Spec.IPs) > 0
}

// readyzAt is the importer's /readyz body at addr ("" when it does not
// answer).
func readyzAt(addr string) string {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

package mcs

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	coretest "github.com/coredns/coredns/test"
	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func kubeconfigFor(t *testing.T, cluster string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {`+cluster+`}
users:
- name: u
  user: {token: x}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`), 0o600))
	return path
}

// An API server that cannot be reached at start-up is transient: CoreDNS
// starts (after the start-up wait), the plugin is not ready and answers
// SERVFAIL, and its informers keep retrying in the background.
func TestStartupAPIUnreachable(t *testing.T) {
	kc := kubeconfigFor(t, fmt.Sprintf(`server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true`, freePort(t)))
	readyPort := freePort(t)
	srv := startCoreDNS(t, fmt.Sprintf(".:0 {\n    ready 127.0.0.1:%d\n    mcs {\n        kubeconfig %s\n    }\n}", readyPort, kc))
	code, body := httpGet("http://127.0.0.1:" + strconv.Itoa(readyPort) + "/ready")
	assert.Equal(t, http.StatusServiceUnavailable, code, "not ready until synced")
	assert.Contains(t, body, "mcs")
	r, err := ask(srv.udp, "udp", "nothere.demo.svc.clusterset.local", dns.TypeA, 0)
	require.NoError(t, err)
	assert.Equal(t, dns.RcodeServerFailure, r.Rcode, "before sync an unknown name is SERVFAIL, not NXDOMAIN")
}

// A client configuration that does not load (a CA that is no
// certificate) fails start-up with an error naming it.
func TestStartupBadKubeconfig(t *testing.T) {
	kc := kubeconfigFor(t, `server: "https://127.0.0.1:1", certificate-authority-data: "bm90IGEgY2VydGlmaWNhdGU="`)
	_, _, _, err := coretest.CoreDNSServerAndPorts(fmt.Sprintf(".:0 {\n    mcs {\n        kubeconfig %s\n    }\n}", kc))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "plugin/mcs: ")
	assert.Contains(t, err.Error(), "certificate")
}

package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcs-dns/mcs-dns/test/cluster"
)

func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcs-importer")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

func run(bin string, args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	return o.String(), e.String(), code
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func TestBinary(t *testing.T) {
	bin := build(t)

	t.Run("help documents every flag", func(t *testing.T) {
		stdout, stderr, code := run(bin, "--help")
		assert.Equal(t, 0, code)
		help := stdout + stderr
		for _, f := range []string{"kubeconfig", "contexts", "import-into", "metrics-addr", "endpoint-grace-period",
			"resync", "workers", "kube-api-qps", "kube-api-burst", "health-probe-interval", "cache-sync-timeout", "connect-timeout", "log-format", "v "} {
			assert.Contains(t, help, "-"+f, "--help")
		}
		assert.Contains(t, help, "ClusterProperty")
	})

	t.Run("bad flags", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--bogus"}, "flag provided but not defined: -bogus"},
			{nil, "--contexts is required"},
			{[]string{"--contexts", "a,b", "--import-into", "c"}, `--import-into "c" is not one of --contexts`},
			{[]string{"--contexts", "a", "--endpoint-grace-period", "soon"}, "invalid value"},
			{[]string{"--contexts", "a", "--log-format", "xml"}, "--log-format must be text or json"},
			{[]string{"--contexts", "a", "stray"}, "unexpected arguments: stray"},
		} {
			_, stderr, code := run(bin, tc.args...)
			assert.Equal(t, 2, code, "%v", tc.args)
			assert.Contains(t, stderr, tc.want, "%v", tc.args)
			assert.Contains(t, stderr, "--help", "%v: points at --help", tc.args)
		}
	})

	t.Run("unreachable kubeconfig context fails start-up", func(t *testing.T) {
		_, stderr, code := run(bin, "--kubeconfig", filepath.Join(t.TempDir(), "none"), "--contexts", "east", "--metrics-addr", "")
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, `context \"east\"`)
	})

	t.Run("runs against a real cluster and stops cleanly on SIGTERM", func(t *testing.T) {
		set := cluster.Start(t, cluster.Spec{Name: "solo", ClusterID: "solo-1"})
		addr := freePort(t)
		var stderr bytes.Buffer
		cmd := exec.Command(bin, "--kubeconfig", set.Kubeconfig, "--contexts", "solo", "--metrics-addr", addr, "--log-format", "json")
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill() })

		require.Eventually(t, func() bool {
			resp, err := http.Get(fmt.Sprintf("http://%s/readyz", addr))
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}, time.Minute, 100*time.Millisecond, "readyz")
		resp, err := http.Get(fmt.Sprintf("http://%s/metrics", addr))
		require.NoError(t, err)
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		assert.Contains(t, body.String(), "mcs_importer_queue_depth")

		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		select {
		case err := <-done:
			require.NoError(t, err, "exit status after SIGTERM; log:\n%s", stderr.String())
		case <-time.After(30 * time.Second):
			t.Fatalf("did not stop within 30s of SIGTERM; log:\n%s", stderr.String())
		}
		// Structured JSON logs, naming the cluster ID from the ClusterProperty.
		var sawMember bool
		for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &rec), "not a JSON log line: %s", line)
			if rec["msg"] == "member cluster joined" {
				sawMember = true
				assert.Equal(t, "solo-1", rec["cluster"])
				assert.Equal(t, "ClusterProperty", rec["idFrom"])
			}
		}
		assert.True(t, sawMember)
		assert.Contains(t, stderr.String(), "shutting down")
	})
}

package cmd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Mistakes on the command line are reported before any member is asked.
func TestCommandLine(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: a, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: a, user: {}}]
contexts: [{name: east, context: {cluster: a, user: a}}, {name: west, context: {cluster: a, user: a}}]
`), 0o600))
	corefile := filepath.Join(t.TempDir(), "Corefile")
	require.NoError(t, os.WriteFile(corefile, []byte("clusterset.local {\n    mcs {\n        max_answers 0\n    }\n}\n"), 0o600))
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"--help"}, 0, "kubectl mcs status [SERVICE]"},
		{[]string{}, 1, "a command is required: status or explain"},
		{[]string{"frobnicate"}, 1, `unknown command "frobnicate"`},
		{[]string{"status", "-o", "xml"}, 1, `-o "xml": want table, json or yaml`},
		{[]string{"status", "a", "b"}, 1, "usage: kubectl mcs status [SERVICE]"},
		{[]string{"status", "--kubeconfig", kc, "--contexts", "east,south"}, 1, `no context "south" in kubeconfig ` + kc + "; available contexts: east, west"},
		{[]string{"explain", "web.demo.svc.example.org", "--kubeconfig", kc, "--in", "east"}, 1, "web.demo.svc.example.org. is not in clusterset.local."},
		{[]string{"explain", "web.demo.svc.clusterset.local", "BOGUS", "--kubeconfig", kc, "--in", "east"}, 1, `unknown record type "BOGUS"`},
		{[]string{"explain", "web.demo.svc.clusterset.local", "--kubeconfig", kc, "--in", "north"}, 1, `no context "north"`},
		{[]string{"explain", "web.demo.svc.clusterset.local", "--kubeconfig", kc, "--in", "east", "--locality", "near"}, 1, `--locality: locality "near" is neither local-first nor none (or default)`},
		{[]string{"explain", "web.demo.svc.clusterset.local", "--kubeconfig", kc, "--in", "east", "--max-answers", "5000"}, 1, `--max-answers: max_answers "5000" is not a number in 1..4096`},
		{[]string{"explain", "web.demo.svc.clusterset.local", "--kubeconfig", kc, "--in", "east", "--cluster-id", "Not_One"}, 1, `--cluster-id: cluster ID "Not_One" is not valid (a DNS-1123 subdomain`},
		{[]string{"explain", "web.demo.svc.clusterset.local", "--kubeconfig", kc, "--in", "east", "--corefile", "/nonexistent/Corefile"}, 1, `--corefile: open /nonexistent/Corefile: no such file or directory`},
		{[]string{"explain", "web.demo.svc.clusterset.local", "--kubeconfig", kc, "--in", "east", "--corefile", corefile}, 1, `--corefile: ` + corefile + `:3 - Error during parsing: max_answers "0" is not a number in 1..4096`},
	} {
		code, out, errOut := kubectl(tc.args...)
		assert.Equal(t, tc.code, code, "%v", tc.args)
		assert.Contains(t, out+errOut, tc.out, "%v", tc.args)
	}
}

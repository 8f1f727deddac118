package cmd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/mcs-dns/mcs-dns/cmd/kubectl-mcs/cmd"
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
		{[]string{}, 1, "a command is required: status, explain, wait, join, unjoin or dns"},
		{[]string{"join", "--kubeconfig", kc, "--member-context", "east"}, 1, "--hosting-context is required"},
		{[]string{"join", "--kubeconfig", kc, "--hosting-context", "east"}, 1, "--member-context is required"},
		{[]string{"join", "--kubeconfig", kc, "--hosting-context", "east", "--member-context", "south"}, 1, `context "south"`},
		{[]string{"join", "--kubeconfig", kc, "--hosting-context", "east", "--member-context", "west", "--cluster-id", "Not_One"}, 1, `--cluster-id: cluster ID "Not_One" is not valid`},
		{[]string{"join", "--kubeconfig", kc, "--hosting-context", "east", "--member-context", "west", "--context", "west"}, 1, "unknown flag: --context"},
		{[]string{"unjoin", "--kubeconfig", kc, "--member-context", "east"}, 1, "--hosting-context is required"},
		{[]string{"unjoin", "--kubeconfig", kc, "--hosting-context", "east", "--member-context", "west", "--rotate"}, 1, "unknown flag: --rotate"},
		{[]string{"dns", "--kubeconfig", kc, "--context", "east", "--apply", "--undo"}, 1, "--apply and --undo: give one"},
		{[]string{"dns", "--kubeconfig", kc, "--context", "east", "--server", "mcs-dns"}, 1, `--server "mcs-dns": want an IP address`},
		{[]string{"dns", "--kubeconfig", kc, "--context", "east", "--undo", "--server", "10.96.0.10"}, 1, "drop --server"},
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
		{[]string{"wait", "web.demo.svc.clusterset.local", "--kubeconfig", kc, "--for", "ready"}, 2, `--for "ready": want resolvable or endpoints=N`},
		{[]string{"wait", "web.demo.svc.clusterset.local", "--kubeconfig", kc, "--for", "endpoints=0"}, 2, `want endpoints=N with N at least 1`},
		{[]string{"wait", "web.demo.svc.clusterset.local", "--kubeconfig", kc, "--in", "north"}, 2, `no context "north"`},
		{[]string{"wait", "web.demo.svc.clusterset.local", "--kubeconfig", kc, "--in", "east", "--dns", "west=127.0.0.1:53"}, 2, `--dns names "west", which is not a member waited for (east)`},
		{[]string{"wait", "web.demo.svc.clusterset.local", "--kubeconfig", kc, "--bogus"}, 2, `unknown flag: --bogus`},
		{[]string{"wait"}, 2, `usage: kubectl mcs wait NAME`},
		{[]string{"explain", "web.demo.svc.clusterset.local", "--kubeconfig", kc, "--in", "east", "--corefile", corefile}, 1, `--corefile: ` + corefile + `:3 - Error during parsing: max_answers "0" is not a number in 1..4096`},
	} {
		code, out, errOut := kubectl(tc.args...)
		assert.Equal(t, tc.code, code, "%v", tc.args)
		assert.Contains(t, out+errOut, tc.out, "%v", tc.args)
	}
}

// Each subcommand has only its own flags: status has none of explain's
// (explain has every flag of status), and neither has the kubectl flags
// ConfigFlags could add besides --kubeconfig, --context, -n and
// --request-timeout.
func TestSubcommandFlags(t *testing.T) {
	for _, f := range []string{"--in", "--dns", "--corefile", "--zone", "--cluster-id", "--locality", "--max-answers", "--endpointslice-managers"} {
		code, out, errOut := kubectl("status", f, "x")
		assert.Equal(t, 1, code, f)
		assert.Contains(t, out+errOut, "unknown flag: "+f+" (see kubectl mcs status --help)", f)
	}
	for _, sub := range []string{"status", "explain"} {
		for _, f := range []string{"--server", "--user", "--token", "--cluster", "--insecure-skip-tls-verify"} {
			code, out, errOut := kubectl(sub, "web.demo.svc.clusterset.local", f, "x")
			assert.Equal(t, 1, code, "%s %s", sub, f)
			assert.Contains(t, out+errOut, "unknown flag: "+f, "%s %s", sub, f)
		}
	}
	code, out, _ := kubectl("status", "--help")
	assert.Equal(t, 0, code)
	for _, f := range []string{"--kubeconfig", "--context", "--namespace", "--request-timeout", "--contexts", "--output", "--source-managers", "--export-policy"} {
		assert.Contains(t, out, f)
	}
	assert.NotContains(t, out, "--corefile")
	code, out, _ = kubectl("explain", "--help")
	assert.Equal(t, 0, code)
	for _, f := range []string{"--kubeconfig", "--context", "--in", "--dns", "--corefile", "--zone", "--cluster-id", "--locality", "--max-answers", "--endpointslice-managers", "--export-policy"} {
		assert.Contains(t, out, f)
	}
}

// Validate rejects bad input before any member is asked.
func TestValidate(t *testing.T) {
	kc := twoMembers(t)
	streams := genericiooptions.NewTestIOStreamsDiscard()
	status := func(set func(o *cmd.StatusOptions)) error {
		o := cmd.NewStatusOptions(streams)
		*o.ConfigFlags.KubeConfig = kc
		set(o)
		if err := o.Complete(nil, nil); err != nil {
			return err
		}
		return o.Validate()
	}
	assert.NoError(t, status(func(*cmd.StatusOptions) {}))
	assert.ErrorContains(t, status(func(o *cmd.StatusOptions) { o.Output = "xml" }), `-o "xml": want table, json or yaml`)
	assert.ErrorContains(t, status(func(o *cmd.StatusOptions) { *o.ConfigFlags.Timeout = "0" }), "--request-timeout must be positive")
	assert.ErrorContains(t, status(func(o *cmd.StatusOptions) { *o.ConfigFlags.Timeout = "soon" }), `--request-timeout "soon"`)
	assert.ErrorContains(t, status(func(o *cmd.StatusOptions) { o.Contexts = []string{"east"}; *o.ConfigFlags.Context = "west" }), "--context and --contexts: give one")
	assert.ErrorContains(t, status(func(o *cmd.StatusOptions) { *o.ConfigFlags.Context = "south" }), `no context "south"`)
	assert.ErrorContains(t, status(func(o *cmd.StatusOptions) { o.ExportPolicy = "/nonexistent/policy.yaml" }), "--export-policy:")

	explain := func(args []string, set func(o *cmd.ExplainOptions)) error {
		o := cmd.NewExplainOptions(streams)
		*o.ConfigFlags.KubeConfig = kc
		set(o)
		if err := o.Complete(nil, args); err != nil {
			return err
		}
		return o.Validate()
	}
	name := []string{"web.demo.svc.clusterset.local"}
	assert.NoError(t, explain(name, func(*cmd.ExplainOptions) {}))
	assert.ErrorContains(t, explain([]string{"web.demo.svc.example.org"}, func(*cmd.ExplainOptions) {}), "web.demo.svc.example.org. is not in clusterset.local.")
	assert.ErrorContains(t, explain([]string{name[0], "BOGUS"}, func(*cmd.ExplainOptions) {}), `unknown record type "BOGUS"`)
	assert.ErrorContains(t, explain(name, func(o *cmd.ExplainOptions) { o.Output = "xml" }), `-o "xml"`)
	assert.ErrorContains(t, explain(name, func(o *cmd.ExplainOptions) { o.In = "east"; *o.ConfigFlags.Context = "west" }), `--in "east" and --context "west" name different members`)
	assert.ErrorContains(t, explain(name, func(o *cmd.ExplainOptions) { o.In = "north" }), `no context "north"`)
}

// --kubeconfig and --context, ConfigFlags' flags, choose the kubeconfig
// and the member: status reads only the --context member, and explain
// explains it instead of the kubeconfig's current context.
func TestConfigFlags(t *testing.T) {
	kc := twoMembers(t)
	code, _, errOut := kubectl("status", "--kubeconfig", kc, "--context", "west", "--request-timeout", "2")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `warning: member "west": unreachable`)
	assert.NotContains(t, errOut, `member "east"`)
	assert.Contains(t, errOut, "error: no member could be read")

	code, _, errOut = kubectl("explain", "web.demo.svc.clusterset.local", "--kubeconfig", kc, "--context", "west", "--contexts", "west")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `error: member "west": unreachable`)
	code, _, errOut = kubectl("explain", "web.demo.svc.clusterset.local", "--kubeconfig", kc, "--contexts", "west")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `error: member "east": unreachable`, "the current context")

	// Without --kubeconfig, $KUBECONFIG.
	t.Setenv("KUBECONFIG", kc)
	code, _, errOut = kubectl("status", "--context", "south")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `no context "south" in kubeconfig ($KUBECONFIG or ~/.kube/config); available contexts: east, west`)
}

// twoMembers is a kubeconfig of two members, east (current) and west,
// whose API server refuses connections.
func twoMembers(t *testing.T) string {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
current-context: east
clusters: [{name: a, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: a, user: {}}]
contexts: [{name: east, context: {cluster: a, user: a}}, {name: west, context: {cluster: a, user: a}}]
`), 0o600))
	return kc
}

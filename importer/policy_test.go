package importer_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/mcs-dns/mcs-dns/importer"
)

// policyDoc is an export policy: namespace pol-denied denied to every
// cluster (unless allowDenied), west's exports bounded to 3 endpoints,
// north's endpoints to 10.72.0.0/24.
func policyDoc(allowDenied bool) string {
	deny := `["pol-denied"]`
	if allowDenied {
		deny = `[]`
	}
	return `apiVersion: mcs-dns.io/v1alpha1
kind: ExportPolicy
default:
  namespaces:
    deny: ` + deny + `
clusters:
  west:
    maxEndpoints: 3
  north:
    addressRanges: ["10.72.0.0/24"]
`
}

// writeAtomically replaces the file at path in one rename, as a ConfigMap
// volume's update does.
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path+".new", []byte(content), 0o600))
	require.NoError(t, os.Rename(path+".new", path))
}

// The export policy, with the real importer: an export from a denied
// namespace (named by the policy, or protected), and one over its
// endpoint budget, are not imported and say
// why (Valid=False, the rule named); an import whose export grows over
// the budget is withdrawn, and comes back when it shrinks; addresses
// outside a member's ranges are dropped and counted; an edit applies
// without a restart, both ways; a policy that does not parse, or that
// parses but breaks a rule (an unknown field, a bad CIDR), is refused at
// start-up with an error naming it, and later the last good one stays.
func TestExportPolicy(t *testing.T) {
	w := newTestbed(t)
	path := filepath.Join(t.TempDir(), "policy.yaml")

	// At start-up: Run fails, naming the flag and the problem.
	for _, bad := range []struct{ doc, says string }{
		{policyDoc(true) + "  oops: [\n", "yaml"},
		{strings.Replace(policyDoc(false), "deny:", "denny:", 1), "denny"},
		{strings.Replace(policyDoc(false), "10.72.0.0/24", "10.72.0.0/33", 1), "10.72.0.0/33"},
	} {
		writeAtomically(t, path, bad.doc)
		o := baseOptions(w.kubeconfig, w.contexts...)
		o.ExportPolicy = path
		o.Log = testLogger()
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		err := importer.Run(ctx, o)
		cancel()
		if assert.Error(t, err, "start-up with %q", bad.says) {
			assert.Contains(t, err.Error(), "--export-policy")
			assert.Contains(t, err.Error(), bad.says)
		}
	}
	writeAtomically(t, path, policyDoc(false))
	mkNamespace(t, "pol-denied", w.all...)
	mkNamespace(t, "pol-ok", w.all...)

	mkService(t, w.west, "pol-denied", "web", false, tcpPort("http", 8080))
	putSlice(t, w.west, "pol-denied", "web", "web-1", ep{ip: "10.71.1.1", ready: true})
	mkExport(t, w.west, "pol-denied", "web")
	mkService(t, w.west, "pol-ok", "big", false, tcpPort("http", 8080))
	putSlice(t, w.west, "pol-ok", "big", "big-1", ips(4, "10.71.2")...)
	mkExport(t, w.west, "pol-ok", "big")
	mkService(t, w.west, "pol-ok", "grows", false, tcpPort("http", 8080))
	putSlice(t, w.west, "pol-ok", "grows", "grows-1", ips(3, "10.71.3")...)
	mkExport(t, w.west, "pol-ok", "grows")
	// kube-public: no rule names it, and the policy in force denies it
	// all the same (policy.Protected).
	mkService(t, w.west, "kube-public", "dns", false, tcpPort("dns", 53))
	putSlice(t, w.west, "kube-public", "dns", "dns-1", ep{ip: "10.71.4.1", ready: true})
	mkExport(t, w.west, "kube-public", "dns")
	mkService(t, w.north, "pol-ok", "web", false, tcpPort("http", 8080))
	putSlice(t, w.north, "pol-ok", "web", "web-1", ep{ip: "10.72.0.1", ready: true}, ep{ip: "10.99.0.1", ready: true})
	mkExport(t, w.north, "pol-ok", "web")

	o := baseOptions(w.kubeconfig, w.contexts...)
	o.ExportPolicy = path
	r := startImporter(t, o)

	validOf := func(c string, ns, name string) string {
		v, _, _, err := exportConditions(w.west, ns, name)
		if c == "north" {
			v, _, _, err = exportConditions(w.north, ns, name)
		}
		if err != nil {
			return err.Error()
		}
		return v
	}
	require.Eventually(t, func() bool { return validOf("west", "pol-denied", "web") == "False/NamespaceNotAllowed" }, waitFor, tick, "%s", validOf("west", "pol-denied", "web"))
	require.Eventually(t, func() bool { return validOf("west", "pol-ok", "big") == "False/TooManyEndpoints" }, waitFor, tick, "%s", validOf("west", "pol-ok", "big"))
	require.Eventually(t, func() bool { return validOf("west", "kube-public", "dns") == "False/NamespaceNotAllowed" }, waitFor, tick, "%s", validOf("west", "kube-public", "dns"))
	want := map[string][]string{"north": {"10.72.0.1"}}
	require.Eventually(t, func() bool {
		got, err := endpointsBySource(w.east, "pol-ok", "web")
		return err == nil && assert.ObjectsAreEqual(want, got)
	}, waitFor, tick, "only the addresses in north's range")
	// Conditions follow the answers (a full pass after the serve pass).
	require.Eventually(t, func() bool { return validOf("north", "pol-ok", "web") == "True/Valid" }, waitFor, tick, "%s", validOf("north", "pol-ok", "web"))
	for _, k := range [][2]string{{"pol-denied", "web"}, {"pol-ok", "big"}, {"kube-public", "dns"}} {
		_, err := getImport(w.east, k[0], k[1])
		assert.True(t, apierrors.IsNotFound(err), "%s/%s is not imported: %v", k[0], k[1], err)
	}
	assert.Equal(t, 1.0, r.counters(t, "mcs_importer_ignored_objects_total")["north/Endpoint/address_not_allowed"])

	// Within its budget (3 endpoints): imported. Grown over it: withdrawn,
	// as an unexport is, and Valid=False; back within it: imported again.
	require.Eventually(t, func() bool {
		got, err := endpointsBySource(w.east, "pol-ok", "grows")
		return err == nil && len(got["west"]) == 3 && validOf("west", "pol-ok", "grows") == "True/Valid"
	}, waitFor, tick, "%s", validOf("west", "pol-ok", "grows"))
	putSlice(t, w.west, "pol-ok", "grows", "grows-1", ips(4, "10.71.3")...)
	require.Eventually(t, func() bool {
		_, err := getImport(w.east, "pol-ok", "grows")
		got, lerr := endpointsBySource(w.north, "pol-ok", "grows")
		return apierrors.IsNotFound(err) && lerr == nil && len(got) == 0 && validOf("west", "pol-ok", "grows") == "False/TooManyEndpoints"
	}, waitFor, tick, "%s", validOf("west", "pol-ok", "grows"))
	putSlice(t, w.west, "pol-ok", "grows", "grows-1", ips(2, "10.71.3")...)
	require.Eventually(t, func() bool {
		got, err := endpointsBySource(w.east, "pol-ok", "grows")
		return err == nil && len(got["west"]) == 2 && validOf("west", "pol-ok", "grows") == "True/Valid"
	}, waitFor, tick, "%s", validOf("west", "pol-ok", "grows"))

	// Allowed: imported, without a restart.
	writeAtomically(t, path, policyDoc(true))
	require.Eventually(t, func() bool {
		_, err := getImport(w.east, "pol-denied", "web")
		return err == nil && validOf("west", "pol-denied", "web") == "True/Valid"
	}, waitFor, tick)
	// Refused again: withdrawn, as an unexport is.
	writeAtomically(t, path, policyDoc(false))
	require.Eventually(t, func() bool {
		_, err := getImport(w.east, "pol-denied", "web")
		return apierrors.IsNotFound(err)
	}, waitFor, tick)

	// A policy that does not parse, or has a typo that would loosen a
	// rule (deny misspelt, so pol-denied would be allowed), changes
	// nothing, and says so; a good one is in force again.
	for _, bad := range []string{
		policyDoc(true) + "  oops: [\n",
		strings.Replace(policyDoc(false), "deny:", "denny:", 1),
	} {
		writeAtomically(t, path, bad)
		require.Eventually(t, func() bool {
			return gauge(t, r, "mcs_importer_export_policy_valid") == 0
		}, waitFor, tick)
		time.Sleep(3 * time.Second) // reconciles of every export under the policy in force
		_, err := getImport(w.east, "pol-denied", "web")
		assert.True(t, apierrors.IsNotFound(err), "the last good policy (deny) stays: %v", err)
		assert.Equal(t, "False/NamespaceNotAllowed", validOf("west", "pol-denied", "web"))
		got, err := endpointsBySource(w.east, "pol-ok", "web")
		require.NoError(t, err)
		assert.Equal(t, want, got)
		writeAtomically(t, path, policyDoc(false))
		require.Eventually(t, func() bool {
			return gauge(t, r, "mcs_importer_export_policy_valid") == 1
		}, waitFor, tick)
	}
}

// gauge reads a gauge without labels from r's registry (-1: absent).
func gauge(t *testing.T, r *running, name string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

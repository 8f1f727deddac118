// Package helm_test proves the Helm chart deploy/helm/mcs-dns with Helm's
// own Go SDK: it lints, renders what each value asks for, renders the same
// objects as the kustomize tree deploy/ where the two overlap, and
// installs, upgrades and uninstalls on a real API server. It also renders
// the upstream CoreDNS chart with upstream-coredns-values.yaml, the values
// deploy/helm/README.md gives for running our CoreDNS through it.
package helm_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const (
	chartDir    = "mcs-dns"
	namespace   = "mcs-dns-system"
	releaseName = "mcs-dns"
)

// The version the test API servers run (test/cluster).
const kubeVersion = "v1.37.2"

func quiet() *action.Configuration {
	return action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler))
}

func kubeVer(t testing.TB) *common.KubeVersion {
	t.Helper()
	kv, err := common.ParseKubeVersion(kubeVersion)
	require.NoError(t, err)
	return kv
}

// values parses YAML into the map Helm takes as user-supplied values.
func values(t testing.TB, y string) map[string]any {
	t.Helper()
	v := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(y), &v))
	return v
}

func loadChart(t testing.TB, dir string) *chartv2.Chart {
	t.Helper()
	ch, err := loader.Load(dir)
	require.NoError(t, err, "loading %s", dir)
	return ch
}

// renderRelease renders a chart as `helm template` does (client-side, CRDs
// included), or returns the error Helm reports.
func renderRelease(t testing.TB, dir string, vals map[string]any) (*releasev1.Release, error) {
	t.Helper()
	inst := action.NewInstall(quiet())
	inst.DryRunStrategy = action.DryRunClient
	inst.ReleaseName = releaseName
	inst.Namespace = namespace
	inst.Replace = true
	inst.IncludeCRDs = true
	inst.KubeVersion = kubeVer(t)
	r, err := inst.Run(loadChart(t, dir), vals)
	if err != nil {
		return nil, err
	}
	rel, ok := r.(*releasev1.Release)
	require.True(t, ok, "release of type %T", r)
	return rel, nil
}

// render renders a chart and decodes its objects.
func render(t testing.TB, dir string, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	rel, err := renderRelease(t, dir, vals)
	require.NoError(t, err, "rendering %s", dir)
	return decode(t, rel.Manifest)
}

func decode(t testing.TB, manifest string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var objs []*unstructured.Unstructured
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "decoding the rendered manifest:\n%s", manifest)
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		// Unstructured's own decoder: integers stay integers.
		o := &unstructured.Unstructured{}
		require.NoError(t, o.UnmarshalJSON(raw), "decoding %s", raw)
		objs = append(objs, o)
	}
	return objs
}

// kustomize builds a kustomization folder the way `kubectl apply -k` does.
func kustomize(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kustomize build %s", dir)
	var objs []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		m, err := r.Map()
		require.NoError(t, err)
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs
}

func key(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

func byKey(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		m[key(o)] = o
	}
	return m
}

func keys(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, key(o))
	}
	sort.Strings(out)
	return out
}

// find returns the one object of kind and name, failing the test if absent.
func find(t testing.TB, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	require.Failf(t, "object not rendered", "%s %s not in %v", kind, name, keys(objs))
	return nil
}

func has(objs []*unstructured.Unstructured, kind, name string) bool {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return true
		}
	}
	return false
}

// container returns the first container of a Deployment's pod template.
func container(t testing.TB, d *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	require.NotEmpty(t, cs)
	return cs[0].(map[string]any)
}

func args(t testing.TB, d *unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, a := range container(t, d)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

func corefileOf(t testing.TB, objs []*unstructured.Unstructured, cm string) string {
	t.Helper()
	s, _, err := unstructured.NestedString(find(t, objs, "ConfigMap", cm).Object, "data", "Corefile")
	require.NoError(t, err)
	return s
}

// jsonish round-trips an object through JSON so that numbers compare the
// same whichever decoder produced them.
func jsonish(t testing.TB, o *unstructured.Unstructured) map[string]any {
	t.Helper()
	raw, err := o.MarshalJSON()
	require.NoError(t, err)
	m := map[string]any{}
	require.NoError(t, yaml.Unmarshal(raw, &m))
	return m
}

// diff lists where got differs from want: fields of want missing or
// different in got, and fields of got that want lacks unless extraOK
// accepts their path.
func diff(path string, want, got any, extraOK func(string) bool, out *[]string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: want a map, got %v", path, got))
			return
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				*out = append(*out, fmt.Sprintf("%s.%s: missing (want %v)", path, k, wv))
				continue
			}
			diff(path+"."+k, wv, gv, extraOK, out)
		}
		for k, gv := range g {
			if _, ok := w[k]; !ok && !extraOK(path+"."+k) {
				*out = append(*out, fmt.Sprintf("%s.%s: not in the kustomize tree (got %v)", path, k, gv))
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			*out = append(*out, fmt.Sprintf("%s: want %v, got %v", path, want, got))
			return
		}
		for i := range w {
			diff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], extraOK, out)
		}
	default:
		if !reflect.DeepEqual(want, got) {
			*out = append(*out, fmt.Sprintf("%s: want %v, got %v", path, want, got))
		}
	}
}

// corefileLines is a Corefile without comments, blank lines and
// indentation: what CoreDNS reads.
func corefileLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if i := strings.Index(l, "#"); i >= 0 {
			l = l[:i]
		}
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func TestLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{
		"defaults":    nil,
		"non-default": values(t, nonDefault),
		"member only": values(t, memberOnly),
	} {
		t.Run(name, func(t *testing.T) {
			l := action.NewLint()
			l.Namespace = namespace
			l.KubeVersion = kubeVer(t)
			// Warnings fail too.
			l.Strict = true
			res := l.Run([]string{chartDir}, vals)
			for _, m := range res.Messages {
				t.Log(m)
			}
			require.Empty(t, res.Errors)
			require.Equal(t, 1, res.TotalChartsLinted)
		})
	}
}

// The chart ships copies of the CRDs and the rules (Helm reads only files
// inside the chart): they must be the files deploy/ ships.
func TestChartCopiesMatchDeploy(t *testing.T) {
	copies := map[string]string{
		"mcs-dns/files/rules.yaml": "../monitoring/rules.yaml",
	}
	crds, err := filepath.Glob("../crds/*.yaml")
	require.NoError(t, err)
	var crdFiles []string
	for _, f := range crds {
		if strings.HasSuffix(f, "kustomization.yaml") {
			continue
		}
		copies["mcs-dns/crds/"+filepath.Base(f)] = f
		crdFiles = append(crdFiles, filepath.Base(f))
	}
	require.Len(t, crdFiles, 3)
	inChart, err := filepath.Glob("mcs-dns/crds/*")
	require.NoError(t, err)
	require.Len(t, inChart, len(crdFiles), "mcs-dns/crds holds exactly deploy/crds's CRDs")
	for cp, orig := range copies {
		a, err := os.ReadFile(cp)
		require.NoError(t, err)
		b, err := os.ReadFile(orig)
		require.NoError(t, err)
		require.True(t, bytes.Equal(a, b), "%s differs from %s: cp %s %s", cp, orig, orig, cp)
	}
}

// generated matches the hash suffix kustomize gives generated ConfigMaps
// and Secrets.
var generated = regexp.MustCompile(`-[a-z0-9]{10}$`)

// TestDefaultsMatchKustomize: with the kubeconfig given inline (kustomize
// generates its Secret from deploy/importer/kubeconfig), the chart's
// defaults render the objects of `kubectl apply -k deploy/`, field for
// field, but for what Helm adds or does its own way.
func TestDefaultsMatchKustomize(t *testing.T) {
	kc, err := os.ReadFile("../importer/kubeconfig")
	require.NoError(t, err)
	helmObjs := render(t, chartDir, map[string]any{
		"importer": map[string]any{"kubeconfig": map[string]any{"content": string(kc)}},
	})
	var kustObjs []*unstructured.Unstructured
	for _, o := range kustomize(t, "..") {
		// Helm creates the release namespace (--create-namespace).
		if o.GetKind() == "Namespace" {
			continue
		}
		if k := o.GetKind(); k == "ConfigMap" || k == "Secret" {
			o.SetName(generated.ReplaceAllString(o.GetName(), ""))
		}
		if o.GetKind() == "Deployment" {
			vols, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
			for _, v := range vols {
				v := v.(map[string]any)
				if cm, ok := v["configMap"].(map[string]any); ok {
					cm["name"] = generated.ReplaceAllString(cm["name"].(string), "")
				}
				if s, ok := v["secret"].(map[string]any); ok {
					s["secretName"] = generated.ReplaceAllString(s["secretName"].(string), "")
				}
			}
			require.NoError(t, unstructured.SetNestedSlice(o.Object, vols, "spec", "template", "spec", "volumes"))
		}
		kustObjs = append(kustObjs, o)
	}
	require.Equal(t, keys(kustObjs), keys(helmObjs), "the same objects")

	// What Helm adds: its labels, a checksum that rolls pods when their
	// config changes, the pull policy, the Service type (the default).
	extraOK := func(path string) bool {
		return path == ".metadata.labels" || strings.HasPrefix(path, ".metadata.labels.") ||
			strings.HasPrefix(path, ".spec.template.metadata.annotations") ||
			strings.HasSuffix(path, ".imagePullPolicy") ||
			path == ".spec.type"
	}
	hm := byKey(helmObjs)
	for _, ko := range kustObjs {
		ho := hm[key(ko)]
		want, got := jsonish(t, ko), jsonish(t, ho)
		if ko.GetKind() == "ConfigMap" {
			// Same Corefile, but for comments and layout.
			require.Equal(t, corefileLines(ko.Object["data"].(map[string]any)["Corefile"].(string)),
				corefileLines(ho.Object["data"].(map[string]any)["Corefile"].(string)), "Corefile")
			delete(want, "data")
			delete(got, "data")
		}
		if ko.GetKind() == "Secret" {
			// Same bytes; kustomize wraps the base64 lines.
			require.Equal(t, secretData(t, want), secretData(t, got), "Secret data")
			delete(want, "data")
			delete(got, "data")
		}
		var out []string
		diff("", want, got, extraOK, &out)
		require.Empty(t, out, "%s: the chart's object differs from the kustomize tree's", key(ko))
	}
}

func secretData(t testing.TB, o map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range o["data"].(map[string]any) {
		b, err := base64.StdEncoding.DecodeString(v.(string))
		require.NoError(t, err, "data %s", k)
		out[k] = string(b)
	}
	return out
}

// nonDefault sets every value the chart reads to something else than its
// default.
const nonDefault = `
member:
  enabled: false
importer:
  replicas: 3
  image: {repository: registry.example/mcs-importer, tag: v1.2.3, pullPolicy: Always}
  imagePullSecrets: [{name: pull}]
  kubeconfig: {secretName: members, content: ""}
  contexts: [east, west, north]
  importInto: [east]
  vipMode: clusterset-cidr
  clustersetCIDRs: [10.250.0.0/16, fd00:250::/108]
  clustersetIPDefault: true
  endpointGracePeriod: 5m
  leaderElection: {enabled: true, namespace: leases, name: mcs-leader}
  exportPolicy:
    enabled: true
    content: |
      apiVersion: mcs-dns.io/v1alpha1
      kind: ExportPolicy
  metricsPort: 9090
  extraArgs: [--workers=32, --log-format=json]
  resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 1Gi}}
  podDisruptionBudget: {enabled: false}
  topologySpread: {enabled: true, topologyKeys: [topology.kubernetes.io/zone], whenUnsatisfiable: DoNotSchedule}
  podAnnotations: {team: dns}
  nodeSelector: {pool: system}
  priorityClassName: system-cluster-critical
coredns:
  replicas: 4
  image: {repository: registry.example/coredns, tag: v1.2.3, pullPolicy: Never}
  dnsPort: 5353
  service: {type: ClusterIP, clusterIP: 10.96.0.53}
  corefile:
    zones: [clusterset.example]
    bufsize: 1400
    ttl: 30
    rotate: false
    endpointsliceManagers: [mcs-importer.mcs-dns.io/endpointslice-controller.k8s.io]
    clusterID: east
    locality: local-first
    namespaces: [shop, payments]
    maxAnswers: 20
    maxUDPSize: 4096
    extraPlugins: log
  podDisruptionBudget: {enabled: true, maxUnavailable: 2}
  topologySpread: {enabled: false}
  tolerations: [{key: dedicated, operator: Exists}]
monitoring:
  rules: {enabled: true, kind: ConfigMap, labels: {prometheus: main}}
`

// memberOnly is a member cluster that runs neither the importer nor (here)
// our CoreDNS.
const memberOnly = `
importer: {enabled: false}
coredns: {enabled: false}
`

func TestNonDefaultValues(t *testing.T) {
	objs := render(t, chartDir, values(t, nonDefault))

	imp := find(t, objs, "Deployment", "mcs-importer")
	require.Equal(t, []string{
		"--kubeconfig=/etc/mcs-importer/kubeconfig",
		"--contexts=east,west,north",
		"--import-into=east",
		"--metrics-addr=:9090",
		"--vip-mode=clusterset-cidr",
		"--clusterset-cidr=10.250.0.0/16,fd00:250::/108",
		"--clusterset-ip-default",
		"--endpoint-grace-period=5m",
		"--leader-elect",
		"--leader-elect-namespace=leases",
		"--leader-elect-name=mcs-leader",
		"--export-policy=/etc/mcs-importer-policy/policy.yaml",
		"--workers=32",
		"--log-format=json",
	}, args(t, imp))
	c := container(t, imp)
	require.Equal(t, "registry.example/mcs-importer:v1.2.3", c["image"])
	require.Equal(t, "Always", c["imagePullPolicy"])
	require.Equal(t, map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}, "limits": map[string]any{"memory": "1Gi"}}, c["resources"])
	replicas, _, _ := unstructured.NestedInt64(imp.Object, "spec", "replicas")
	require.EqualValues(t, 3, replicas)
	spec, _, _ := unstructured.NestedMap(imp.Object, "spec", "template", "spec")
	require.Equal(t, map[string]any{"pool": "system"}, spec["nodeSelector"])
	require.Equal(t, "system-cluster-critical", spec["priorityClassName"])
	require.Equal(t, []any{map[string]any{"name": "pull"}}, spec["imagePullSecrets"])
	require.Equal(t, []any{map[string]any{
		"maxSkew": int64(1), "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
		"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "mcs-importer"}},
	}}, spec["topologySpreadConstraints"])
	ann, _, _ := unstructured.NestedStringMap(imp.Object, "spec", "template", "metadata", "annotations")
	require.Equal(t, map[string]string{"team": "dns"}, ann)
	vols, _, _ := unstructured.NestedSlice(imp.Object, "spec", "template", "spec", "volumes")
	require.Equal(t, []any{
		map[string]any{"name": "kubeconfig", "secret": map[string]any{"secretName": "members"}},
		map[string]any{"name": "export-policy", "configMap": map[string]any{"name": "mcs-importer-export-policy"}},
	}, vols)
	// An existing Secret: the chart creates none.
	require.False(t, has(objs, "Secret", "members"))
	policy, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap", "mcs-importer-export-policy").Object, "data", "policy.yaml")
	require.Contains(t, policy, "kind: ExportPolicy")

	// The Lease and member record where --leader-elect-namespace says.
	role := find(t, objs, "Role", "mcs-importer-leader-election")
	require.Equal(t, "leases", role.GetNamespace())
	require.Contains(t, fmt.Sprint(role.Object["rules"]), "resourceNames:[mcs-leader-members]")
	require.Equal(t, "leases", find(t, objs, "RoleBinding", "mcs-importer-leader-election").GetNamespace())

	require.False(t, has(objs, "PodDisruptionBudget", "mcs-importer"), "importer PDB off")
	pdb := find(t, objs, "PodDisruptionBudget", "mcs-dns")
	mu, _, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "maxUnavailable")
	require.EqualValues(t, 2, mu)

	// member.enabled=false: none of the member identity.
	for _, o := range objs {
		require.NotContains(t, []string{"mcs-importer-member", "mcs-dns:importer", "mcs-dns:aggregate-to-edit", "mcs-dns:aggregate-to-view", "mcs-dns:importer-leader-election"}, o.GetName(), key(o))
	}

	dns := find(t, objs, "Deployment", "mcs-dns")
	require.Equal(t, []string{"-conf", "/etc/coredns/Corefile", "-dns.port", "5353"}, args(t, dns))
	c = container(t, dns)
	require.Equal(t, "registry.example/coredns:v1.2.3", c["image"])
	require.Equal(t, "Never", c["imagePullPolicy"])
	_, spread, _ := unstructured.NestedSlice(dns.Object, "spec", "template", "spec", "topologySpreadConstraints")
	require.False(t, spread, "coredns topology spread off")
	tol, _, _ := unstructured.NestedSlice(dns.Object, "spec", "template", "spec", "tolerations")
	require.Len(t, tol, 1)
	svc := find(t, objs, "Service", "mcs-dns")
	ip, _, _ := unstructured.NestedString(svc.Object, "spec", "clusterIP")
	require.Equal(t, "10.96.0.53", ip)
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	require.EqualValues(t, 5353, ports[0].(map[string]any)["targetPort"])

	corefile := corefileOf(t, objs, "mcs-dns-corefile")
	require.Equal(t, []string{
		"clusterset.example {",
		"errors {", `consolidate 30s ".*" warning show_first`, "}",
		"bufsize 1400", "health :8080", "ready :8181", "prometheus :9153",
		"mcs clusterset.example {",
		"ttl 30",
		"endpointslice_managers mcs-importer.mcs-dns.io/endpointslice-controller.k8s.io",
		"cluster_id east", "locality local-first", "namespaces shop payments",
		"max_answers 20", "max_udp_size 4096",
		"}",
		"log",
		"}",
	}, corefileLines(corefile))
	st := readStanza(t, corefile)
	require.Equal(t, []string{"clusterset.example."}, st.Zones)
	require.Equal(t, "east", st.Shaping.ClusterID)
	require.Equal(t, 20, st.Shaping.MaxAnswers)
	require.False(t, st.Shaping.Rotate)

	rules := find(t, objs, "ConfigMap", "mcs-dns-rules")
	require.Equal(t, "main", rules.GetLabels()["prometheus"])
	got, _, _ := unstructured.NestedString(rules.Object, "data", "rules.yaml")
	want, err := os.ReadFile("../monitoring/rules.yaml")
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}

func TestDefaultCorefileParses(t *testing.T) {
	objs := render(t, chartDir, nil)
	st := readStanza(t, corefileOf(t, objs, "mcs-dns-corefile"))
	require.Equal(t, []string{"clusterset.local.", "250.10.in-addr.arpa."}, st.Zones)
	require.Equal(t, []string{"mcs-importer.mcs-dns.io"}, st.Managers)
	require.True(t, st.Shaping.Rotate)
}

func TestToggles(t *testing.T) {
	t.Run("member only", func(t *testing.T) {
		objs := render(t, chartDir, values(t, memberOnly))
		require.Equal(t, []string{
			"ClusterRole /mcs-dns:aggregate-to-edit",
			"ClusterRole /mcs-dns:aggregate-to-view",
			"ClusterRole /mcs-dns:importer",
			"ClusterRoleBinding /mcs-dns:importer",
			"CustomResourceDefinition /clusterproperties.about.k8s.io",
			"CustomResourceDefinition /serviceexports.multicluster.x-k8s.io",
			"CustomResourceDefinition /serviceimports.multicluster.x-k8s.io",
			"Role mcs-dns-system/mcs-dns:importer-leader-election",
			"RoleBinding mcs-dns-system/mcs-dns:importer-leader-election",
			"ServiceAccount mcs-dns-system/mcs-importer-member",
		}, keys(objs))
	})
	t.Run("member without extras", func(t *testing.T) {
		objs := render(t, chartDir, values(t, memberOnly+"member: {aggregateRoles: false, leaderElectionRole: false}\n"))
		require.Len(t, objs, 6)
		require.False(t, has(objs, "Role", "mcs-dns:importer-leader-election"))
		require.False(t, has(objs, "ClusterRole", "mcs-dns:aggregate-to-edit"))
	})
	t.Run("PrometheusRule", func(t *testing.T) {
		objs := render(t, chartDir, values(t, memberOnly+"monitoring: {rules: {enabled: true}}\n"))
		pr := find(t, objs, "PrometheusRule", "mcs-dns")
		require.Equal(t, "monitoring.coreos.com/v1", pr.GetAPIVersion())
		groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
		require.GreaterOrEqual(t, len(groups), 2)
	})
	t.Run("no leader election", func(t *testing.T) {
		objs := render(t, chartDir, values(t, "importer: {replicas: 1, leaderElection: {enabled: false}}\n"))
		a := args(t, find(t, objs, "Deployment", "mcs-importer"))
		require.False(t, slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "--leader-elect") }), "%v", a)
		require.False(t, has(objs, "Role", "mcs-importer-leader-election"))
	})
	t.Run("inline kubeconfig", func(t *testing.T) {
		objs := render(t, chartDir, values(t, "importer: {kubeconfig: {content: 'apiVersion: v1'}}\n"))
		s := find(t, objs, "Secret", "mcs-importer-kubeconfig")
		data, _, _ := unstructured.NestedString(s.Object, "data", "kubeconfig")
		require.Equal(t, "YXBpVmVyc2lvbjogdjE=", data)
		ann := find(t, objs, "Deployment", "mcs-importer").Object["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["annotations"]
		require.Contains(t, ann, "checksum/kubeconfig")
	})
	t.Run("Corefile override", func(t *testing.T) {
		objs := render(t, chartDir, values(t, "coredns: {corefile: {override: \"clusterset.local {\\n    mcs\\n}\\n\"}}\n"))
		require.Equal(t, "clusterset.local {\n    mcs\n}\n", corefileOf(t, objs, "mcs-dns-corefile"))
	})
	for name, tc := range map[string]struct{ vals, err string }{
		"replicas without leader election": {"importer: {leaderElection: {enabled: false}}", "needs importer.leaderElection.enabled"},
		"no contexts":                      {"importer: {contexts: []}", "importer.contexts must list"},
		"unknown vip mode":                 {"importer: {vipMode: magic}", "vipMode"},
		"unknown value":                    {"importer: {replica: 2}", "replica"},
		"locality":                         {"coredns: {corefile: {locality: far}}", "locality"},
		"export policy without content":    {"importer: {exportPolicy: {enabled: true}}", "importer.exportPolicy.content"},
	} {
		t.Run("refused: "+name, func(t *testing.T) {
			_, err := renderRelease(t, chartDir, values(t, tc.vals))
			require.ErrorContains(t, err, tc.err)
		})
	}
}

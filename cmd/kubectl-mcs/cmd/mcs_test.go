package cmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/mcs-dns/mcs-dns/cmd/kubectl-mcs/cmd"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

const ns = "shop"

// bed is one clusterset shared by the whole test: east, west and north
// (cluster ID north-1, from its ClusterProperty) run the real importer;
// bare has no MCS CRDs; east also runs our CoreDNS.
type bed struct {
	t        *testing.T
	set      *cluster.Set
	importer *procs.Process
	bins     procs.Binaries
	dns      string
}

const members = "east,west,north"

func (b *bed) startImporter() {
	b.importer = procs.Start(b.t, "mcs-importer", b.bins.Importer,
		"--kubeconfig", b.set.Kubeconfig, "--contexts", members,
		"--endpoint-grace-period", "5s", "--health-probe-interval", "1s",
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", procs.FreePort(b.t)))
}

// kubectl runs `kubectl mcs` in-process.
func kubectl(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code = cmd.Run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func (b *bed) status(t require.TestingT, extra ...string) *cmd.StatusReport {
	args := append([]string{"status", "--kubeconfig", b.set.Kubeconfig, "--contexts", members, "-o", "json"}, extra...)
	code, out, errOut := kubectl(args...)
	require.Equal(t, 0, code, errOut)
	var rep cmd.StatusReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	return &rep
}

func (b *bed) explain(t require.TestingT, name string, extra ...string) *cmd.ExplainReport {
	args := append([]string{"explain", name, "--kubeconfig", b.set.Kubeconfig, "--contexts", members, "--in", "east", "--dns", b.dns, "-o", "json"}, extra...)
	code, out, errOut := kubectl(args...)
	require.Equal(t, 0, code, errOut)
	var rep cmd.ExplainReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	return &rep
}

func service(rep *cmd.StatusReport, name string) *cmd.ServiceStatus {
	for i := range rep.Services {
		if rep.Services[i].Namespace == ns && rep.Services[i].Name == name {
			return &rep.Services[i]
		}
	}
	return nil
}

func exportOf(s *cmd.ServiceStatus, cluster string) *cmd.ExportStatus {
	for i := range s.Exports {
		if s.Exports[i].Cluster == cluster {
			return &s.Exports[i]
		}
	}
	return &cmd.ExportStatus{}
}

func view(s *cmd.ServiceStatus, context string) *cmd.MemberView {
	for i := range s.Members {
		if s.Members[i].Context == context {
			return &s.Members[i]
		}
	}
	return nil
}

func hasPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.Contains(s, prefix) {
			return true
		}
	}
	return false
}

type ep struct {
	ip, host string
	ready    bool
}

func mkService(t *testing.T, c *cluster.Cluster, name string, headless bool, eps ...ep) {
	t.Helper()
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	_, err := c.Kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	require.NoError(t, err)
	setSlice(t, c, name, map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}, eps...)
}

// setSlice creates or replaces the EndpointSlice <name>-1 with labels.
func setSlice(t *testing.T, c *cluster.Cluster, name string, labels map[string]string, eps ...ep) {
	t.Helper()
	ctx := context.Background()
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: labels},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, e := range eps {
		x := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(e.ready)}}
		if e.host != "" {
			x.Hostname = ptr.To(e.host)
		}
		es.Endpoints = append(es.Endpoints, x)
	}
	api := c.Kube.DiscoveryV1().EndpointSlices(ns)
	old, err := api.Get(ctx, es.Name, metav1.GetOptions{})
	if err == nil {
		es.ResourceVersion = old.ResourceVersion
		_, err = api.Update(ctx, es, metav1.UpdateOptions{})
	} else {
		_, err = api.Create(ctx, es, metav1.CreateOptions{})
	}
	require.NoError(t, err)
}

func export(t *testing.T, c *cluster.Cluster, name string) {
	t.Helper()
	_, err := c.MCS.MulticlusterV1beta1().ServiceExports(ns).Create(context.Background(),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// corefile is corefile-examples/standalone.Corefile pointed at the east
// member, with the reverse zones added so that PTR names are served.
func corefile(t *testing.T, kubeconfig string) string {
	raw, err := os.ReadFile("../../../corefile-examples/standalone.Corefile")
	require.NoError(t, err)
	out := strings.Replace(string(raw), "clusterset.local {", "clusterset.local in-addr.arpa ip6.arpa {", 1)
	out = strings.Replace(out, "    mcs\n", fmt.Sprintf("    mcs clusterset.local in-addr.arpa ip6.arpa {\n        kubeconfig %s east\n    }\n", kubeconfig), 1)
	require.Contains(t, out, "kubeconfig "+kubeconfig)
	return out
}

func TestKubectlMCS(t *testing.T) {
	set := cluster.Start(t,
		cluster.Spec{Name: "east"}, cluster.Spec{Name: "west"},
		cluster.Spec{Name: "north", ClusterID: "north-1"},
		cluster.Spec{Name: "bare", SkipMCSCRDs: true})
	east, west, north := set.Get("east"), set.Get("west"), set.Get("north")
	for _, c := range set.Clusters {
		_, err := c.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// web: ClusterSetIP from east and west. db: headless from east and
	// north, plus a slice nobody trusts. clash: ClusterSetIP in east
	// (oldest, wins), headless in west (TypeConflict). ghost: an export
	// without a Service (invalid). idle: unready endpoints only.
	mkService(t, east, "web", false, ep{ip: "10.1.0.1", ready: true}, ep{ip: "10.1.0.2", ready: true})
	mkService(t, west, "web", false, ep{ip: "10.2.0.1", ready: true})
	mkService(t, east, "db", true, ep{ip: "10.1.1.1", host: "db-0", ready: true})
	mkService(t, north, "db", true, ep{ip: "10.3.1.1", host: "db-1", ready: true})
	setSlice(t, east, "rogue", map[string]string{mcsapi.LabelServiceName: "db", mcsapi.LabelSourceCluster: "east"}, ep{ip: "10.6.6.6", host: "evil", ready: true})
	mkService(t, east, "clash", false, ep{ip: "10.1.2.1", ready: true})
	mkService(t, east, "idle", true, ep{ip: "10.1.3.1", host: "idle-0", ready: false})
	for _, c := range []*cluster.Cluster{east, west} {
		export(t, c, "web")
	}
	export(t, east, "db")
	export(t, north, "db")
	export(t, east, "clash")
	export(t, east, "idle")
	time.Sleep(1100 * time.Millisecond) // a later creation second: east's clash export is the oldest
	mkService(t, west, "clash", true, ep{ip: "10.2.2.1", host: "h-0", ready: true})
	export(t, west, "clash")
	export(t, west, "ghost")

	b := &bed{t: t, set: set, bins: procs.Build(t)}
	b.startImporter()
	b.dns = procs.StartCoreDNS(t, b.bins.CoreDNS, corefile(t, set.Kubeconfig)).Addr

	// Converged: every member imports web and db with every exporter's
	// endpoints, and the importer has judged every export.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rep := b.status(c)
		for _, name := range []string{"web", "db"} {
			s := service(rep, name)
			if !assert.NotNil(c, s, name) {
				return
			}
			assert.Empty(c, s.Problems, name)
		}
		for _, name := range []string{"clash", "ghost", "idle"} {
			s := service(rep, name)
			if assert.NotNil(c, s, name) {
				for _, e := range s.Exports {
					assert.NotNil(c, e.Valid, "%s in %s has conditions", name, e.Cluster)
				}
			}
		}
	}, 90*time.Second, 500*time.Millisecond)

	t.Run("status", func(t *testing.T) {
		rep := b.status(t)
		require.Len(t, rep.Members, 3)
		assert.Equal(t, "north-1", rep.Members[2].ClusterID, "cluster ID from the ClusterProperty")
		web := service(rep, "web")
		assert.Equal(t, "ClusterSetIP", web.Type)
		require.Len(t, web.Exports, 2)
		for _, e := range web.Exports {
			assert.Equal(t, "True", e.Valid.Status)
			assert.Equal(t, "True", e.Ready.Status)
			assert.Equal(t, "False", e.Conflict.Status)
		}
		for _, m := range []string{"east", "west", "north"} {
			v := view(web, m)
			assert.True(t, v.Import, m)
			assert.NotEmpty(t, v.IPs, "%s has a VIP", m)
			assert.Equal(t, map[string]int{"east": 2, "west": 1}, v.Endpoints, m)
		}
		db := service(rep, "db")
		assert.Equal(t, "Headless", db.Type)
		assert.Equal(t, map[string]int{"east": 1, "north-1": 1}, view(db, "west").Endpoints)

		clash := service(rep, "clash")
		assert.True(t, hasPrefix(clash.Problems, "conflict:"), "%v", clash.Problems)
		assert.Contains(t, clash.Exports[1].Conflict.Reason, "TypeConflict")
		assert.Equal(t, "ClusterSetIP", clash.Type, "the oldest export's type wins")

		ghost := service(rep, "ghost")
		assert.Contains(t, ghost.Problems, "export in west invalid: NoService")
		assert.Contains(t, service(rep, "idle").Problems, "no ready endpoints")

		// The table, and one service.
		code, out, errOut := kubectl("status", "--kubeconfig", set.Kubeconfig, "--contexts", members)
		require.Equal(t, 0, code, errOut)
		assert.Regexp(t, `SERVICE +TYPE +EXPORTS +IMPORTED +EAST +WEST +NORTH +PROBLEMS`, out)
		assert.Regexp(t, `shop/web +ClusterSetIP +east:ok west:ok +3/3 +\S+ eps:east=2,west=1 .* -\n`, out)
		assert.Regexp(t, `shop/ghost .*west:invalid\(NoService\).*!! export in west invalid: NoService`, out)
		assert.Regexp(t, `shop/clash .*west:conflict\(TypeConflict`, out)
		code, out, errOut = kubectl("status", "db", "-n", ns, "--kubeconfig", set.Kubeconfig, "--contexts", members, "-o", "yaml")
		require.Equal(t, 0, code, errOut)
		var one cmd.StatusReport
		require.NoError(t, yaml.Unmarshal([]byte(out), &one))
		require.Len(t, one.Services, 1)
		assert.Equal(t, "db", one.Services[0].Name)
	})

	t.Run("explain", func(t *testing.T) {
		web := service(b.status(t), "web")
		vip := view(web, "east").IPs[0]
		cases := []struct {
			name    string
			rcode   string
			answer  []string
			reasons []string
		}{
			{name: "web.shop.svc.clusterset.local", rcode: "NOERROR", answer: []string{"web.shop.svc.clusterset.local. A " + vip}},
			{name: "_http._tcp.web.shop.svc.clusterset.local", rcode: "NOERROR", answer: []string{"_http._tcp.web.shop.svc.clusterset.local. SRV 0 100 80 web.shop.svc.clusterset.local."}},
			{name: "db.shop.svc.clusterset.local", rcode: "NOERROR", answer: []string{"db.shop.svc.clusterset.local. A 10.1.1.1", "db.shop.svc.clusterset.local. A 10.3.1.1"}},
			{name: "db-1.north-1.db.shop.svc.clusterset.local", rcode: "NOERROR", answer: []string{"db-1.north-1.db.shop.svc.clusterset.local. A 10.3.1.1"}},
			{name: "1.1.1.10.in-addr.arpa", rcode: "NOERROR", answer: []string{"1.1.1.10.in-addr.arpa. PTR db-0.east.db.shop.svc.clusterset.local."}},
			{name: "nowhere.shop.svc.clusterset.local", rcode: "NXDOMAIN", reasons: []string{"not exported: no ServiceExport shop/nowhere in any member"}},
			{name: "ghost.shop.svc.clusterset.local", rcode: "NXDOMAIN", reasons: []string{"export invalid in west: NoService"}},
			{name: "h-0.west.clash.shop.svc.clusterset.local", rcode: "NXDOMAIN", reasons: []string{"name form the spec does not serve: per-endpoint names", "conflict (export in west): TypeConflict"}},
			{name: "idle.shop.svc.clusterset.local", rcode: "NXDOMAIN", reasons: []string{"no ready endpoints"}},
			{name: "idle-0.east.idle.shop.svc.clusterset.local", rcode: "NXDOMAIN", reasons: []string{"endpoint idle-0 of cluster east is not ready"}},
			{name: "evil.east.db.shop.svc.clusterset.local", rcode: "NXDOMAIN", reasons: []string{"endpoint evil of cluster east is in EndpointSlice rogue-1, which is not served"}},
			{name: "6.6.6.10.in-addr.arpa", rcode: "NXDOMAIN", reasons: []string{"which is not served: no endpointslice.kubernetes.io/managed-by label"}},
			{name: "10-1-0-1.shop.pod.clusterset.local", rcode: "NXDOMAIN", reasons: []string{"name form the spec does not serve"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				var rep *cmd.ExplainReport
				require.EventuallyWithT(t, func(c *assert.CollectT) {
					rep = b.explain(c, tc.name)
					assert.True(c, rep.DNS.Agrees, "CoreDNS agrees: %+v", rep.DNS)
				}, 30*time.Second, 200*time.Millisecond)
				assert.Equal(t, tc.rcode, rep.Rcode)
				assert.Equal(t, strings.Join(tc.answer, "\n"), strings.Join(rep.Answer, "\n"))
				for _, r := range tc.reasons {
					assert.True(t, hasPrefix(rep.Reasons, r), "reason %q in %q", r, rep.Reasons)
				}
				if len(tc.answer) > 0 {
					assert.Empty(t, rep.Reasons)
				}
			})
		}
		// The objects that decide the answer, and the untrusted slice
		// shown as not served.
		rep := b.explain(t, "db.shop.svc.clusterset.local")
		require.NotNil(t, rep.Import)
		assert.Equal(t, "Headless", rep.Import.Type)
		served := map[string]bool{}
		for _, s := range rep.Slices {
			served[s.Name] = s.Served
		}
		assert.Equal(t, false, served["rogue-1"])
		assert.Len(t, served, 3, "rogue and the two mirrored slices: %v", served)
		// Trusting the rogue slice's (absent) manager is not possible;
		// naming managers that exclude mcs-importer serves nothing, and
		// then CoreDNS (with the default rule) disagrees.
		rep = b.explain(t, "db.shop.svc.clusterset.local", "--endpointslice-managers", "someone-else")
		assert.Equal(t, "NXDOMAIN", rep.Rcode)
		assert.False(t, rep.DNS.Agrees)
		// The human form.
		code, out, errOut := kubectl("explain", "ghost.shop.svc.clusterset.local", "--kubeconfig", set.Kubeconfig, "--contexts", members, "--in", "east", "--dns", b.dns)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "Answer (the plugin's code on these objects): NXDOMAIN")
		assert.Contains(t, out, "  - export invalid in west: NoService")
		assert.Contains(t, out, "agrees: NXDOMAIN")
	})

	t.Run("explain shaping", func(t *testing.T) {
		// A CoreDNS of north (cluster ID north-1 from its ClusterProperty,
		// which the plugin reads) with local-first, rotating answers.
		lf := filepath.Join(t.TempDir(), "Corefile")
		require.NoError(t, os.WriteFile(lf, []byte(fmt.Sprintf(`clusterset.local {
    errors
    mcs {
        kubeconfig %s north
        locality local-first
        rotate
    }
}
`, set.Kubeconfig)), 0o644))
		raw, err := os.ReadFile(lf)
		require.NoError(t, err)
		lfDNS := procs.StartCoreDNS(t, b.bins.CoreDNS, string(raw)).Addr
		explain := func(t require.TestingT, name string, extra ...string) *cmd.ExplainReport {
			args := append([]string{"explain", name, "--kubeconfig", set.Kubeconfig, "--contexts", members, "--in", "north", "--dns", lfDNS, "-o", "json"}, extra...)
			code, out, errOut := kubectl(args...)
			require.Equal(t, 0, code, errOut)
			var rep cmd.ExplainReport
			require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
			return &rep
		}
		const srv = "_http._tcp.db.shop.svc.clusterset.local"
		localSRV := srv + ". SRV 0 50 80 db-1.north-1.db.shop.svc.clusterset.local."
		remoteSRV := srv + ". SRV 10 50 80 db-0.east.db.shop.svc.clusterset.local."
		// The flags, the cluster ID read as the plugin reads it; and the
		// Corefile itself: priority 0 for north-1's target, 10 for east's,
		// as that CoreDNS answers.
		for _, flags := range [][]string{{"--locality", "local-first"}, {"--corefile", lf}} {
			var rep *cmd.ExplainReport
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				rep = explain(c, srv, flags...)
				assert.True(c, rep.DNS.Agrees, "%v: CoreDNS agrees: %+v", flags, rep.DNS)
			}, 30*time.Second, 200*time.Millisecond)
			assert.Equal(t, []string{localSRV, remoteSRV}, rep.Answer, flags)
			assert.Equal(t, []string{localSRV}, rep.Local, flags)
			assert.Equal(t, "north-1", rep.Shaping.ClusterID, flags)
			assert.Equal(t, "ClusterProperty cluster.clusterset.k8s.io", rep.Shaping.ClusterIDFrom, flags)
			assert.Equal(t, "local-first", rep.Shaping.Locality, flags)
			assert.True(t, rep.Shaping.LocalFirst, flags)
		}
		rep := explain(t, "db.shop.svc.clusterset.local", "--corefile", lf)
		assert.True(t, rep.DNS.Agrees, "%+v", rep.DNS)
		assert.True(t, rep.Shaping.Rotate)
		assert.Equal(t, lf+":3", rep.Shaping.Corefile)
		assert.Equal(t, []string{"db.shop.svc.clusterset.local. A 10.3.1.1"}, rep.Local)
		// Without them explain computes the default shaping (no
		// trafficDistribution: not local-first), and says CoreDNS differs.
		rep = explain(t, srv)
		assert.Equal(t, "default", rep.Shaping.Locality)
		assert.False(t, rep.Shaping.LocalFirst)
		assert.Equal(t, []string{srv + ". SRV 0 50 80 db-0.east.db.shop.svc.clusterset.local.", srv + ". SRV 0 50 80 db-1.north-1.db.shop.svc.clusterset.local."}, rep.Answer)
		assert.False(t, rep.DNS.Agrees, "%+v", rep.DNS)
		// The flags override the Corefile: east as the local cluster puts
		// 10.1.1.1 first, which that CoreDNS does not.
		rep = explain(t, "db.shop.svc.clusterset.local", "--corefile", lf, "--cluster-id", "east")
		assert.Equal(t, "--cluster-id", rep.Shaping.ClusterIDFrom)
		assert.Equal(t, []string{"db.shop.svc.clusterset.local. A 10.1.1.1"}, rep.Local)
		assert.False(t, rep.DNS.Agrees)
		assert.Contains(t, rep.DNS.Order, "not local-first: db.shop.svc.clusterset.local. A 10.1.1.1 (this cluster's) comes after")
		// max_answers 1: the local endpoint only, of two; that CoreDNS,
		// without max_answers, answers with both.
		rep = explain(t, srv, "--corefile", lf, "--max-answers", "1")
		assert.Equal(t, []string{localSRV}, rep.Answer)
		assert.Equal(t, []string{localSRV, remoteSRV}, rep.All)
		assert.False(t, rep.DNS.Agrees, "%+v", rep.DNS)
		// The human form.
		code, out, errOut := kubectl("explain", srv, "--kubeconfig", set.Kubeconfig, "--contexts", members, "--in", "north", "--dns", lfDNS, "--corefile", lf)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "Shaping (mcs stanza at "+lf+":3): locality local-first, cluster ID north-1 (ClusterProperty cluster.clusterset.k8s.io), no region (none (no ClusterProperty region.topology.kubernetes.io), so no region tier), rotate")
		assert.Contains(t, out, "  "+localSRV+"   (local (cluster north-1))\n  "+remoteSRV+"   (other (cluster east))\n")
		assert.Contains(t, out, "agrees: NOERROR")
		// A Corefile with no stanza for the name.
		code, _, errOut = kubectl("explain", "web.shop.svc.example.org", "--kubeconfig", set.Kubeconfig, "--in", "north", "--corefile", lf)
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "no mcs stanza of --corefile "+lf+" serves web.shop.svc.example.org. (its mcs stanzas serve: clusterset.local. at line 3)")
	})

	t.Run("explain tiers", func(t *testing.T) {
		// A slice of db in north from a cluster of north's region (by
		// hand: a manager the plugin trusts by default, not the
		// importer's, which would take it for an orphan).
		setSlice(t, north, "db-south", map[string]string{mcsapi.LabelServiceName: "db", mcsapi.LabelSourceCluster: "south-1",
			mcsapi.LabelSourceRegion: "eu", mcsapi.LabelManagedBy: "hand.example"}, ep{ip: "10.4.1.1", host: "db-2", ready: true})
		t.Cleanup(func() {
			_ = north.Kube.DiscoveryV1().EndpointSlices(ns).Delete(context.Background(), "db-south-1", metav1.DeleteOptions{})
		})
		// The region from north's ClusterProperty, as the plugin reads it.
		require.NoError(t, north.SetClusterProperty(context.Background(), mcsapi.RegionProperty, "eu"))
		t.Cleanup(func() { _ = north.DeleteClusterProperty(context.Background(), mcsapi.RegionProperty) })
		const name = "db.shop.svc.clusterset.local"
		local, region, other := name+". A 10.3.1.1", name+". A 10.4.1.1", name+". A 10.1.1.1"
		var rep *cmd.ExplainReport
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			code, out, errOut := kubectl("explain", name, "--kubeconfig", set.Kubeconfig, "--contexts", members, "--in", "north", "--locality", "local-first", "-o", "json")
			if !assert.Equal(c, 0, code, errOut) {
				return
			}
			rep = &cmd.ExplainReport{}
			require.NoError(c, json.Unmarshal([]byte(out), rep), out)
			assert.Len(c, rep.Answer, 3)
		}, 30*time.Second, 200*time.Millisecond)
		assert.Equal(t, "eu", rep.Shaping.Region)
		assert.Equal(t, "ClusterProperty region.topology.kubernetes.io", rep.Shaping.RegionFrom)
		assert.Equal(t, map[string]string{local: "local (cluster north-1)", region: "region (eu, cluster south-1)", other: "other (cluster east)"}, rep.Tiers)
		// The human form lists them in tier order, with why.
		code, out, errOut := kubectl("explain", name, "--kubeconfig", set.Kubeconfig, "--contexts", members, "--in", "north", "--locality", "local-first")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "region eu (ClusterProperty region.topology.kubernetes.io)")
		assert.Contains(t, out, "  "+local+"   (local (cluster north-1))\n  "+region+"   (region (eu, cluster south-1))\n  "+other+"   (other (cluster east))\n")
		// --region: another region, so south-1 is other too.
		rep = b.explain(t, name, "--in", "north", "--locality", "local-first", "--region", "us")
		assert.Equal(t, "--region", rep.Shaping.RegionFrom)
		assert.Equal(t, "other (cluster south-1)", rep.Tiers[region])
	})

	t.Run("through kubectl", func(t *testing.T) {
		// The real kubectl finds the built plugin on $PATH and runs it.
		assets, err := cluster.AssetsDir()
		require.NoError(t, err)
		kubectlBin := filepath.Join(assets, "kubectl")
		if _, err := os.Stat(kubectlBin); err != nil {
			t.Skipf("no kubectl in %s (make tools builds it; a folder of your own needs one): %v", assets, err)
		}
		pathDir := t.TempDir()
		require.NoError(t, os.Symlink(procs.KubectlMCSBinary(t), filepath.Join(pathDir, "kubectl-mcs")))
		run := func(args ...string) string {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			proc := exec.CommandContext(ctx, kubectlBin, args...)
			// Only the plugin on $PATH; the kubeconfig from $KUBECONFIG,
			// which kubectl passes on to the plugin with the rest of its
			// environment.
			proc.Env = append(os.Environ(), "PATH="+pathDir, "HOME="+t.TempDir(), "KUBECONFIG="+set.Kubeconfig)
			out, err := proc.CombinedOutput()
			require.NoError(t, err, "kubectl %v:\n%s", args, out)
			return string(out)
		}
		out := run("plugin", "list")
		assert.Contains(t, out, "The following compatible plugins are available:")
		assert.Contains(t, out, filepath.Join(pathDir, "kubectl-mcs"))
		assert.NotContains(t, out, "warning")

		out = run("mcs", "status", "--contexts", members)
		assert.Regexp(t, `SERVICE +TYPE +EXPORTS +IMPORTED +EAST +WEST +NORTH +PROBLEMS`, out)
		assert.Regexp(t, `shop/db +Headless +east:ok north-1:ok +3/3 +headless eps:east=1,north-1=1 `, out)

		out = run("mcs", "explain", "_http._tcp.db.shop.svc.clusterset.local", "--contexts", members, "--in", "east", "--dns", b.dns, "--locality", "none")
		assert.Contains(t, out, "_http._tcp.db.shop.svc.clusterset.local. SRV in east (cluster east)")
		assert.Contains(t, out, "Shaping: locality none, no cluster ID")
		assert.Contains(t, out, "  _http._tcp.db.shop.svc.clusterset.local. SRV 0 50 80 db-0.east.db.shop.svc.clusterset.local.\n")
		assert.Contains(t, out, "CoreDNS at "+b.dns+" agrees: NOERROR")
	})

	t.Run("wait", func(t *testing.T) {
		kc := []string{"--kubeconfig", set.Kubeconfig, "--contexts", members, "--interval", "200ms"}
		wait := func(args ...string) (int, string, string) {
			return kubectl(append(append([]string{"wait"}, args...), kc...)...)
		}
		code, out, errOut := wait("web.shop.svc.clusterset.local", "--timeout", "30s", "--dns", "east="+b.dns)
		assert.Equal(t, 0, code, out+errOut)
		for _, m := range []string{"east", "west", "north"} {
			assert.Contains(t, out, m+": web.shop.svc.clusterset.local. A resolvable: ", m)
		}
		assert.Contains(t, out, "(CoreDNS at "+b.dns+" agrees)")
		code, out, errOut = wait("db.shop.svc.clusterset.local", "--for", "endpoints=2", "--in", "west", "--timeout", "30s")
		assert.Equal(t, 0, code, out+errOut)
		assert.Contains(t, out, "west: db.shop.svc.clusterset.local. A endpoints=2: 2 ready endpoint addresses")

		// Not met by the timeout: exit code 1, and explain's reason.
		code, out, errOut = wait("idle.shop.svc.clusterset.local", "--in", "east", "--timeout", "2s")
		assert.Equal(t, cmd.ExitNotMet, code, out+errOut)
		assert.Contains(t, out, "east: idle.shop.svc.clusterset.local. A not resolvable after 2s: ")
		assert.Contains(t, errOut, "1 of 1 member(s) not resolvable after 2s: east")
		code, out, errOut = wait("db.shop.svc.clusterset.local", "--for", "endpoints=3", "--in", "west", "--timeout", "1s")
		assert.Equal(t, cmd.ExitNotMet, code, out+errOut)
		assert.Contains(t, out, "2 of 3 ready endpoint addresses")

		// A name that comes while it waits.
		type result struct {
			code     int
			out, err string
		}
		done := make(chan result, 1)
		go func() {
			code, out, errOut := wait("late.shop.svc.clusterset.local", "--timeout", "50s")
			done <- result{code, out, errOut}
		}()
		time.Sleep(time.Second)
		mkService(t, west, "late", false, ep{ip: "10.2.9.1", ready: true})
		export(t, west, "late")
		r := <-done
		assert.Equal(t, 0, r.code, r.out+r.err)
		for _, m := range []string{"east", "west", "north"} {
			assert.Contains(t, r.out, m+": late.shop.svc.clusterset.local. A resolvable: ", m)
		}
	})

	t.Run("errors", func(t *testing.T) {
		code, _, errOut := kubectl("status", "--kubeconfig", set.Kubeconfig, "--contexts", "east,nope")
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, `no context "nope" in kubeconfig`)
		assert.Contains(t, errOut, "available contexts: bare, east, north, west")

		// Every context by default: bare has no MCS CRDs.
		code, out, errOut := kubectl("status", "--kubeconfig", set.Kubeconfig)
		assert.Equal(t, 0, code, errOut)
		assert.Contains(t, errOut, `member "bare": no MCS CRDs`)
		assert.Regexp(t, `shop/web .*!! no MCS CRDs`, out)

		// A user who may read the cluster ID but nothing else.
		ctx := context.Background()
		_, err := east.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "cluster-id-reader"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{mcsapi.AboutGroup}, Resources: []string{"clusterproperties"}, Verbs: []string{"get"}}},
		}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		_, err = east.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "cluster-id-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-id-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "nobody"}},
		}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		kc, err := clientcmd.LoadFromFile(set.Kubeconfig)
		require.NoError(t, err)
		user := *kc.AuthInfos["east"]
		user.Impersonate = "nobody"
		kc.AuthInfos["nobody"] = &user
		kc.Contexts["nobody"] = &clientcmdapi.Context{Cluster: "east", AuthInfo: "nobody"}
		denied := filepath.Join(t.TempDir(), "kubeconfig")
		require.NoError(t, clientcmd.WriteToFile(*kc, denied))
		code, _, errOut = kubectl("status", "--kubeconfig", denied, "--contexts", "nobody")
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, `member "nobody": RBAC denied: cannot list serviceexports.multicluster.x-k8s.io in all namespaces`)
		code, _, errOut = kubectl("explain", "web.shop.svc.clusterset.local", "--kubeconfig", denied, "--in", "nobody", "--contexts", "nobody")
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, `member "nobody": RBAC denied: cannot list serviceimports.multicluster.x-k8s.io in namespace shop`)
		// Without even the cluster ID.
		require.NoError(t, east.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, "cluster-id-reader", metav1.DeleteOptions{}))
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			_, _, errOut := kubectl("status", "--kubeconfig", denied, "--contexts", "nobody")
			assert.Contains(c, errOut, `member "nobody": RBAC denied: cannot get clusterproperties.about.k8s.io`)
		}, 20*time.Second, 200*time.Millisecond)
	})

	t.Run("stale", func(t *testing.T) {
		// With the importer stopped, east's own endpoints change and no
		// member's mirror follows.
		require.NoError(t, b.importer.Stop())
		setSlice(t, east, "web", map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"},
			ep{ip: "10.1.0.1", ready: true}, ep{ip: "10.1.0.2", ready: true}, ep{ip: "10.1.0.3", ready: true})
		web := service(b.status(t), "web")
		assert.Contains(t, web.Problems, "stale in west: 2 ready endpoints from east (east has 3)")
		assert.Contains(t, web.Problems, "stale in north: 2 ready endpoints from east (east has 3)")
		// An import gone from one member.
		require.NoError(t, west.MCS.MulticlusterV1beta1().ServiceImports(ns).Delete(context.Background(), "web", metav1.DeleteOptions{}))
		web = service(b.status(t), "web")
		assert.Contains(t, web.Problems, "missing import in west")
		assert.False(t, view(web, "west").Import)
		b.startImporter()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			web := service(b.status(c), "web")
			assert.Empty(c, web.Problems)
			assert.Equal(c, map[string]int{"east": 3, "west": 1}, view(web, "north").Endpoints)
			assert.True(c, view(web, "west").Import)
		}, 60*time.Second, 500*time.Millisecond)
	})

	t.Run("forged slice", func(t *testing.T) {
		// A slice no trusted manager wrote is reported, and never mirrored.
		setSlice(t, east, "web-forged", map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "evil.example.com"},
			ep{ip: "10.6.6.7", ready: true})
		setSlice(t, east, "web-nolabel", map[string]string{discoveryv1.LabelServiceName: "web"}, ep{ip: "10.6.6.8", ready: true})
		noLabel := `EndpointSlice web-nolabel-1 in east not mirrored: no endpointslice.kubernetes.io/managed-by label (mcs-importer mirrors only slices of the managers it trusts, --endpointslice-managers)`
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			web := service(b.status(c), "web")
			assert.Contains(c, web.Problems, `EndpointSlice web-forged-1 in east not mirrored: its manager "evil.example.com" is not one mcs-importer trusts (--endpointslice-managers)`)
			assert.Contains(c, web.Problems, noLabel)
			assert.Equal(c, map[string]int{"east": 3, "west": 1}, view(web, "north").Endpoints, "never mirrored")
		}, 30*time.Second, 500*time.Millisecond)
		// explain says so at the export, and shows the copies' source
		// manager.
		rep := b.explain(t, "web.shop.svc.clusterset.local")
		notMirrored := `EndpointSlice web-forged-1 in east not mirrored: its manager "evil.example.com" is not one mcs-importer trusts (--endpointslice-managers)`
		for _, e := range rep.Export {
			if e.Cluster == "east" {
				assert.Equal(t, []string{notMirrored, noLabel}, e.NotMirrored)
			} else {
				assert.Empty(t, e.NotMirrored, e.Cluster)
			}
		}
		require.NotEmpty(t, rep.Slices)
		for _, s := range rep.Slices {
			assert.Equal(t, "endpointslice-controller.k8s.io", s.SourceManagedBy, s.Name)
		}
		code, out, errOut := kubectl("explain", "web.shop.svc.clusterset.local", "--kubeconfig", b.set.Kubeconfig, "--contexts", members, "--in", "east")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "    "+notMirrored+"\n", "under the export")
		assert.Contains(t, out, "    "+noLabel+"\n", "under the export")
		// With the importer's export policy, the addresses it drops.
		pol := filepath.Join(t.TempDir(), "policy.yaml")
		require.NoError(t, os.WriteFile(pol, []byte("apiVersion: mcs-dns.io/v1alpha1\nkind: ExportPolicy\nclusters:\n  east:\n    addressRanges: [\"10.1.0.0/31\", \"10.1.0.2/32\"]\n"), 0o600))
		web := service(b.status(t, "--export-policy", pol), "web")
		assert.Contains(t, web.Problems, "EndpointSlice web-1 in east: address 10.1.0.3 not mirrored: outside the export policy's addressRanges for cluster east")
		assert.Equal(t, 2, exportOf(web, "east").ReadyEndpoints, "the two the policy allows")
		rep = b.explain(t, "web.shop.svc.clusterset.local", "--export-policy", pol)
		for _, e := range rep.Export {
			if e.Cluster == "east" {
				assert.Contains(t, e.NotMirrored, "EndpointSlice web-1 in east: address 10.1.0.3 not mirrored: outside the export policy's addressRanges for cluster east")
			}
		}
		code, _, errOut = kubectl("status", "--kubeconfig", b.set.Kubeconfig, "--contexts", members, "--export-policy", filepath.Join(t.TempDir(), "none.yaml"))
		assert.NotEqual(t, 0, code)
		assert.Contains(t, errOut, "--export-policy:")
		require.NoError(t, east.Kube.DiscoveryV1().EndpointSlices(ns).Delete(context.Background(), "web-forged-1", metav1.DeleteOptions{}))
		require.NoError(t, east.Kube.DiscoveryV1().EndpointSlices(ns).Delete(context.Background(), "web-nolabel-1", metav1.DeleteOptions{}))
	})

	t.Run("member down", func(t *testing.T) {
		require.NoError(t, north.Stop())
		// North refuses connections at once; the timeout is for the live
		// members, which a loaded machine can make slow.
		code, out, errOut := kubectl("status", "--kubeconfig", set.Kubeconfig, "--contexts", members, "-o", "json", "--request-timeout", "10s")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, errOut, `member "north": unreachable`)
		var rep cmd.StatusReport
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		db := service(&rep, "db")
		require.NotNil(t, db)
		assert.Equal(t, "unreachable", view(db, "north").Error)
		assert.True(t, view(db, "west").Import, "the other members still show")
		assert.Contains(t, db.Problems, "north: unreachable")
		code, out, errOut = kubectl("status", "db", "--kubeconfig", set.Kubeconfig, "--contexts", members, "--request-timeout", "10s")
		require.Equal(t, 0, code, errOut)
		assert.Regexp(t, `shop/db +Headless +east:ok +2/3 +headless eps:\S+ +headless eps:\S+ +!! unreachable +!! north: unreachable\n`, out)
		// Past the importer's grace period north's endpoints are
		// withdrawn: explain says so, and CoreDNS agrees.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			rep := b.explain(c, "db-1.north-1.db.shop.svc.clusterset.local", "--request-timeout", "10s")
			assert.Equal(c, "NXDOMAIN", rep.Rcode)
			assert.True(c, hasPrefix(rep.Reasons, "member withdrawn: the import does not list cluster north-1"), "%q", rep.Reasons)
			assert.True(c, rep.DNS.Agrees, "%+v", rep.DNS)
		}, 60*time.Second, 500*time.Millisecond)
	})
}

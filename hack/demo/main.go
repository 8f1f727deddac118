// Command demo is `make demo`: it starts three local member clusters (east,
// west, north: a real kube-apiserver and etcd each), installs the CRDs,
// creates sample workloads and exports them, runs mcs-importer and one of
// our CoreDNS per cluster on loopback ports, waits until the answers
// converge, and shows real dig output. Then it changes things live and shows
// the new answers, and keeps running until Ctrl-C (or `make demo-down`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
	"github.com/mcs-dns/mcs-dns/test/stack"
)

type options struct {
	dir      string
	bin      string
	basePort int
	wait     bool
	timeout  time.Duration
	importer string
}

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", ".demo", "folder for the kubeconfig, Corefiles, logs and pid file")
	flag.StringVar(&o.bin, "bin", "bin", "folder holding the built coredns and mcs-importer")
	flag.IntVar(&o.basePort, "base-port", 10053, "DNS port of east's CoreDNS; west and north use the next two")
	flag.BoolVar(&o.wait, "wait", true, "keep running after the show until Ctrl-C (false: stop everything and exit)")
	flag.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long to wait for answers to converge at each step")
	flag.StringVar(&o.importer, "importer-args", "", "extra flags for mcs-importer, space-separated")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "demo: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }

var names = []string{"east", "west", "north"}

func run(ctx context.Context, o options) error {
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	// Absolute paths: the commands it prints work from any folder.
	if o.bin, err = filepath.Abs(o.bin); err != nil {
		return err
	}
	stopPrevious(dir)
	pidfile := filepath.Join(dir, "demo.pid")
	if err := os.WriteFile(pidfile, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	defer os.Remove(pidfile)
	for _, b := range []string{"coredns", "mcs-importer"} {
		if _, err := os.Stat(filepath.Join(o.bin, b)); err != nil {
			return fmt.Errorf("%s not built: run `make build` (make demo does)", filepath.Join(o.bin, b))
		}
	}

	step("starting 3 member clusters (east, west, north): kube-apiserver, etcd, kube-controller-manager and a kwok Node each, with the MCS and About API CRDs")
	specs := make([]cluster.Spec, len(names))
	for i, n := range names {
		specs[i] = cluster.Spec{Name: n, ClusterID: n, ControlPlane: true, PodCIDR: podCIDRs[n]}
	}
	st, err := stack.Start(ctx, stack.Config{Members: specs, Dir: dir,
		Bin: procs.Binaries{CoreDNS: filepath.Join(o.bin, "coredns"), Importer: filepath.Join(o.bin, "mcs-importer")}})
	if st != nil {
		defer func() {
			st.StopProcesses()
			step("stopping the clusters")
			st.Set.Stop()
		}()
	}
	if err != nil {
		return err
	}
	st.Group.OnUnexpectedExit(ctx, func(p *procs.Process) {
		fmt.Fprintf(os.Stderr, "\n!! %s exited unexpectedly (%v); the end of %s:\n%s\n", p.Name, p.Cmd.ProcessState, p.LogPath(), logTail(p.LogPath(), 20))
	})
	set, kubeconfig := st.Set, st.Kubeconfig
	fmt.Printf("    kubeconfig with contexts east, west, north: %s\n", kubeconfig)

	step("creating sample workloads (a Deployment web and a StatefulSet db; kwok runs their pods, the endpointslice controller publishes them) and exporting them")
	if err := createWorkloads(ctx, set); err != nil {
		return err
	}

	step("starting mcs-importer for all three clusters")
	metrics, err := stack.FreeAddr()
	if err != nil {
		return err
	}
	importerArgs := st.ImporterArgs(metrics, strings.Fields(o.importer)...)
	if _, err := st.StartImporter(importerArgs); err != nil {
		return err
	}
	importerLog := st.LogPath("mcs-importer")
	fmt.Printf("    %s %s\n    log: %s\n", st.Bin.Importer, strings.Join(importerArgs.Argv(), " "), importerLog)

	step("starting our CoreDNS for each cluster on 127.0.0.1")
	addrs := map[string]string{}
	for i, n := range names {
		c, err := st.StartCoreDNS(n, stack.CoreDNSOptions{Port: o.basePort + i, Corefile: corefile, CorefilePath: filepath.Join(dir, n+".Corefile")})
		if err != nil {
			return err
		}
		addrs[n] = c.Addr
		fmt.Printf("    %-5s CoreDNS on %s (Corefile %s)\n", n, addrs[n], c.Corefile)
	}

	step("waiting until every cluster's CoreDNS answers for the exports")
	for _, n := range names {
		if err := waitFor(ctx, o.timeout, addrs[n], "db.demo.svc.clusterset.local.", dns.TypeA, 3); err != nil {
			return fmt.Errorf("%s: %w (see %s)", n, err, importerLog)
		}
	}
	webVIP := waitFor(ctx, 20*time.Second, addrs["north"], "web.demo.svc.clusterset.local.", dns.TypeA, 1) == nil
	fmt.Println("    converged")

	north := addrs["north"]
	step("answers from north's CoreDNS (north exports nothing; everything comes from east and west)")
	if webVIP {
		dig(north, "the ClusterSet VIP of web (a ClusterSetIP service exported from east and west)", "web.demo.svc.clusterset.local", "A")
	} else {
		fmt.Println("\n-- web has no ClusterSet VIP yet (this mcs-importer allocates none), so its A query is NODATA:")
		dig(north, "", "web.demo.svc.clusterset.local", "A")
	}
	dig(north, "the headless service db: every ready pod, from both clusters", "db.demo.svc.clusterset.local", "A")
	dig(north, "one pod by name: <hostname>.<clusterid>.<svc>.<ns>.svc.clusterset.local", "db-0.east.db.demo.svc.clusterset.local", "A")
	dig(north, "SRV for a named port of the headless service: one record per pod", "_postgres._tcp.db.demo.svc.clusterset.local", "SRV")
	c := set.Get("east")
	db0, err := c.Kube.CoreV1().Pods("demo").Get(ctx, "db-0", metav1.GetOptions{})
	if err != nil {
		return err
	}
	dig(north, "PTR of a headless pod IP (east's db-0, "+db0.Status.PodIP+")", "-x", db0.Status.PodIP)
	dig(north, "a service nobody exported: NXDOMAIN with the zone SOA", "nope.demo.svc.clusterset.local", "A")

	step("live change 1: pod db-1 in east turns unready (its Ready condition, as a failing readiness probe would set it)")
	db1, err := c.Kube.CoreV1().Pods("demo").Get(ctx, "db-1", metav1.GetOptions{})
	if err != nil {
		return err
	}
	for i, cond := range db1.Status.Conditions {
		if cond.Type == corev1.PodReady || cond.Type == corev1.ContainersReady {
			db1.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	if _, err := c.Kube.CoreV1().Pods("demo").UpdateStatus(ctx, db1, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if err := waitFor(ctx, o.timeout, north, "db.demo.svc.clusterset.local.", dns.TypeA, 2); err != nil {
		return err
	}
	dig(north, "db now has two ready pods", "db.demo.svc.clusterset.local", "A")

	step("live change 2: db is unexported from east and west")
	for _, n := range []string{"east", "west"} {
		if err := set.Get(n).MCS.MulticlusterV1beta1().ServiceExports("demo").Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	if err := waitForRcode(ctx, o.timeout, north, "db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError); err != nil {
		return err
	}
	dig(north, "db is gone from the clusterset", "db.demo.svc.clusterset.local", "A")

	step("the demo is running")
	fmt.Printf(`    Query it yourself, e.g.:
      dig @127.0.0.1 -p %d web.demo.svc.clusterset.local
      dig @127.0.0.1 -p %d _http._tcp.web.demo.svc.clusterset.local SRV
      kubectl --kubeconfig %s --context west get serviceimports,endpointslices -n demo
    (east, west, north answer on ports %d, %d, %d; logs in %s)
`, o.basePort+2, o.basePort, kubeconfig, o.basePort, o.basePort+1, o.basePort+2, dir)
	if !o.wait {
		return nil
	}
	fmt.Println("    Ctrl-C (or `make demo-down`) stops every process the demo started.")
	<-ctx.Done()
	return nil
}

// corefile is a member's: its CoreDNS on 127.0.0.1:port.
func corefile(kubeconfig, member string, port int) string {
	return fmt.Sprintf(`clusterset.local:%d in-addr.arpa:%d ip6.arpa:%d {
    bind 127.0.0.1
    errors
    mcs clusterset.local in-addr.arpa ip6.arpa {
        kubeconfig %s %s
    }
}
`, port, port, port, kubeconfig, member)
}

// podCIDRs are the members' pod ranges (kwok gives pods addresses from them).
var podCIDRs = map[string]string{"east": "10.10.0.0/24", "west": "10.20.0.0/24", "north": "10.30.0.0/24"}

// createWorkloads makes, in east and west, a Deployment web behind a
// ClusterIP Service and a StatefulSet db behind its headless governing
// Service (so per-pod DNS names come from the pods' hostnames), and exports
// both; north only imports.
func createWorkloads(ctx context.Context, set *cluster.Set) error {
	replicas := map[string]int32{"east": 2, "west": 1}
	for _, n := range names {
		c := set.Get(n)
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		r, ok := replicas[n]
		if !ok {
			fmt.Printf("    %-5s namespace demo, nothing exported\n", n)
			continue
		}
		for _, svc := range []struct {
			name, port string
			number     int32
			headless   bool
		}{{"web", "http", 80, false}, {"db", "postgres", 5432, true}} {
			labels := map[string]string{"app": svc.name}
			spec := corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: svc.port, Port: svc.number, Protocol: corev1.ProtocolTCP}}}
			if svc.headless {
				spec.ClusterIP = corev1.ClusterIPNone
			}
			if _, err := c.Kube.CoreV1().Services("demo").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc.name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
				return err
			}
			tmpl := corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: svc.name, Image: "example/" + svc.name,
					Ports: []corev1.ContainerPort{{Name: svc.port, ContainerPort: svc.number}}}}},
			}
			sel := &metav1.LabelSelector{MatchLabels: labels}
			kind := "Deployment"
			var err error
			if svc.headless {
				kind = "StatefulSet"
				_, err = c.Kube.AppsV1().StatefulSets("demo").Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: svc.name},
					Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(r), ServiceName: svc.name, Selector: sel, Template: tmpl}}, metav1.CreateOptions{})
			} else {
				_, err = c.Kube.AppsV1().Deployments("demo").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: svc.name},
					Spec: appsv1.DeploymentSpec{Replicas: ptr.To(r), Selector: sel, Template: tmpl}}, metav1.CreateOptions{})
			}
			if err != nil {
				return err
			}
			if _, err := c.MCS.MulticlusterV1beta1().ServiceExports("demo").Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: svc.name}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			fmt.Printf("    %-5s exported %-9s service %s (port %s/%d), a %s of %d\n", n, map[bool]string{false: "ClusterIP", true: "headless"}[svc.headless], svc.name, svc.port, svc.number, kind, r)
		}
	}
	return nil
}

// waitFor polls until name has exactly want records of qtype.
func waitFor(ctx context.Context, timeout time.Duration, addr, name string, qtype uint16, want int) error {
	return poll(ctx, timeout, func() error {
		r, err := query(addr, name, qtype)
		if err != nil {
			return err
		}
		n := 0
		for _, rr := range r.Answer {
			if rr.Header().Rrtype == qtype {
				n++
			}
		}
		if n != want {
			return fmt.Errorf("%s %s: %d records (%s), want %d", name, dns.TypeToString[qtype], n, dns.RcodeToString[r.Rcode], want)
		}
		return nil
	})
}

func waitForRcode(ctx context.Context, timeout time.Duration, addr, name string, qtype uint16, rcode int) error {
	return poll(ctx, timeout, func() error {
		r, err := query(addr, name, qtype)
		if err != nil {
			return err
		}
		if r.Rcode != rcode {
			return fmt.Errorf("%s: %s, want %s", name, dns.RcodeToString[r.Rcode], dns.RcodeToString[rcode])
		}
		return nil
	})
}

func poll(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not converged after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func query(addr, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, addr)
	return r, err
}

// dig prints real dig output for the query.
func dig(addr, what string, args ...string) {
	host, port, _ := net.SplitHostPort(addr)
	if what != "" {
		fmt.Printf("\n-- %s:\n", what)
	}
	full := append([]string{"@" + host, "-p", port, "+noall", "+comments", "+answer", "+authority", "+additional", "+nostats"}, args...)
	fmt.Printf("$ dig %s\n", strings.Join(slices.Concat([]string{"@" + host, "-p", port}, args), " "))
	cmd := exec.Command("dig", full...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		fmt.Printf("(dig failed: %v; is bind9-dnsutils installed? `make tools` installs it)\n", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// Keep the status line and the records; drop dig's banner noise.
		if line == "" || strings.HasPrefix(line, ";; Got answer") || strings.HasPrefix(line, ";; OPT") ||
			strings.HasPrefix(line, "; EDNS") || strings.HasPrefix(line, "; COOKIE") || strings.HasPrefix(line, ";; WARNING") ||
			strings.Contains(line, "mDNS query is leaked") { // dig's note on every .local name
			continue
		}
		fmt.Println("  " + line)
	}
}

// logTail returns the last n lines of the file at path, indented.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	lines = lines[max(0, len(lines)-n):]
	return "    " + strings.Join(lines, "\n    ")
}

// stopPrevious stops a demo still running from this folder, so that a
// second `make demo` works.
func stopPrevious(dir string) {
	raw, err := os.ReadFile(filepath.Join(dir, "demo.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != nil {
		return
	}
	step("stopping the demo already running (pid %d)", pid)
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for range 150 {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// Command conformance runs SIG-Multicluster's MCS conformance suite
// (hack/conformance/suite, unmodified) against mcs-dns: three member
// clusters with real control planes (kube-apiserver, etcd,
// kube-controller-manager, and kwok's simulated Node), mcs-importer, and
// one of our CoreDNS per member answering clusterset.local (mcs) and
// cluster.local (kubernetes). The suite's DNS specs run nslookup in a pod
// through `kubectl exec`: the simulated Node's exec server (test/cluster)
// runs it on this host with PATH starting at hack/conformance/bin, whose
// nslookup asks that member's CoreDNS. Specs
// that need packets to reach pods (label Connectivity) are skipped: there
// are no containers and no pod network.
//
// `make conformance` builds the suite and runs this once per VIP mode; it
// writes each run's Ginkgo JSON report and the suite's own report, and
// CONFORMANCE.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
	"github.com/mcs-dns/mcs-dns/test/stack"
)

type options struct {
	bin, suite, out, modes, markdown string
	timeout                          time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "folder holding the built coredns and mcs-importer")
	flag.StringVar(&o.suite, "suite", ".cache/conformance/conformance.test", "the built conformance suite")
	flag.StringVar(&o.out, "out", ".conformance", "folder for reports and logs")
	flag.StringVar(&o.modes, "vip-modes", "derived-service,clusterset-cidr", "comma-separated --vip-mode values to run the suite with")
	flag.StringVar(&o.markdown, "markdown", "CONFORMANCE.md", "summary to write")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "bound on one suite run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var runs []modeRun
	failed := false
	for _, mode := range strings.Split(o.modes, ",") {
		r, err := runMode(ctx, o, mode)
		if err != nil {
			fmt.Fprintf(os.Stderr, "conformance (%s): %v\n", mode, err)
			os.Exit(1)
		}
		runs = append(runs, r)
		failed = failed || r.count("failed") > 0
	}
	if err := os.WriteFile(o.markdown, []byte(markdown(runs)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("\nwrote %s\n", o.markdown)
	if failed {
		os.Exit(1)
	}
}

// modeRun is one suite run's results.
type modeRun struct {
	mode     string
	specs    []specResult
	duration time.Duration
}

type specResult struct {
	text, state, reason string
	labels              []string
}

func (r modeRun) count(state string) int {
	n := 0
	for _, s := range r.specs {
		if s.state == state {
			n++
		}
	}
	return n
}

// connectivityReason is printed and recorded for every Connectivity spec.
const connectivityReason = "needs packets to reach pods: the members' Nodes are kwok's (no containers, no pod network), so label Connectivity is filtered out"

func runMode(ctx context.Context, o options, mode string) (modeRun, error) {
	root, err := os.Getwd()
	if err != nil {
		return modeRun{}, err
	}
	out, err := filepath.Abs(filepath.Join(o.out, mode))
	if err != nil {
		return modeRun{}, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return modeRun{}, err
	}
	suite, err := filepath.Abs(o.suite)
	if err != nil {
		return modeRun{}, err
	}
	fmt.Printf("\n==> %s: starting three member clusters with control planes\n", mode)
	names := []string{"east", "west", "north"}
	ports := make([]int, len(names))
	specs := make([]cluster.Spec, len(names))
	for i, n := range names {
		if ports[i], err = procs.FindFreePort(); err != nil {
			return modeRun{}, err
		}
		specs[i] = cluster.Spec{Name: n, ControlPlane: true, Exec: &cluster.Exec{WorkDir: out, Env: map[string]string{
			"PATH":         filepath.Join(root, "hack/conformance/bin") + ":" + os.Getenv("PATH"),
			"MCS_DNS_PORT": strconv.Itoa(ports[i]),
		}}}
	}
	st, err := stack.Start(ctx, stack.Config{Members: specs, Dir: out,
		Bin: procs.Binaries{CoreDNS: filepath.Join(o.bin, "coredns"), Importer: filepath.Join(o.bin, "mcs-importer")}})
	if st != nil {
		defer st.Stop()
	}
	if err != nil {
		return modeRun{}, err
	}
	set, kubeconfig := st.Set, st.Kubeconfig

	args := st.ImporterArgs("", "--vip-mode", mode)
	if mode == "clusterset-cidr" {
		args.Extra = append(args.Extra, "--clusterset-cidr", "10.250.0.0/16,fd00:250::/112")
	}
	if _, err := st.StartImporter(args); err != nil {
		return modeRun{}, err
	}
	for i, n := range names {
		if _, err := st.StartCoreDNS(n, stack.CoreDNSOptions{Port: ports[i], Corefile: corefile, Ready: clustersetSOA}); err != nil {
			return modeRun{}, fmt.Errorf("CoreDNS for %s: %w", n, err)
		}
	}

	fmt.Printf("==> %s: running the suite (skipping label Connectivity: %s)\n", mode, connectivityReason)
	report := filepath.Join(out, "report.json")
	_ = os.Remove(report)
	sctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	cmd := exec.CommandContext(sctx, suite, "--kubeconfig", kubeconfig, "--contexts", strings.Join(names, ","),
		"--ginkgo.label-filter=!Connectivity", "--ginkgo.json-report="+report, "--ginkgo.v",
		"--project=mcs-dns", "--organization=mcs-dns", "--version="+mode)
	cmd.Dir = out
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	started := time.Now()
	runErr := cmd.Run()
	r := modeRun{mode: mode, duration: time.Since(started)}
	specsRun, err := readReport(report)
	if err != nil {
		for _, c := range set.Clusters {
			fmt.Fprint(os.Stderr, c.Logs())
		}
		return r, fmt.Errorf("suite: %v; report: %w", runErr, err)
	}
	r.specs = specsRun
	fmt.Printf("==> %s: %d passed, %d failed, %d skipped in %s (logs and reports in %s)\n", mode,
		r.count("passed"), r.count("failed"), r.count("skipped"), r.duration.Round(time.Second), out)
	return r, nil
}

// readReport reads a Ginkgo JSON report.
func readReport(path string) ([]specResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var reports []struct {
		SpecReports []struct {
			LeafNodeType             string
			LeafNodeText             string
			LeafNodeLabels           []string
			ContainerHierarchyLabels [][]string
			State                    string
			Failure                  struct{ Message string }
		}
	}
	if err := json.Unmarshal(data, &reports); err != nil {
		return nil, err
	}
	var out []specResult
	for _, rep := range reports {
		for _, s := range rep.SpecReports {
			if s.LeafNodeType != "It" {
				continue // suite set-up and tear-down nodes
			}
			labels := map[string]bool{}
			for _, ls := range append(s.ContainerHierarchyLabels, s.LeafNodeLabels) {
				for _, l := range ls {
					labels[l] = true
				}
			}
			r := specResult{text: s.LeafNodeText, state: s.State}
			for l := range labels {
				r.labels = append(r.labels, l)
			}
			sort.Strings(r.labels)
			switch {
			case s.State == "skipped" && labels["Connectivity"]:
				r.reason = connectivityReason
			case s.State == "skipped":
				r.reason = "skipped by the suite"
			case s.State != "passed":
				r.reason = firstLine(s.Failure.Message)
			}
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no specs in the report")
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].text < out[j].text })
	return out, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

func markdown(runs []modeRun) string {
	var b strings.Builder
	b.WriteString(`# MCS conformance

Generated by ` + "`make conformance`" + `: SIG-Multicluster's conformance suite
(` + "`hack/conformance/suite`" + `, an unmodified copy; see its README) run against
three member clusters with real control planes (kube-apiserver, etcd,
kube-controller-manager, and kwok's simulated Node), mcs-importer, and one of
our CoreDNS per member. The suite's DNS specs run ` + "`nslookup`" + ` in a pod
through ` + "`kubectl exec`" + `, which the simulated Node's exec server runs on the
host, where ` + "`hack/conformance/bin/nslookup`" + ` asks that member's CoreDNS. Specs labelled Connectivity are skipped: ` + connectivityReason + `.

`)
	failed := 0
	for _, r := range runs {
		failed += r.count("failed")
	}
	if failed == 0 {
		b.WriteString("Every spec that ran passed in every mode: none needed a reading of KEP-1645 other than ours.\n\n")
	} else {
		b.WriteString("Some specs failed: each row says how; a failure is a bug of ours until shown to be a disagreement between the suite and KEP-1645.\n\n")
	}
	for _, r := range runs {
		fmt.Fprintf(&b, "## `--vip-mode=%s`\n\n%d passed, %d failed, %d skipped (of %d), in %s.\n\n",
			r.mode, r.count("passed"), r.count("failed"), r.count("skipped"), len(r.specs), r.duration.Round(time.Second))
		b.WriteString("| spec | labels | result | why |\n| --- | --- | --- | --- |\n")
		for _, s := range r.specs {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", escape(s.text), strings.Join(s.labels, ", "), s.state, escape(s.reason))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func escape(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }

// corefile is a member's: clusterset.local (mcs) and cluster.local
// (kubernetes) on 127.0.0.1:port.
func corefile(kubeconfig, member string, port int) string {
	return fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s %s
        pods insecure
        labels !multicluster.kubernetes.io/source-cluster
        fallthrough in-addr.arpa ip6.arpa
    }
    mcs clusterset.local in-addr.arpa ip6.arpa {
        kubeconfig %s %s
    }
}
`, port, kubeconfig, member, kubeconfig, member)
}

// clustersetSOA waits until a CoreDNS answers for clusterset.local.
func clustersetSOA(ctx context.Context, c *stack.CoreDNS) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		m := new(dns.Msg)
		m.SetQuestion("clusterset.local.", dns.TypeSOA)
		cl := &dns.Client{Timeout: time.Second}
		if r, _, err := cl.ExchangeContext(ctx, m, c.Addr); err == nil && r.Rcode == dns.RcodeSuccess {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("no answer at %s within a minute", c.Addr)
}

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Results is everything measured; results.json is this.
type Results struct {
	Started      time.Time                      `json:"started"`
	Seconds      float64                        `json:"seconds"`
	Command      string                         `json:"command"`
	Machine      Machine                        `json:"machine"`
	Options      Options                        `json:"options"`
	Fixture      []FixtureLoad                  `json:"fixture"`
	Unavailable  map[string]string              `json:"unavailable"`
	Correctness  map[string]map[Kind]*KindCheck `json:"correctness"`
	Perf         []PerfRun                      `json:"perf_runs"`
	Summary      map[string]map[Kind]*PerfSum   `json:"perf_summary"`
	Ratios       map[string]map[Kind]*RatioSum  `json:"ratios"` // "a/b" -> kind -> per-round QPS ratios
	ProgLat      map[string]*ProgLat            `json:"programming_latency"`
	Startup      map[string]map[string]*Startup `json:"startup"` // size -> server
	RSSAfterLoad map[string][2]int64            `json:"rss_after_load"`
	Profiles     map[string][]string            `json:"profiles"`
	CPUShares    []*CPUShare                    `json:"cpu_shares,omitempty"` // per server and kind
	MemStats     map[string]map[string]float64  `json:"memstats_mib"`         // server@size -> Go runtime stats after sync
	Shaping      *ShapingResult                 `json:"shaping,omitempty"`
	Relist       map[string]*RelistResult       `json:"relist,omitempty"` // server -> its forced relist at the large size
	Importer     *ImporterResult                `json:"importer,omitempty"`
	MemberScale  []*MemberScaleResult           `json:"member_scale,omitempty"`
	GoBench      GoBench                        `json:"go_bench"`
	Targets      []Target                       `json:"targets"`
	Notes        []string                       `json:"notes"`
}

type Machine struct {
	CPU      string `json:"cpu"`
	Cores    int    `json:"cores"`
	MemTotal string `json:"mem_total"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
	DNSPerf  string `json:"dnsperf"`
	CoreDNS  string `json:"coredns"`
	// Commit is the repository's HEAD; Dirty lists uncommitted changes
	// under the paths built into the binaries (the numbers are for HEAD
	// plus those).
	Commit string   `json:"commit"`
	Dirty  []string `json:"dirty,omitempty"`
}

type FixtureLoad struct {
	Scale     int     `json:"scale"`
	Sizes     Sizes   `json:"sizes"`
	Objects   int     `json:"objects_created"`
	Endpoints int     `json:"endpoints"`
	Slices    int     `json:"endpointslices"`
	Seconds   float64 `json:"seconds"`
}

type KindCheck struct {
	OK         int    `json:"ok"`
	Total      int    `json:"total"`
	FirstError string `json:"first_error,omitempty"`
	TC         int    `json:"truncated_at_4096"`
	MaxSize    int    `json:"max_udp_size"`
	MaxAnswers int    `json:"max_answers"`
	MaxExtra   int    `json:"max_additional"`
	NegSOA     int    `json:"nxdomain_with_soa,omitempty"`
}

type PerfSum struct {
	QPS    float64 `json:"qps"`
	MeanMs float64 `json:"mean_ms"`
	P99Ms  float64 `json:"p99_ms"`
	Runs   int     `json:"runs"`
	Lost   int64   `json:"lost"`
}

// RatioSum summarizes the QPS ratio of two servers over the rounds: each
// round's ratio uses runs minutes apart, so it is steadier than the ratio
// of the medians on a shared, noisy machine.
type RatioSum struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Rounds []float64 `json:"rounds"`
}

type Startup struct {
	StartMs []float64 `json:"start_ms"`
	RSS     []int64   `json:"rss_bytes"`
	HWM     []int64   `json:"hwm_bytes"`
}

type GoBench struct {
	Lines []string `json:"lines"`
	Raw   string   `json:"-"`
	Error string   `json:"error,omitempty"`
}

// Target is one target next to what was measured.
type Target struct {
	What     string `json:"what"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Status   string `json:"status"` // met, missed, not measured
}

func newResults(o Options) *Results {
	r := &Results{
		Started:      time.Now(),
		Command:      strings.Join(os.Args, " "),
		Options:      o,
		Unavailable:  map[string]string{},
		Correctness:  map[string]map[Kind]*KindCheck{},
		Startup:      map[string]map[string]*Startup{},
		RSSAfterLoad: map[string][2]int64{},
		Profiles:     map[string][]string{},
		MemStats:     map[string]map[string]float64{},
	}
	r.Machine = machine()
	return r
}

func (r *Results) startup(size, id string) *Startup {
	if r.Startup[size] == nil {
		r.Startup[size] = map[string]*Startup{}
	}
	if r.Startup[size][id] == nil {
		r.Startup[size][id] = &Startup{}
	}
	return r.Startup[size][id]
}

func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				if _, v, ok := strings.Cut(line, ":"); ok {
					m.CPU = strings.TrimSpace(v)
					break
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				var kb int64
				fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "MemTotal:")), "%d", &kb)
				m.MemTotal = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("dnsperf", "-h").CombinedOutput(); err == nil || len(out) > 0 {
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "Version") {
				m.DNSPerf = strings.TrimSpace(line)
			}
		}
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "status", "--porcelain", "--", "plugin", "internal", "cmd", "importer").Output(); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasSuffix(l, "_test.go") {
				m.Dirty = append(m.Dirty, l)
			}
		}
	}
	return m
}

// summarize computes medians per server and kind.
func (r *Results) summarize() {
	r.Summary = map[string]map[Kind]*PerfSum{}
	if r.Shaping != nil {
		r.Shaping.summarize(r.Options.Rounds)
	}
	type key struct {
		id string
		k  Kind
	}
	qps, mean, p99 := map[key][]float64{}, map[key][]float64{}, map[key][]float64{}
	lost := map[key]int64{}
	for _, p := range r.Perf {
		k := key{p.Server, p.Kind}
		qps[k] = append(qps[k], p.QPS)
		mean[k] = append(mean[k], p.MeanMs)
		p99[k] = append(p99[k], p.P99Ms)
		lost[k] += p.Lost
	}
	r.Ratios = map[string]map[Kind]*RatioSum{}
	byRound := map[key]map[int]float64{}
	for _, p := range r.Perf {
		k := key{p.Server, p.Kind}
		if byRound[k] == nil {
			byRound[k] = map[int]float64{}
		}
		byRound[k][p.Round] = p.QPS
	}
	for _, pair := range [][2]string{{"a", "b"}, {"a", "c"}, {"b", "c"}} {
		name := pair[0] + "/" + pair[1]
		r.Ratios[name] = map[Kind]*RatioSum{}
		for _, kind := range append([]Kind{KindMix}, Kinds...) {
			x, y := byRound[key{pair[0], kind}], byRound[key{pair[1], kind}]
			var rs []float64
			for round := 1; round <= r.Options.Rounds; round++ {
				if x[round] > 0 && y[round] > 0 {
					rs = append(rs, x[round]/y[round])
				}
			}
			if len(rs) == 0 {
				continue
			}
			r.Ratios[name][kind] = &RatioSum{Median: median(rs), Min: slices.Min(rs), Max: slices.Max(rs), Rounds: rs}
		}
	}
	for k, v := range qps {
		if r.Summary[k.id] == nil {
			r.Summary[k.id] = map[Kind]*PerfSum{}
		}
		r.Summary[k.id][k.k] = &PerfSum{QPS: median(v), MeanMs: median(mean[k]), P99Ms: median(p99[k]), Runs: len(v), Lost: lost[k]}
	}
}

func (b *Bench) finish() int {
	r := b.Results
	r.Seconds = time.Since(r.Started).Seconds()
	r.summarize()
	r.Targets = r.targets()
	md := r.Markdown()
	if wd, err := os.Getwd(); err == nil {
		md = strings.ReplaceAll(md, wd+string(filepath.Separator), "") // paths relative to the repository
	}
	fmt.Println()
	fmt.Println(md)
	_ = os.WriteFile(filepath.Join(b.Out, "results.md"), []byte(md), 0o644)
	if j, err := json.MarshalIndent(r, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(b.Out, "results.json"), j, 0o644)
	}
	if b.Opt.Doc != "" {
		if err := updateDoc(b.Opt.Doc, md); err != nil {
			logf("not updating %s: %v", b.Opt.Doc, err)
		} else {
			logf("updated the latest results in %s", b.Opt.Doc)
		}
	}
	stamp := r.Started.UTC().Format("20060102T150405Z")
	_ = os.MkdirAll(filepath.Join(b.Out, "history"), 0o755)
	_ = os.WriteFile(filepath.Join(b.Out, "history", stamp+".md"), []byte(md), 0o644)
	logf("wrote %s and %s (%.0f s in all)", filepath.Join(b.Out, "results.md"), filepath.Join(b.Out, "results.json"), r.Seconds)
	return 0
}

// latestResults heads the section of the benchmarks document that holds
// the latest run's table.
const latestResults = "## Latest results"

// updateDoc replaces the "## Latest results" section of the Markdown file
// path, which runs to the end of the file, with md (its title dropped and
// its headings one level down), so that the document always shows one
// run's numbers as the bench wrote them.
func updateDoc(path, md string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(raw)
	i := strings.Index(doc, "\n"+latestResults+"\n")
	if i < 0 {
		return fmt.Errorf("no %q section", latestResults)
	}
	var body strings.Builder
	for n, line := range strings.Split(strings.TrimRight(md, "\n"), "\n") {
		if n == 0 && strings.HasPrefix(line, "# ") {
			continue // the table's own title
		}
		if strings.HasPrefix(line, "#") {
			line = "#" + line
		}
		body.WriteString(line + "\n")
	}
	out := doc[:i+1] + latestResults + "\n\nWritten by `make bench`: the run's `.bench/results.md`, unedited.\n" + body.String()
	return os.WriteFile(path, []byte(out), 0o644)
}

package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// WriteQueryFiles writes one dnsperf input file per kind and one for the
// mix, and returns their paths.
func WriteQueryFiles(dir string, s Sizes, mixLines int) (map[Kind]string, error) {
	r := rand.New(rand.NewPCG(3, 4))
	all := map[Kind][]Query{}
	files := map[Kind]string{}
	write := func(k Kind, qs []Query) error {
		path := filepath.Join(dir, "queries."+string(k)+".txt")
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		w := bufio.NewWriter(f)
		for _, q := range qs {
			fmt.Fprintf(w, "%s %s\n", q.Name, dns.TypeToString[q.Type])
		}
		if err := w.Flush(); err != nil {
			f.Close()
			return err
		}
		files[k] = path
		return f.Close()
	}
	for _, k := range Kinds {
		qs := s.AllQueries(k)
		r.Shuffle(len(qs), func(i, j int) { qs[i], qs[j] = qs[j], qs[i] })
		all[k] = qs
		if err := write(k, qs); err != nil {
			return nil, err
		}
	}
	var mix []Query
	for _, k := range Kinds {
		n := mixLines * MixWeights[k] / 100
		for i := range n {
			mix = append(mix, all[k][i%len(all[k])])
		}
	}
	r.Shuffle(len(mix), func(i, j int) { mix[i], mix[j] = mix[j], mix[i] })
	return files, write(KindMix, mix)
}

// PerfRun is one dnsperf run against one server.
type PerfRun struct {
	Server    string           `json:"server"`
	Kind      Kind             `json:"kind"`
	Round     int              `json:"round"`
	QPS       float64          `json:"qps"`
	MeanMs    float64          `json:"mean_ms"`
	P50Ms     float64          `json:"p50_ms"`
	P99Ms     float64          `json:"p99_ms"`
	Sent      int64            `json:"sent"`
	Completed int64            `json:"completed"`
	Lost      int64            `json:"lost"`
	Rcodes    map[string]int64 `json:"rcodes"`
	// RespSize is dnsperf's average response size in octets.
	RespSize int                `json:"avg_response_size,omitempty"`
	Extra    map[string]float64 `json:"-"`
}

// RunDNSPerf drives addr with file for d, with EDNS0 (-e), and parses
// dnsperf's summary; the per-query latencies (-v) give the percentiles.
func RunDNSPerf(ctx context.Context, tmpDir, port, file string, d time.Duration, extra []string) (PerfRun, error) {
	return runDNSPerf(ctx, tmpDir, port, file, d, true, extra)
}

// runDNSPerf is RunDNSPerf with or without EDNS0: without it, a UDP answer
// has 512 octets at most.
func runDNSPerf(ctx context.Context, tmpDir, port, file string, d time.Duration, edns bool, extra []string) (PerfRun, error) {
	out := filepath.Join(tmpDir, "dnsperf.out")
	f, err := os.Create(out)
	if err != nil {
		return PerfRun{}, err
	}
	defer os.Remove(out)
	args := []string{"-s", "127.0.0.1", "-p", port, "-d", file, "-l", strconv.Itoa(int(d.Seconds())), "-v", "-t", "1"}
	if edns {
		args = append(args, "-e")
	}
	args = append(args, extra...)
	cmd := exec.CommandContext(ctx, "dnsperf", args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Run()
	f.Close()
	if err != nil {
		b, _ := os.ReadFile(out)
		return PerfRun{}, fmt.Errorf("dnsperf: %w: %s", err, lastLines(string(b), 5))
	}
	return parseDNSPerf(out)
}

func parseDNSPerf(path string) (PerfRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return PerfRun{}, err
	}
	defer f.Close()
	run := PerfRun{Rcodes: map[string]int64{}}
	lat := make([]float64, 0, 1<<18)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "> ") {
			// > NOERROR name type latency
			fs := strings.Fields(line)
			if len(fs) >= 5 {
				run.Rcodes[fs[1]]++
				if v, err := strconv.ParseFloat(fs[len(fs)-1], 64); err == nil {
					lat = append(lat, v)
				}
			}
			continue
		}
		line = strings.TrimSpace(line)
		field := func(prefix string) (string, bool) {
			if !strings.HasPrefix(line, prefix) {
				return "", false
			}
			fs := strings.Fields(strings.TrimPrefix(line, prefix))
			if len(fs) == 0 {
				return "", false
			}
			return fs[0], true
		}
		if strings.HasPrefix(line, "Average packet size:") {
			var req int
			_, _ = fmt.Sscanf(line, "Average packet size: request %d, response %d", &req, &run.RespSize)
		}
		if v, ok := field("Queries sent:"); ok {
			run.Sent, _ = strconv.ParseInt(v, 10, 64)
		} else if v, ok := field("Queries completed:"); ok {
			run.Completed, _ = strconv.ParseInt(v, 10, 64)
		} else if v, ok := field("Queries lost:"); ok {
			run.Lost, _ = strconv.ParseInt(v, 10, 64)
		} else if v, ok := field("Queries per second:"); ok {
			run.QPS, _ = strconv.ParseFloat(v, 64)
		} else if v, ok := field("Average Latency (s):"); ok {
			s, _ := strconv.ParseFloat(v, 64)
			run.MeanMs = s * 1000
		}
	}
	if err := sc.Err(); err != nil {
		return run, err
	}
	if run.QPS == 0 {
		return run, fmt.Errorf("no 'Queries per second' in dnsperf output")
	}
	slices.Sort(lat)
	run.P50Ms = percentile(lat, 0.50) * 1000
	run.P99Ms = percentile(lat, 0.99) * 1000
	return run, nil
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func percentileDur(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

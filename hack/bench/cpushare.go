package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// CPUShare says where one DNS server's CPU went while dnsperf drove it
// with one kind of query: each CPU sample goes to the innermost frame of
// its stack that belongs to one of the parts below (so the network writes
// the DNS library makes count as the library's, and those our plugin
// makes through its own writer count as ours); samples with none of them
// (the garbage collector, the scheduler) are the runtime's.
type CPUShare struct {
	Server string `json:"server"`
	Kind   Kind   `json:"kind"`
	// Seconds of CPU sampled over the run.
	Seconds float64 `json:"seconds"`
	// Shares of Seconds, 0..1.
	Ours    float64 `json:"ours"`    // this module: plugin/mcs and internal/*
	CoreDNS float64 `json:"coredns"` // CoreDNS's server, plugin chain and other plugins
	DNSLib  float64 `json:"dnslib"`  // github.com/miekg/dns: reading, parsing, writing
	Runtime float64 `json:"runtime"` // GC, scheduler, and what no part above called
}

// shareParts are the parts of CPUShare in the order a stack's frames are
// matched against them.
var shareParts = []struct {
	prefix string
	part   func(*CPUShare) *float64
}{
	{"github.com/mcs-dns/mcs-dns/", func(s *CPUShare) *float64 { return &s.Ours }},
	{"github.com/coredns/", func(s *CPUShare) *float64 { return &s.CoreDNS }},
	{"github.com/miekg/dns", func(s *CPUShare) *float64 { return &s.DNSLib }},
}

// cpuShareOf reads a CPU profile and splits its samples as CPUShare says.
func cpuShareOf(path string) (*CPUShare, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, err
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("%s: no cpu samples", path)
	}
	s := &CPUShare{}
	var total float64
	for _, smp := range p.Sample {
		v := float64(smp.Value[idx])
		total += v
		dst := &s.Runtime
	frames:
		for _, loc := range smp.Location { // innermost first
			for _, ln := range loc.Line {
				if ln.Function == nil {
					continue
				}
				for _, sp := range shareParts {
					if strings.HasPrefix(ln.Function.Name, sp.prefix) {
						dst = sp.part(s)
						break frames
					}
				}
			}
		}
		*dst += v
	}
	if total == 0 {
		return nil, fmt.Errorf("%s: no cpu samples", path)
	}
	for _, x := range []*float64{&s.Ours, &s.CoreDNS, &s.DNSLib, &s.Runtime} {
		*x /= total
	}
	s.Seconds = time.Duration(total).Seconds()
	return s, nil
}

// kindShare profiles srv's CPU while dnsperf drives it with one kind.
func (b *Bench) kindShare(ctx context.Context, srv *Server, k Kind, file string, extra []string) (*CPUShare, error) {
	secs := int(b.Opt.Duration.Seconds())
	path := filepath.Join(b.Out, "profiles", fmt.Sprintf("%s.%s.cpu.pprof", srv.ID, k))
	errc := make(chan error, 1)
	go func() {
		errc <- fetch(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", srv.Pprof, secs), path)
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := RunDNSPerf(ctx, filepath.Join(b.Out, "run"), strconv.Itoa(srv.Port), file, b.Opt.Duration, extra); err != nil {
		<-errc
		return nil, err
	}
	if err := <-errc; err != nil {
		return nil, err
	}
	s, err := cpuShareOf(path)
	if err != nil {
		return nil, err
	}
	s.Server, s.Kind = srv.ID, k
	return s, nil
}

// cpuShareMarkdown is the table of where each server's CPU went per kind.
func (r *Results) cpuShareMarkdown(p func(string, ...any)) {
	if len(r.CPUShares) == 0 {
		return
	}
	p("\n### Where the CPU goes, per kind (one CPU profile of each server under each kind, after the rounds)\n\n")
	p("Each sample goes to the innermost frame of its stack in this module (ours: the mcs plugin and internal/*; for b and c, none), CoreDNS (its server, plugin chain and other plugins), or miekg/dns (reading, parsing and writing messages, with the network calls it makes); the rest is the Go runtime (GC, scheduler). ")
	p("\n\n")
	p("| kind | server | CPU sampled | ours | CoreDNS | miekg/dns | runtime |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, s := range r.CPUShares {
		p("| %s | %s | %.2f s | %.0f%% | %.0f%% | %.0f%% | %.0f%% |\n", s.Kind, s.Server, s.Seconds, 100*s.Ours, 100*s.CoreDNS, 100*s.DNSLib, 100*s.Runtime)
	}
}

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCPUShareOf: each sample goes to the innermost frame of a known part,
// whatever runtime frames lie under it; a stack with none is the runtime's.
func TestCPUShareOf(t *testing.T) {
	fns := map[string]*profile.Function{}
	var locs []*profile.Location
	loc := func(names ...string) *profile.Location {
		l := &profile.Location{ID: uint64(len(locs) + 1)}
		for _, n := range names {
			f := fns[n]
			if f == nil {
				f = &profile.Function{ID: uint64(len(fns) + 1), Name: n}
				fns[n] = f
			}
			l.Line = append(l.Line, profile.Line{Function: f})
		}
		return l
	}
	stack := func(names ...string) []*profile.Location { // innermost first
		var out []*profile.Location
		for _, n := range names {
			l := loc(n)
			locs = append(locs, l)
			out = append(out, l)
		}
		return out
	}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10_000_000,
		Sample: []*profile.Sample{
			// A write our plugin makes: the syscall is ours.
			{Value: []int64{1, 40_000_000}, Location: stack("syscall.write", "github.com/mcs-dns/mcs-dns/plugin/mcs.(*writer).Write", "github.com/coredns/coredns/core/dnsserver.(*Server).ServeDNS", "github.com/miekg/dns.(*Server).serveUDP")},
			// Reading a message: the library's.
			{Value: []int64{1, 30_000_000}, Location: stack("runtime.mallocgc", "github.com/miekg/dns.(*Msg).Unpack", "github.com/miekg/dns.(*Server).serveUDP")},
			// The plugin chain.
			{Value: []int64{1, 20_000_000}, Location: stack("github.com/coredns/coredns/plugin.NextOrFailure", "github.com/coredns/coredns/core/dnsserver.(*Server).ServeDNS")},
			// The garbage collector.
			{Value: []int64{1, 10_000_000}, Location: stack("runtime.gcBgMarkWorker")},
		},
	}
	p.Location = locs
	for _, f := range fns {
		p.Function = append(p.Function, f)
	}
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, p.Write(f))
	require.NoError(t, f.Close())

	s, err := cpuShareOf(path)
	require.NoError(t, err)
	assert.InDelta(t, 0.1, s.Seconds, 1e-9)
	assert.InDelta(t, 0.4, s.Ours, 1e-9)
	assert.InDelta(t, 0.3, s.DNSLib, 1e-9)
	assert.InDelta(t, 0.2, s.CoreDNS, 1e-9)
	assert.InDelta(t, 0.1, s.Runtime, 1e-9)
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mcs-dns/mcs-dns/test/procs"
)

// Server is one of the three CoreDNS configurations, one binary.
type Server struct {
	ID    string // a, b or c
	Label string
	Port  int
	Pprof int
	Proc  *procs.Process
	Conf  string
}

// Addr is the server's DNS address.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// ServerIDs in the order they alternate within a round.
var ServerIDs = []string{"a", "b", "c"}

var serverLabels = map[string]string{
	"a": "mcs",
	"b": "kubernetes multicluster (peer)",
	"c": "whoami (ceiling)",
	// a+ is a with the answer-shaping options on: the shaping phase, and
	// start-up and RSS.
	"a+": "mcs, shaped (" + shapedOptions + ")",
}

// shapedOptions are the answer-shaping options of a+; east is the first
// source cluster of every headless import of the fixture, and the second
// (west) is in east's region (see regionOf), so that local-first answers
// have their tiers: half of each answer local, the rest in the region
// (and, with -clusters 3 or more, the third cluster's in another region).
const shapedOptions = "cluster_id east, region " + benchRegion + ", locality local-first, rotate"

// benchUDPSize is the EDNS0 buffer the bench's queries advertise.
const benchUDPSize = 4096

func corefile(id string, port, pprof int, kubeconfig, context string) string {
	var body string
	switch id {
	// a and a+ answer up to the 4096-octet buffer the bench's queries
	// advertise (max_udp_size), as b does: the default 1232 cap would
	// truncate the big answers the phases compare and check.
	case "a":
		body = fmt.Sprintf("    mcs clusterset.local {\n        kubeconfig %s %s\n        max_udp_size %d\n    }\n", kubeconfig, context, benchUDPSize)
	case "a+":
		body = fmt.Sprintf("    mcs clusterset.local {\n        kubeconfig %s %s\n        max_udp_size %d\n        cluster_id %s\n        region %s\n        locality local-first\n        rotate\n    }\n", kubeconfig, context, benchUDPSize, clusterID(0), benchRegion)
	case "b":
		body = fmt.Sprintf("    kubernetes cluster.local clusterset.local {\n        kubeconfig %s %s\n        multicluster clusterset.local\n    }\n", kubeconfig, context)
	case "c":
		body = "    whoami\n"
	}
	// No cache, no log: the plugin itself is what is measured. pprof only
	// listens on its own HTTP port; it is not in the query path.
	return fmt.Sprintf(".:%d {\n%s    pprof 127.0.0.1:%d\n}\n", port, body, pprof)
}

// Bench holds what every phase needs.
type Bench struct {
	Opt        Options
	CoreDNS    string // binary
	Importer   string // binary, "" if none
	Kubeconfig string
	Context    string
	Out        string
	Results    *Results
	// goodKinds: per server, the kinds it answered right at steady state.
	goodKinds map[string]map[Kind]bool
	// profilesMu guards Results.Profiles where goroutines add to it.
	profilesMu sync.Mutex
}

// StartServer starts server id with a fresh Corefile on free ports.
func (b *Bench) StartServer(id, tag string) (*Server, error) {
	port, err := procs.FindFreePort()
	if err != nil {
		return nil, err
	}
	pp, err := procs.FindFreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{ID: id, Label: serverLabels[id], Port: port, Pprof: pp}
	s.Conf = filepath.Join(b.Out, "run", fmt.Sprintf("Corefile.%s.%s", id, tag))
	if err := os.WriteFile(s.Conf, []byte(corefile(id, port, pp, b.Kubeconfig, b.Context)), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(b.Out, "logs", fmt.Sprintf("coredns.%s.%s.log", id, tag))
	s.Proc, err = children.Launch("coredns-"+id, logPath, b.CoreDNS, "-conf", s.Conf)
	return s, err
}

// StopServer stops it.
func (b *Bench) StopServer(s *Server) {
	if s != nil {
		_ = children.Stop(s.Proc)
	}
}

// WaitAnswering polls sample on s until every answer is right, and returns
// the time from the process's start. For the ceiling (c) any answer counts.
func (b *Bench) WaitAnswering(ctx context.Context, s *Server, sample []Query, timeout time.Duration) (time.Duration, error) {
	deadline := s.Proc.Started.Add(timeout)
	if s.ID == "c" {
		if err := procs.WaitAnswering(ctx, s.Proc, s.Addr(), 3*time.Millisecond, time.Until(deadline)); err != nil {
			return 0, fmt.Errorf("coredns (%s): %w: %s", s.Label, err, lastLines(s.Proc.Output(), 3))
		}
		return time.Since(s.Proc.Started), nil
	}
	ask := NewAsker(s.Addr(), 250*time.Millisecond)
	var last []Result
	for {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if s.Proc.Exited() {
			return 0, fmt.Errorf("coredns (%s) exited: %s", s.Label, lastLines(s.Proc.Output(), 3))
		}
		last = ask.CheckAll(ctx, sample, 16)
		if allOK(last) {
			return time.Since(s.Proc.Started), nil
		}
		if time.Now().After(deadline) {
			bad := 0
			var first string
			for i, r := range last {
				if !r.OK {
					bad++
					if first == "" {
						first = sample[i].String() + ": " + r.Detail
					}
				}
			}
			return 0, fmt.Errorf("%s not answering all of %d sample names after %s (%d wrong, e.g. %s)", s.Label, len(sample), timeout, bad, first)
		}
		if err := waitCtx(ctx, 3*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

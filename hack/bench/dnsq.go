package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Kind is a kind of query of the workload.
type Kind string

const (
	KindMix    Kind = "mix"
	KindCIPA   Kind = "clustersetip-A"
	KindHLA    Kind = "headless-A"
	KindEPA    Kind = "endpoint-A"
	KindCIPSRV Kind = "clustersetip-SRV"
	KindHLSRV  Kind = "headless-SRV"
	KindNX     Kind = "nxdomain"
)

// Kinds are the single kinds, in report order.
var Kinds = []Kind{KindCIPA, KindHLA, KindEPA, KindCIPSRV, KindHLSRV, KindNX}

// MixWeights is the realistic mix of query kinds, in percent.
var MixWeights = map[Kind]int{KindCIPA: 35, KindHLA: 15, KindEPA: 10, KindCIPSRV: 10, KindHLSRV: 10, KindNX: 20}

// Query is one question and the answer the MCS DNS spec requires.
type Query struct {
	Kind  Kind
	Name  string
	Type  uint16
	Rcode int
	// Want is the answer section as a sorted set of "A ip" / "SRV port target".
	Want []string
}

func (q Query) String() string { return q.Name + " " + dns.TypeToString[q.Type] }

// Queries of the fixture, by index (pure functions of the sizes).

func (s Sizes) qCIPA(i int) Query {
	return Query{KindCIPA, s.cipFQDN(i), dns.TypeA, dns.RcodeSuccess, []string{"A " + cipIP(i).String()}}
}

func (s Sizes) qCIPSRV(i int) Query {
	return Query{KindCIPSRV, s.cipSRV(i), dns.TypeSRV, dns.RcodeSuccess, []string{fmt.Sprintf("SRV %d %s", cipPort, s.cipFQDN(i))}}
}

func (s Sizes) qHLA(j int) Query {
	var want []string
	for c := 0; c < s.Clusters; c++ {
		for k := 0; k < s.Endpoints; k++ {
			want = append(want, "A "+s.epIP(j, c, k).String())
		}
	}
	slices.Sort(want)
	return Query{KindHLA, s.hlFQDN(j), dns.TypeA, dns.RcodeSuccess, want}
}

func (s Sizes) qHLSRV(j int) Query {
	var want []string
	for c := 0; c < s.Clusters; c++ {
		for k := 0; k < s.Endpoints; k++ {
			want = append(want, fmt.Sprintf("SRV %d %s", hlPort, s.epFQDN(j, c, k)))
		}
	}
	slices.Sort(want)
	return Query{KindHLSRV, s.hlSRV(j), dns.TypeSRV, dns.RcodeSuccess, want}
}

func (s Sizes) qEPA(j, c, k int) Query {
	return Query{KindEPA, s.epFQDN(j, c, k), dns.TypeA, dns.RcodeSuccess, []string{"A " + s.epIP(j, c, k).String()}}
}

func (s Sizes) qNX(i int) Query {
	return Query{KindNX, s.nxFQDN(i), dns.TypeA, dns.RcodeNameError, nil}
}

// AllQueries returns every name of one kind (for the dnsperf files).
func (s Sizes) AllQueries(k Kind) []Query {
	var out []Query
	switch k {
	case KindCIPA:
		for i := range s.Imports {
			out = append(out, s.qCIPA(i))
		}
	case KindCIPSRV:
		for i := range s.Imports {
			out = append(out, s.qCIPSRV(i))
		}
	case KindHLA:
		for j := range s.Headless {
			out = append(out, s.qHLA(j))
		}
	case KindHLSRV:
		for j := range s.Headless {
			out = append(out, s.qHLSRV(j))
		}
	case KindEPA:
		for j := range s.Headless {
			for c := range s.Clusters {
				for e := range s.Endpoints {
					out = append(out, s.qEPA(j, c, e))
				}
			}
		}
	case KindNX:
		for i := range max(s.Imports, 1000) {
			out = append(out, s.qNX(i))
		}
	}
	return out
}

// Sample returns, per kind, the names an informer sees last (the last
// service of every namespace, in list order) plus random others: the
// set polled to decide that a server answers every name.
func (s Sizes) Sample(perKind int, seed uint64) []Query {
	r := rand.New(rand.NewPCG(seed, 7))
	var out []Query
	lastCIP := map[string]int{}
	for i := range s.Imports {
		lastCIP[s.cipNS(i)] = i
	}
	lastHL := map[string]int{}
	for j := range s.Headless {
		lastHL[s.hlNS(j)] = j
	}
	for _, i := range lastCIP {
		out = append(out, s.qCIPA(i), s.qCIPSRV(i))
	}
	for _, j := range lastHL {
		out = append(out, s.qHLA(j), s.qHLSRV(j), s.qEPA(j, s.Clusters-1, s.Endpoints-1))
	}
	for range perKind {
		if s.Imports > 0 {
			i := r.IntN(s.Imports)
			out = append(out, s.qCIPA(i), s.qCIPSRV(i))
		}
		if s.Headless > 0 {
			j := r.IntN(s.Headless)
			out = append(out, s.qHLA(j), s.qHLSRV(j), s.qEPA(j, r.IntN(s.Clusters), r.IntN(s.Endpoints)))
		}
		out = append(out, s.qNX(r.IntN(max(s.Imports, 1000))))
	}
	return out
}

// Result of asking one query.
type Result struct {
	OK     bool
	Detail string
	TC     bool // the UDP answer (EDNS0 4096) was truncated
	Size   int  // UDP answer size in bytes
	NAns   int  // UDP answer records
	NExtra int  // UDP additional records (without OPT)
	SOA    bool // negative answer carried an SOA in the authority section
}

// Asker sends queries over UDP with EDNS0 (4096), like dnsperf -e, and
// falls back to TCP on TC like a stub resolver.
type Asker struct {
	Addr    string
	Timeout time.Duration
	udp     *dns.Client
	tcp     *dns.Client
}

func NewAsker(addr string, timeout time.Duration) *Asker {
	return &Asker{Addr: addr, Timeout: timeout,
		udp: &dns.Client{Net: "udp", Timeout: timeout, UDPSize: 4096},
		tcp: &dns.Client{Net: "tcp", Timeout: timeout}}
}

func newMsg(name string, t uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, t)
	m.RecursionDesired = false
	m.SetEdns0(4096, false)
	return m
}

// Check asks q and compares the answer with what the spec requires.
func (a *Asker) Check(q Query) Result {
	r, _, err := a.udp.Exchange(newMsg(q.Name, q.Type), a.Addr)
	if err != nil {
		return Result{Detail: "error: " + err.Error()}
	}
	res := Result{TC: r.Truncated, NAns: len(r.Answer)}
	r.Compress = true // as sent: the size on the wire
	if packed, err := r.Pack(); err == nil {
		res.Size = len(packed)
	}
	for _, rr := range r.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			res.NExtra++
		}
	}
	if r.Truncated {
		tr, _, err := a.tcp.Exchange(newMsg(q.Name, q.Type), a.Addr)
		if err != nil {
			res.Detail = "TC and TCP error: " + err.Error()
			return res
		}
		r = tr
	}
	for _, rr := range r.Ns {
		if rr.Header().Rrtype == dns.TypeSOA {
			res.SOA = true
		}
	}
	if r.Rcode != q.Rcode {
		res.Detail = fmt.Sprintf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[q.Rcode])
		return res
	}
	got := answerSet(r, q.Type)
	if !slices.Equal(got, q.Want) {
		res.Detail = fmt.Sprintf("answer %s, want %s", short(got), short(q.Want))
		return res
	}
	res.OK = true
	return res
}

func answerSet(r *dns.Msg, t uint16) []string {
	var got []string
	for _, rr := range r.Answer {
		switch v := rr.(type) {
		case *dns.A:
			if t == dns.TypeA {
				got = append(got, "A "+v.A.String())
			}
		case *dns.SRV:
			if t == dns.TypeSRV {
				got = append(got, fmt.Sprintf("SRV %d %s", v.Port, strings.ToLower(v.Target)))
			}
		default:
			got = append(got, dns.TypeToString[rr.Header().Rrtype])
		}
	}
	slices.Sort(got)
	got = slices.Compact(got)
	return got
}

func short(s []string) string {
	if len(s) <= 3 {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... (%d records)", s[:3], len(s))
}

// CheckAll asks every query with a few in parallel and returns the results in order.
func (a *Asker) CheckAll(ctx context.Context, qs []Query, par int) []Result {
	out := make([]Result, len(qs))
	var wg sync.WaitGroup
	ch := make(chan int)
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ch {
				out[i] = a.Check(qs[i])
			}
		}()
	}
	for i := range qs {
		if ctx.Err() != nil {
			break
		}
		ch <- i
	}
	close(ch)
	wg.Wait()
	return out
}

func allOK(rs []Result) bool {
	for _, r := range rs {
		if !r.OK {
			return false
		}
	}
	return true
}

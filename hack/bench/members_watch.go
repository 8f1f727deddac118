package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
	"github.com/mcs-dns/mcs-dns/test/cluster"
)

func (w *scaleWatch) stop() {
	for _, f := range w.factories {
		f.Shutdown()
	}
}

// startScaleWatch watches member c's (index i) imports, mirrored slices
// and derived Services in scaleNS, keeping counts, and tells churn of the
// addresses its mirrored slices show.
func startScaleWatch(ctx context.Context, c *cluster.Cluster, i int, churn *churnSeen) (*scaleWatch, error) {
	w := &scaleWatch{}
	kf := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithNamespace(scaleNS))
	mf := mcsinformers.NewSharedInformerFactoryWithOptions(c.MCS, 0, mcsinformers.WithNamespace(scaleNS))
	w.factories = []interface{ Shutdown() }{kf, mf}
	count := func(n *atomic.Int64, match func(any) bool) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) {
				if match(o) {
					n.Add(1)
				}
			},
			UpdateFunc: func(old, o any) {
				switch was, is := match(old), match(o); {
				case is && !was:
					n.Add(1)
				case was && !is:
					n.Add(-1)
				}
			},
			DeleteFunc: func(o any) {
				if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
					o = d.Obj
				}
				if match(o) {
					n.Add(-1)
				}
			},
		}
	}
	always := func(any) bool { return true }
	imps := mf.Multicluster().V1beta1().ServiceImports().Informer()
	if _, err := imps.AddEventHandler(count(&w.imports, always)); err != nil {
		return nil, err
	}
	if _, err := imps.AddEventHandler(count(&w.withVIP, func(o any) bool {
		si, ok := o.(*mcsv1beta1.ServiceImport)
		return ok && (si.Spec.Type == mcsv1beta1.ClusterSetIP && len(si.Spec.IPs) > 0)
	})); err != nil {
		return nil, err
	}
	sliceInf := kf.Discovery().V1().EndpointSlices().Informer()
	mirrored := func(o any) bool {
		s, ok := o.(*discoveryv1.EndpointSlice)
		return ok && s.Labels[mcsapi.LabelManagedBy] == mcsapi.ManagedByImporter
	}
	if _, err := sliceInf.AddEventHandler(count(&w.slices, mirrored)); err != nil {
		return nil, err
	}
	seen := func(o any) {
		if !mirrored(o) {
			return
		}
		for _, ep := range o.(*discoveryv1.EndpointSlice).Endpoints {
			for _, a := range ep.Addresses {
				if strings.HasPrefix(a, "10.250.") {
					churn.seen(a, i, time.Now())
				}
			}
		}
	}
	if _, err := sliceInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }}); err != nil {
		return nil, err
	}
	svcInf := kf.Core().V1().Services().Informer()
	if _, err := svcInf.AddEventHandler(count(&w.derived, func(o any) bool {
		s, ok := o.(*corev1.Service)
		return ok && s.Labels[mcsapi.LabelDerivedFor] != ""
	})); err != nil {
		return nil, err
	}
	kf.Start(ctx.Done())
	mf.Start(ctx.Done())
	for _, ok := range kf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("%s: watch did not sync", c.Name)
		}
	}
	for _, ok := range mf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("%s: watch did not sync", c.Name)
		}
	}
	return w, nil
}

// churnSeen records, per churn address, when its change was acknowledged
// and when each member first showed it.
type churnSeen struct {
	mu      sync.Mutex
	members int
	at      map[string]time.Time
	by      map[string]map[int]time.Time
	early   map[string]map[int]time.Time // seen before expect (the watch was quicker than the ack)
}

func newChurnSeen(members int) *churnSeen {
	return &churnSeen{members: members, at: map[string]time.Time{}, by: map[string]map[int]time.Time{}, early: map[string]map[int]time.Time{}}
}

func (c *churnSeen) expect(addr string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at[addr] = at
	if c.by[addr] == nil {
		c.by[addr] = map[int]time.Time{}
	}
	for i, t := range c.early[addr] {
		c.by[addr][i] = t
	}
}

func (c *churnSeen) seen(addr string, member int, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.by[addr]
	if m == nil {
		if c.early[addr] == nil {
			c.early[addr] = map[int]time.Time{}
		}
		m = c.early[addr]
	}
	if _, ok := m[member]; !ok {
		m[member] = t
	}
}

// wait waits up to limit for every change to reach every member and
// returns the latencies to the farthest member and how many did not.
func (c *churnSeen) wait(ctx context.Context, limit time.Duration) ([]time.Duration, int) {
	deadline := time.Now().Add(limit)
	for {
		c.mu.Lock()
		done := true
		for a := range c.at {
			done = done && len(c.by[a]) == c.members
		}
		c.mu.Unlock()
		if done || time.Now().After(deadline) || waitCtx(ctx, 50*time.Millisecond) != nil {
			break
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var lat []time.Duration
	unseen := 0
	for a, at := range c.at {
		if len(c.by[a]) < c.members {
			unseen++
			continue
		}
		var last time.Time
		for _, t := range c.by[a] {
			if t.After(last) {
				last = t
			}
		}
		lat = append(lat, max(0, last.Sub(at)))
	}
	return lat, unseen
}

// procCPUSeconds is the user and system CPU time of process pid.
func procCPUSeconds(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces: fields start after its ')'.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100, nil // USER_HZ is 100 on Linux
}

// watchCount sums the API servers' open WATCH requests.
func watchCount(ctx context.Context, set *cluster.Set) (int, error) {
	total := 0
	err := apiMetric(ctx, set, "apiserver_longrunning_requests", func(_ *cluster.Cluster, labels string, v float64) {
		if label(labels, "verb") == "WATCH" {
			total += int(v)
		}
	})
	return total, err
}

// apiWritesSince sums the writes to the resources the importer writes
// (the API server's own, such as the IPAddress objects of the VIPs it
// allocates, are left out).
func apiWritesSince(before, after map[string]int64) int64 {
	var n int64
	for k, v := range after {
		_, res, _ := strings.Cut(k, "/")
		switch strings.SplitN(res, "/", 2)[0] {
		case "serviceimports", "serviceexports", "endpointslices", "services":
			n += v - before[k]
		}
	}
	return n
}

// reset forgets every change, for another churn run.
func (c *churnSeen) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.by, c.early = map[string]time.Time{}, map[string]map[int]time.Time{}, map[string]map[int]time.Time{}
}

// split returns, for the changes every member but one (member) showed,
// the latency to the farthest of the others, and for those member showed,
// the latency to it; unseen counts changes some other member never showed.
func (c *churnSeen) split(member int) (others, own []time.Duration, unseen int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for a, at := range c.at {
		var last time.Time
		n := 0
		for i, t := range c.by[a] {
			if i == member {
				own = append(own, max(0, t.Sub(at)))
				continue
			}
			n++
			if t.After(last) {
				last = t
			}
		}
		if n < c.members-1 {
			unseen++
			continue
		}
		others = append(others, max(0, last.Sub(at)))
	}
	return others, own, unseen
}

// selfCPUSeconds is this process's CPU time (user and system) so far.
func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

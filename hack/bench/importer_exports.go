package main

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/test/cluster"
)

func svcName(i int) string { return fmt.Sprintf("exp-%04d", i) }

// epIP is the address of export i's one endpoint.
func epIP(i int) string { return addrAdd(mustAddr("10.200.0.0"), uint32(i+1)).String() }

// createExportedServices creates n Services, each with one ready endpoint,
// in ns of the loader's cluster.
func createExportedServices(ctx context.Context, loader *Loader, ns string, n int, headless bool, workers int) ([]*corev1.Service, []*discoveryv1.EndpointSlice, error) {
	svcs, slices := make([]*corev1.Service, n), make([]*discoveryv1.EndpointSlice, n)
	svcSpec := corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: portName, Port: cipPort, Protocol: corev1.ProtocolTCP}}}
	if headless {
		svcSpec.ClusterIP = corev1.ClusterIPNone
	}
	var jobs []func(context.Context) error
	for i := range n {
		jobs = append(jobs, func(ctx context.Context) error {
			svc, err := loader.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: svcName(i)},
				Spec:       svcSpec,
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				svc, err = loader.Kube.CoreV1().Services(ns).Get(ctx, svcName(i), metav1.GetOptions{})
			}
			if err != nil {
				return err
			}
			svcs[i] = svc
			slice, err := loader.Kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{Name: svcName(i) + "-1", Labels: map[string]string{
					discoveryv1.LabelServiceName: svcName(i), discoveryv1.LabelManagedBy: "bench.mcs-dns.io"}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
				Endpoints: []discoveryv1.Endpoint{{Addresses: []string{epIP(i)},
					Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				slice, err = loader.Kube.DiscoveryV1().EndpointSlices(ns).Get(ctx, svcName(i)+"-1", metav1.GetOptions{})
			}
			if err != nil {
				return err
			}
			slices[i] = slice
			return nil
		})
	}
	if err := runParallel(ctx, workers, jobs); err != nil {
		return nil, nil, fmt.Errorf("creating services: %w", err)
	}
	return svcs, slices, nil
}

// exportRun is one burst of exports, measured.
type exportRun struct {
	start      time.Time       // before the first create
	lat        []time.Duration // per answered export: acknowledged -> answered by every importing cluster
	all        time.Duration   // start -> the last answer
	unanswered int
}

// exportToAnswer exports the n Services of ns (in the loader's cluster), in
// parallel, recording each acknowledgement (and passing its index to
// onAck, when set); meanwhile it asks each importing cluster's CoreDNS
// for every name whose ServiceImport exists there, until all answer (or
// two minutes pass).
func exportToAnswer(ctx context.Context, set *cluster.Set, loader *Loader, ns string, n int, importers []string, servers map[string]*Server, headless bool, onAck func(i int, se *mcsv1beta1.ServiceExport)) (*exportRun, error) {
	acked := make([]time.Time, n)
	answered := map[string][]time.Time{}
	for _, c := range importers {
		answered[c] = make([]time.Time, n)
	}
	var mu sync.Mutex
	var jobs []func(context.Context) error
	for i := range n {
		jobs = append(jobs, func(ctx context.Context) error {
			se, err := loader.MCS.MulticlusterV1beta1().ServiceExports(ns).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: svcName(i)}}, metav1.CreateOptions{})
			if err == nil {
				mu.Lock()
				acked[i] = time.Now()
				mu.Unlock()
				if onAck != nil {
					onAck(i, se)
				}
			}
			return err
		})
	}
	// Ask DNS only for names whose ServiceImport exists in that cluster
	// (seen through a watch): polling every pending name would load the
	// two shared cores the importer and the API servers need.
	imported := map[string][]bool{}
	index := map[string]int{}
	for i := range n {
		index[svcName(i)] = i
	}
	for _, cname := range importers {
		imported[cname] = make([]bool, n)
		w, err := set.Get(cname).MCS.MulticlusterV1beta1().ServiceImports(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("watching imports in %s: %w", cname, err)
		}
		defer w.Stop()
		go func() {
			for ev := range w.ResultChan() {
				si, ok := ev.Object.(*mcsv1beta1.ServiceImport)
				if !ok {
					continue
				}
				if i, ok := index[si.Name]; ok {
					mu.Lock()
					imported[cname][i] = true
					mu.Unlock()
				}
			}
		}()
	}
	run := &exportRun{start: time.Now()}
	createErr := make(chan error, 1)
	go func() { createErr <- runParallel(ctx, 32, jobs) }()
	pollCtx, stopPoll := context.WithTimeout(ctx, 2*time.Minute)
	defer stopPoll()
	created := false
	for pollCtx.Err() == nil {
		if !created {
			select {
			case err := <-createErr:
				if err != nil {
					return nil, fmt.Errorf("creating exports: %w", err)
				}
				created = true
				logf("importer: %d exports acknowledged in %s", n, time.Since(run.start).Round(time.Millisecond))
			default:
			}
		}
		type job struct {
			c string
			i int
		}
		var todo []job
		mu.Lock()
		for c, ts := range answered {
			for i := range n {
				if ts[i].IsZero() && !acked[i].IsZero() && imported[c][i] {
					todo = append(todo, job{c, i})
				}
			}
		}
		mu.Unlock()
		if created && len(todo) == 0 {
			done := true
			mu.Lock()
			for _, ts := range answered {
				for i := range n {
					done = done && !ts[i].IsZero()
				}
			}
			mu.Unlock()
			if done {
				break
			}
		}
		ch := make(chan job)
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := &dns.Client{Net: "udp", Timeout: 200 * time.Millisecond, UDPSize: 4096}
				for j := range ch {
					name := svcName(j.i) + "." + ns + ".svc." + Zone
					r, _, err := cl.Exchange(newMsg(name, dns.TypeA), servers[j.c].Addr())
					if err == nil && answeredImport(r, headless, epIP(j.i)) {
						now := time.Now()
						mu.Lock()
						answered[j.c][j.i] = now
						mu.Unlock()
					}
				}
			}()
		}
		for _, j := range todo {
			ch <- j
		}
		close(ch)
		wg.Wait()
		_ = waitCtx(pollCtx, 2*time.Millisecond)
	}
	if !created {
		// The poll timed out first: the creates still finish (or fail).
		if err := <-createErr; err != nil {
			return nil, fmt.Errorf("creating exports: %w", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var last time.Time
	for i := range n {
		var worst time.Time
		ok := !acked[i].IsZero()
		for _, c := range importers {
			t := answered[c][i]
			if t.IsZero() {
				ok = false
				break
			}
			if t.After(worst) {
				worst = t
			}
		}
		if !ok {
			run.unanswered++
			continue
		}
		run.lat = append(run.lat, worst.Sub(acked[i]))
		if worst.After(last) {
			last = worst
		}
	}
	if !last.IsZero() {
		run.all = last.Sub(run.start)
	}
	return run, nil
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// answeredImport: a headless import answers with the endpoint's address; a
// ClusterSetIP import answers NOERROR (with its VIP, if it has one).
func answeredImport(r *dns.Msg, headless bool, ip string) bool {
	if r.Rcode != dns.RcodeSuccess {
		return false
	}
	if !headless {
		return true
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok && a.A.String() == ip {
			return true
		}
	}
	return false
}

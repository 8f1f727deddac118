package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// Zone is the MCS zone every server answers.
const Zone = "clusterset.local."

// Sizes is one size of the scale fixture.
type Sizes struct {
	Imports    int // ClusterSetIP ServiceImports
	Headless   int // headless ServiceImports
	Endpoints  int // ready endpoints per headless import per source cluster
	Clusters   int // source clusters of every headless import
	Namespaces int
	SliceMax   int // endpoints per EndpointSlice at most
}

// Scaled returns s with the numbers of imports multiplied by f (so the
// number of endpoints grows by f too).
func (s Sizes) Scaled(f int) Sizes {
	s.Imports *= f
	s.Headless *= f
	return s
}

// TotalEndpoints is the number of endpoints of the fixture.
func (s Sizes) TotalEndpoints() int { return s.Headless * s.Clusters * s.Endpoints }

// TotalSlices is the number of EndpointSlices of the fixture.
func (s Sizes) TotalSlices() int {
	per := (s.Endpoints + s.SliceMax - 1) / s.SliceMax
	return s.Headless * s.Clusters * per
}

// Fixture names and addresses: every one is a pure function of an index, so
// that the query files, the expected answers and the objects agree, and the
// 10x fixture is the 1x fixture plus more.

func nsName(i int) string { return fmt.Sprintf("bench-%02d", i) }

// benchRegion is the region of the fixture's first two source clusters
// (east, west); the others are in otherRegion.
const benchRegion, otherRegion = "bench-1", "bench-2"

// regionOf is the region source cluster c's slices carry (the label the
// importer stamps on mirrored slices).
func regionOf(c int) string {
	if c < 2 {
		return benchRegion
	}
	return otherRegion
}

func clusterID(c int) string {
	ids := []string{"east", "west", "north", "south"}
	if c < len(ids) {
		return ids[c]
	}
	return fmt.Sprintf("member%d", c)
}

// ClusterSetIP service i.
func cipName(i int) string           { return fmt.Sprintf("svc-%05d", i) }
func (s Sizes) cipNS(i int) string   { return nsName(i % s.Namespaces) }
func cipIP(i int) netip.Addr         { return addrAdd(netip.MustParseAddr("100.64.0.0"), uint32(i+1)) }
func (s Sizes) cipFQDN(i int) string { return cipName(i) + "." + s.cipNS(i) + ".svc." + Zone }
func (s Sizes) cipSRV(i int) string  { return "_http._tcp." + s.cipFQDN(i) }
func (s Sizes) nxFQDN(i int) string {
	return fmt.Sprintf("nosuch-%05d.%s.svc.%s", i, nsName(i%s.Namespaces), Zone)
}
func (s Sizes) hlFQDN(j int) string { return hlName(j) + "." + s.hlNS(j) + ".svc." + Zone }
func (s Sizes) hlSRV(j int) string  { return "_http._tcp." + s.hlFQDN(j) }
func hlName(j int) string           { return fmt.Sprintf("hl-%04d", j) }
func (s Sizes) hlNS(j int) string   { return nsName(j % s.Namespaces) }
func epHostname(j, k int) string    { return fmt.Sprintf("%s-%d", hlName(j), k) }
func (s Sizes) epFQDN(j, c, k int) string {
	return epHostname(j, k) + "." + clusterID(c) + "." + s.hlFQDN(j)
}

// epIP is the address of endpoint k of headless service j in cluster c:
// each cluster has its own /14 of 10.0.0.0/8.
func (s Sizes) epIP(j, c, k int) netip.Addr {
	base := addrAdd(netip.MustParseAddr("10.64.0.0"), uint32(c)<<18)
	return addrAdd(base, uint32(j*s.Endpoints+k+1))
}

func addrAdd(a netip.Addr, n uint32) netip.Addr {
	b := a.As4()
	v := binary.BigEndian.Uint32(b[:]) + n
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

const (
	cipPort     = 80
	cipPort2    = 9090
	hlPort      = 8080
	portName    = "http"
	portName2   = "metrics"
	managedByMe = mcsapi.ManagedByImporter
)

func sliceName(j, c, n int) string { return fmt.Sprintf("%s-%s-%d", hlName(j), clusterID(c), n) }

// headlessSlices returns the EndpointSlices of headless service j from
// cluster c, SliceMax endpoints at most each.
func (s Sizes) headlessSlices(j, c int) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for n, start := 0, 0; start < s.Endpoints; n, start = n+1, start+s.SliceMax {
		end := min(start+s.SliceMax, s.Endpoints)
		sl := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name:      sliceName(j, c, n),
				Namespace: s.hlNS(j),
				Labels: map[string]string{
					mcsapi.LabelServiceName:   hlName(j),
					mcsapi.LabelSourceCluster: clusterID(c),
					mcsapi.LabelSourceRegion:  regionOf(c),
					mcsapi.LabelManagedBy:     managedByMe,
				},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{{
				Name: ptr.To(portName), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](hlPort),
			}},
		}
		for k := start; k < end; k++ {
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{s.epIP(j, c, k).String()},
				Hostname:   ptr.To(epHostname(j, k)),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			})
		}
		out = append(out, sl)
	}
	return out
}

func (s Sizes) cipImport(i int) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: cipName(i), Namespace: s.cipNS(i)},
		Spec: mcsv1beta1.ServiceImportSpec{
			Type:       mcsv1beta1.ClusterSetIP,
			IPs:        []string{cipIP(i).String()},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []mcsv1beta1.ServicePort{
				{Name: portName, Protocol: corev1.ProtocolTCP, Port: cipPort},
				{Name: portName2, Protocol: corev1.ProtocolTCP, Port: cipPort2},
			},
		},
	}
}

func (s Sizes) hlImport(j int) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: hlName(j), Namespace: s.hlNS(j)},
		Spec: mcsv1beta1.ServiceImportSpec{
			Type:  mcsv1beta1.Headless,
			Ports: []mcsv1beta1.ServicePort{{Name: portName, Protocol: corev1.ProtocolTCP, Port: hlPort}},
		},
	}
}

// Loader writes the fixture into one API server, in parallel.
type Loader struct {
	Kube    kubernetes.Interface
	MCS     mcsclient.Interface
	Workers int
}

// NewLoader makes clients with a high QPS (and protobuf for core types).
func NewLoader(cfg *rest.Config, workers int) (*Loader, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 20000, 40000
	pc := rest.CopyConfig(c)
	pc.ContentType = "application/vnd.kubernetes.protobuf"
	pc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	kube, err := kubernetes.NewForConfig(pc)
	if err != nil {
		return nil, err
	}
	m, err := mcsclient.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	return &Loader{Kube: kube, MCS: m, Workers: workers}, nil
}

// Load creates the objects of size `to` that size `from` does not have
// (from may be the zero Sizes). Existing objects are left alone.
func (l *Loader) Load(ctx context.Context, from, to Sizes) (int, error) {
	for n := 0; n < to.Namespaces; n++ {
		_, err := l.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName(n)}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, err
		}
	}
	var jobs []func(context.Context) error
	for i := from.Imports; i < to.Imports; i++ {
		jobs = append(jobs, func(ctx context.Context) error {
			_, err := l.MCS.MulticlusterV1beta1().ServiceImports(to.cipNS(i)).Create(ctx, to.cipImport(i), metav1.CreateOptions{})
			return err
		})
	}
	for j := from.Headless; j < to.Headless; j++ {
		jobs = append(jobs, func(ctx context.Context) error {
			_, err := l.MCS.MulticlusterV1beta1().ServiceImports(to.hlNS(j)).Create(ctx, to.hlImport(j), metav1.CreateOptions{})
			return err
		})
		for c := 0; c < to.Clusters; c++ {
			for _, sl := range to.headlessSlices(j, c) {
				jobs = append(jobs, func(ctx context.Context) error {
					_, err := l.Kube.DiscoveryV1().EndpointSlices(sl.Namespace).Create(ctx, sl, metav1.CreateOptions{})
					return err
				})
			}
		}
	}
	// Interleave kinds so that every informer sees a mix, like a real cluster.
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(jobs), func(a, b int) { jobs[a], jobs[b] = jobs[b], jobs[a] })
	return len(jobs), runParallel(ctx, l.Workers, jobs)
}

// runParallel runs jobs on n workers; the first error stops the rest.
// Create conflicts (AlreadyExists) count as success, so a load can resume.
func runParallel(ctx context.Context, n int, jobs []func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) || ctx.Err() != nil {
					return
				}
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					err = jobs[i](ctx)
					if err == nil || apierrors.IsAlreadyExists(err) {
						err = nil
						break
					}
					if ctx.Err() != nil {
						break
					}
					time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
				}
				if err != nil {
					cancel(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}

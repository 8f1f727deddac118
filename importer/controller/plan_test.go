package controller

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/importer/members"
	"github.com/mcs-dns/mcs-dns/importer/slicedigest"
	"github.com/mcs-dns/mcs-dns/importer/vip"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// mirrored is a slice of ours for web in ns from cluster, with one
// endpoint at addr.
func mirrored(name, cluster, addr string, ready bool) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: "uid-" + "name", Labels: map[string]string{
			mcsapi.LabelManagedBy:     mcsapi.ManagedByImporter,
			mcsapi.LabelSourceCluster: cluster,
			mcsapi.LabelServiceName:   "web",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80)}},
	}
}

func names(ss []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func TestPlanSlices(t *testing.T) {
	same := mirrored("same", "east", "10.0.0.1", true)
	changed := mirrored("changed", "east", "10.0.0.2", false)
	v6 := mirrored("family", "east", "10.0.0.3", true)
	gone := mirrored("gone", "west", "10.1.0.1", true)
	actual := []*discoveryv1.EndpointSlice{same, changed, v6, gone}

	wantChanged := mirrored("changed", "east", "10.0.0.2", true)
	wantV6 := mirrored("family", "east", "fd00::3", true)
	wantV6.AddressType = discoveryv1.AddressTypeIPv6
	added := mirrored("added", "west", "10.1.0.2", true)
	desired := []*discoveryv1.EndpointSlice{mirrored("same", "east", "10.0.0.1", true), wantChanged, wantV6, added}

	p := planSlices(desired, actual, vip.Assignment{})
	require.Len(t, p.writes, 3, "the slice up to date is not written")
	byName := map[string]sliceWrite{}
	for _, w := range p.writes {
		byName[w.want.Name] = w
	}
	assert.Same(t, changed, byName["changed"].cur, "updated from the cache's copy")
	assert.Nil(t, byName["changed"].replace)
	assert.Nil(t, byName["family"].cur, "addressType is immutable: created anew")
	assert.Same(t, v6, byName["family"].replace, "after the old one is deleted")
	assert.Nil(t, byName["added"].cur)
	assert.Equal(t, []string{"gone"}, names(p.remove))
	for _, w := range p.writes {
		assert.False(t, w.endpointsOnly)
	}

	// The VIP's labels and port names go onto every slice, without
	// changing what the caller passed.
	asg := vip.Assignment{
		SliceLabels:    map[string]string{mcsapi.LabelKubeServiceName: "derived-abc"},
		SlicePortNames: map[string]string{"http": "tcp-80"},
	}
	p = planSlices(desired, actual, asg)
	require.Len(t, p.writes, 4, "the slice that was up to date lacks the label now")
	for _, w := range p.writes {
		assert.Equal(t, "derived-abc", w.want.Labels[mcsapi.LabelKubeServiceName], w.want.Name)
		assert.Equal(t, "tcp-80", *w.want.Ports[0].Name, w.want.Name)
	}
	assert.Empty(t, desired[0].Labels[mcsapi.LabelKubeServiceName], "the caller's slice is not changed")
	assert.Equal(t, "http", *desired[0].Ports[0].Name)

	// Slices that already carry the assignment's labels and port names
	// are not written again.
	var written []*discoveryv1.EndpointSlice
	for _, w := range p.writes {
		written = append(written, w.want)
	}
	assert.True(t, planSlices(desired, written, asg).empty(), "the written slices are up to date")
	assert.Len(t, planSlices(desired, written, vip.Assignment{}).writes, 4, "without the assignment they are not")

	// Nothing desired: everything of ours goes.
	p = planSlices(nil, actual, vip.Assignment{})
	assert.Empty(t, p.writes)
	assert.Equal(t, []string{"changed", "family", "gone", "same"}, names(p.remove))
	assert.True(t, planSlices(nil, nil, vip.Assignment{}).empty())
}

func TestPlanSeenEndpoints(t *testing.T) {
	h := members.HoldAllBut("east") // west has not been seen
	eastChanged := mirrored("east-a", "east", "10.0.0.1", true)
	eastSame := mirrored("east-b", "east", "10.0.0.2", true)
	eastGone := mirrored("east-c", "east", "10.0.0.3", true)
	westHeld := mirrored("west-a", "west", "10.1.0.1", true)
	theirs := mirrored("east-d", "east", "10.0.0.4", true)
	theirs.Labels[mcsapi.LabelManagedBy] = "someone-else"
	actual := []*discoveryv1.EndpointSlice{eastChanged, eastSame, eastGone, westHeld, theirs}

	want := mirrored("east-a", "east", "10.0.0.1", false)
	want.Ports = nil // ports follow the held import, not the desired slice
	want.Labels = map[string]string{"new": "label"}
	desired := []*discoveryv1.EndpointSlice{
		want,
		mirrored("east-b", "east", "10.0.0.2", true),
		mirrored("east-new", "east", "10.0.0.9", true),
		mirrored("west-a", "west", "10.9.9.9", false),
		mirrored("east-d", "east", "10.0.0.5", true),
	}
	p := planSeenEndpoints(h, desired, actual)
	require.Len(t, p.writes, 1, "a new slice waits for the hold to end; held and foreign slices are left")
	w := p.writes[0]
	assert.True(t, w.endpointsOnly)
	assert.Same(t, eastChanged, w.cur)
	assert.False(t, *w.want.Endpoints[0].Conditions.Ready, "the endpoint's new state")
	assert.Equal(t, eastChanged.Labels, w.want.Labels, "labels as they are")
	assert.Equal(t, eastChanged.Ports, w.want.Ports, "ports as they are")
	assert.Equal(t, []string{"east-c"}, names(p.remove), "a slice the seen member no longer has is deleted")
}

func TestReadyCondition(t *testing.T) {
	assert.Equal(t, metav1.ConditionTrue, readyCondition(vip.Assignment{}, nil).Status)

	vipFailed := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Pending", Message: "quota"}
	assert.Equal(t, vipFailed, readyCondition(vip.Assignment{Ready: &vipFailed}, nil))

	held := []*members.NotOwnedError{{Kind: kindSlice, Namespace: "ns", Name: "a"}, {Kind: kindSlice, Namespace: "ns", Name: "b"}}
	got := readyCondition(vip.Assignment{Ready: &vipFailed}, held)
	assert.Equal(t, metav1.ConditionFalse, got.Status)
	assert.Equal(t, held[0].Error()+"; "+held[1].Error(), got.Message, "the names held are what the condition says")
}

func TestImportWithVIP(t *testing.T) {
	agg := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPFamilies: nil},
	}
	asg := vip.Assignment{IPs: []string{"fd00::1", "10.0.0.1"}, Annotations: map[string]string{"a": "b"}}
	got := importWithVIP(agg, asg, members.Schema{})
	assert.Equal(t, asg.IPs, got.Spec.IPs)
	assert.Equal(t, []string{"IPv6", "IPv4"}, []string{string(got.Spec.IPFamilies[0]), string(got.Spec.IPFamilies[1])})
	assert.Equal(t, "b", got.Annotations["a"])
	assert.Nil(t, agg.Spec.IPs, "the aggregate's import is not changed")

	// An import that holds no VIP names none.
	got = importWithVIP(agg, vip.Assignment{}, members.Schema{})
	assert.Empty(t, got.Spec.IPs)

	headless := agg.DeepCopy()
	headless.Spec.Type = mcsv1beta1.Headless
	got = importWithVIP(headless, asg, members.Schema{})
	assert.Empty(t, got.Spec.IPs, "a Headless import names no VIP")
}

// BenchmarkPlanSlices is one member's plan for a service every one of 40
// members exports (one slice each), with a VIP assignment's label and
// port name and nothing to write: what each member costs each time such
// a service changes.
func BenchmarkPlanSlices(b *testing.B) {
	asg := vip.Assignment{
		SliceLabels:    map[string]string{mcsapi.LabelKubeServiceName: "derived-abc"},
		SlicePortNames: map[string]string{"http": "tcp-80"},
	}
	var desired, actual []*discoveryv1.EndpointSlice
	for i := range 40 {
		d := mirrored(fmt.Sprintf("web-%d", i), fmt.Sprintf("member-%d", i), fmt.Sprintf("10.0.%d.1", i), true)
		slicedigest.Stamp(d) // as the reconcile does
		desired = append(desired, d)
	}
	for _, w := range planSlices(desired, nil, asg).writes {
		actual = append(actual, w.want)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !planSlices(desired, actual, asg).empty() {
			b.Fatal("a write planned")
		}
	}
}

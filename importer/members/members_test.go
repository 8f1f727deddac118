package members

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

func TestValidateID(t *testing.T) {
	for _, id := range []string{"east", "east-1", "eu.west.example", "a", strings.Repeat("a", 61) + ".b", strings.Repeat("a", 63)} {
		assert.NoError(t, ValidateID(id), id)
	}
	for _, id := range []string{"", "East", "east_1", "-east", "east-", "east..west", strings.Repeat("a", 64), "x." + strings.Repeat("a", 64), strings.Repeat("a.", 127) + "a",
		strings.Repeat("a", 62) + ".b" /* 64: longer than a label value */} {
		assert.Error(t, ValidateID(id), id)
	}
}

func TestValidateIDs(t *testing.T) {
	ms := []*Member{{Context: "east", ID: "one"}, {Context: "west", ID: "two"}}
	require.NoError(t, ValidateIDs(ms))
	ms = append(ms, &Member{Context: "north", ID: "one"}, &Member{Context: "south", ID: "Bad"})
	err := ValidateIDs(ms)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `contexts "east" and "north" have the same cluster ID "one"`)
	assert.Contains(t, err.Error(), `context "south": cluster ID "Bad" is not valid`)
}

// v1alpha1 and v1beta1 have the same schema: converting loses nothing.
func TestConversionRoundTrip(t *testing.T) {
	itp := corev1.ServiceInternalTrafficPolicyLocal
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: map[string]string{"a": "b"}, ResourceVersion: "7"},
		Spec: mcsv1beta1.ServiceImportSpec{
			Ports:                 []mcsv1beta1.ServicePort{{Name: "http", Protocol: "TCP", Port: 80, AppProtocol: ptr.To("h2c")}},
			IPs:                   []string{"10.0.0.1"},
			Type:                  mcsv1beta1.ClusterSetIP,
			SessionAffinity:       corev1.ServiceAffinityClientIP,
			SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](5)}},
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
			InternalTrafficPolicy: &itp,
			TrafficDistribution:   ptr.To("PreferClose"),
		},
		Status: mcsv1beta1.ServiceImportStatus{
			EndpointSliceObjects: mcsv1beta1.EndpointSliceObjectsPresent,
			Clusters:             []mcsv1beta1.ClusterStatus{{Cluster: "east"}},
			Conditions:           []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Ready"}},
		},
	}
	alpha := importToAlpha(si)
	a, _ := json.Marshal(alpha)
	b, _ := json.Marshal(si)
	assert.JSONEq(t, string(b), string(a), "same JSON through v1alpha1")
	assert.Equal(t, si, importToBeta(alpha))

	se := &mcsv1beta1.ServiceExport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: 3},
		Spec:       mcsv1beta1.ServiceExportSpec{ExportedLabels: map[string]string{"x": "y"}, ExportedAnnotations: map[string]string{"z": "w"}},
		Status:     mcsv1beta1.ServiceExportStatus{Conditions: []metav1.Condition{{Type: "Valid", Status: "True", Reason: "Valid"}}},
	}
	ea := exportToAlpha(se)
	a, _ = json.Marshal(ea)
	b, _ = json.Marshal(se)
	assert.JSONEq(t, string(b), string(a))
	assert.Equal(t, se, exportToBeta(ea))
}

// Why a member cannot be used, in words an operator acts on; and whether
// the failure came back from its API server (it answered and refused) or
// the server could not be reached (which counts towards a disruption).
func TestReasonAndReached(t *testing.T) {
	for _, tc := range []struct {
		err     error
		reason  string
		reached bool
	}{
		{fmt.Errorf("context east: serviceexports %w", mcsapi.ErrNotServed), "MCS API not served", true},
		{apierrors.NewForbidden(schema.GroupResource{Resource: "serviceexports"}, "", errors.New("no")), "forbidden (the importer's RBAC", true},
		{apierrors.NewUnauthorized("token expired"), "unauthorized", true},
		{apierrors.NewNotFound(schema.GroupResource{Resource: "serviceexports"}, ""), "MCS API not served", true},
		{&IDError{msg: "bad"}, "cluster ID rejected", true},
		{&url.Error{Op: "Get", URL: "https://127.0.0.1:1", Err: errors.New("connection refused")}, "unreachable: ", false},
		{apierrors.NewServiceUnavailable("etcd"), "unreachable: ", false},
	} {
		assert.Contains(t, Reason(tc.err), tc.reason, "%v", tc.err)
		assert.Equal(t, tc.reached, Reached(tc.err), "%v", tc.err)
	}
}

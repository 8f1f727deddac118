package members

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// discoveryServer serves the MCS group's discovery: each version in served
// lists ServiceExports and ServiceImports, others are 404; fail, when it
// returns true for a path, answers 503 instead.
func discoveryServer(t *testing.T, served map[string]bool, fail func(path string) bool) *Member {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail != nil && fail(r.URL.Path) {
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":503}`, http.StatusServiceUnavailable)
			return
		}
		for v := range served {
			gv := "multicluster.x-k8s.io/" + v
			if r.URL.Path == "/apis/"+gv {
				_ = json.NewEncoder(w).Encode(&metav1.APIResourceList{
					TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv,
					APIResources: []metav1.APIResource{{Name: "serviceexports", Namespaced: true, Kind: "ServiceExport"},
						{Name: "serviceimports", Namespaced: true, Kind: "ServiceImport"}},
				})
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return &Member{ID: "m", Config: &rest.Config{Host: srv.URL}, ExportVersion: "v1beta1", ImportVersion: "v1beta1"}
}

// VersionsChanged names a real change and nothing else: not a passing
// error on the preferred version (which must not read as a fall back to
// v1alpha1), not a group that is not served at all (CRDs being replaced;
// a restart would not connect).
func TestVersionsChanged(t *testing.T) {
	both := map[string]bool{"v1beta1": true, "v1alpha1": true}
	assert.Empty(t, discoveryServer(t, both, nil).VersionsChanged(time.Second), "unchanged")

	m := discoveryServer(t, both, nil)
	m.ExportVersion, m.ImportVersion = "v1alpha1", "v1alpha1"
	assert.Equal(t, "serviceexports served at v1beta1, was v1alpha1; serviceimports served at v1beta1, was v1alpha1",
		m.VersionsChanged(time.Second), "v1beta1 added")

	assert.Equal(t, "serviceexports served at v1alpha1, was v1beta1; serviceimports served at v1alpha1, was v1beta1",
		discoveryServer(t, map[string]bool{"v1alpha1": true}, nil).VersionsChanged(time.Second), "v1beta1 dropped")

	var betaCalls atomic.Int32
	flaky := discoveryServer(t, both, func(path string) bool {
		return path == "/apis/multicluster.x-k8s.io/v1beta1" && betaCalls.Add(1) == 1
	})
	assert.Empty(t, flaky.VersionsChanged(time.Second), "a 503 on v1beta1 is no change")

	assert.Empty(t, discoveryServer(t, map[string]bool{}, nil).VersionsChanged(time.Second), "nothing served: cannot tell")
}

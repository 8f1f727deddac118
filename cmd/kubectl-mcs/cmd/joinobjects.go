package cmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/mcs-dns/mcs-dns/deploy/crds"
	memberdeploy "github.com/mcs-dns/mcs-dns/deploy/member"
	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// What join marks on every object it creates: the label says who manages
// it, the annotation that join created it, so that unjoin removes those
// and only those (an object that was there before join is never marked,
// and never removed).
const (
	managedByLabel      = "app.kubernetes.io/managed-by"
	managedByValue      = "kubectl-mcs"
	createdByAnnotation = "mcs-dns.io/created-by"
	createdByValue      = "kubectl-mcs-join"
)

// tokenSecretName is the long-lived token Secret of mcs-importer-member
// that join creates in the member; its token goes into the importer's
// kubeconfig.
const tokenSecretName = memberdeploy.ServiceAccount + "-token"

// kubeconfigKey is the key of the importer's kubeconfig Secret that holds
// the kubeconfig (deploy/importer's secretGenerator file).
const kubeconfigKey = "kubeconfig"

// gvrOf maps the kinds join writes to their resources.
var gvrOf = map[string]schema.GroupVersionResource{
	"Namespace":                {Version: "v1", Resource: "namespaces"},
	"ServiceAccount":           {Version: "v1", Resource: "serviceaccounts"},
	"Secret":                   {Version: "v1", Resource: "secrets"},
	"ClusterRole":              {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding":       {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	"Role":                     {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":              {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"CustomResourceDefinition": {Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	"ClusterProperty":          mcsapi.ClusterPropertyGVR,
}

func resourceFor(dyn dynamic.Interface, o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvr, ok := gvrOf[o.GetKind()]
	if !ok {
		return nil, fmt.Errorf("kubectl mcs cannot write a %s", o.GetKind())
	}
	if ns := o.GetNamespace(); ns != "" {
		return dyn.Resource(gvr).Namespace(ns), nil
	}
	return dyn.Resource(gvr), nil
}

// objName is how output names an object: kind/name, or
// kind/namespace/name.
func objName(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetKind() + "/" + o.GetName()
}

// createdByJoin says whether join created o.
func createdByJoin(o *unstructured.Unstructured) bool {
	return o.GetAnnotations()[createdByAnnotation] == createdByValue
}

func markCreated(o *unstructured.Unstructured) {
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[managedByLabel] = managedByValue
	o.SetLabels(labels)
	ann := o.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[createdByAnnotation] = createdByValue
	o.SetAnnotations(ann)
}

// report prints what join, unjoin and dns did (or, with --dry-run, would
// do), one line per object, and counts the changes.
type report struct {
	out     io.Writer
	dryRun  bool
	changes int
}

// line prints one object's outcome: verb is what happened ("create",
// "update", "delete"), or "" for an object left as it is (why says why).
func (r *report) line(where, verb, object, why string) {
	action := "unchanged"
	if verb != "" {
		r.changes++
		action = strings.TrimSuffix(verb, "e") + "ed"
		if r.dryRun {
			action = "would " + verb
		}
	}
	if why != "" {
		why = " (" + why + ")"
	}
	fmt.Fprintf(r.out, "%-8s %-16s %s%s\n", where, action, object, why)
}

// kept prints an object left in place on purpose (not a change).
func (r *report) kept(where, object, why string) {
	fmt.Fprintf(r.out, "%-8s %-16s %s (%s)\n", where, "kept", object, why)
}

// contentOf is what join compares and writes of an existing object: the
// manifest's top-level fields but apiVersion, kind, metadata and status
// (an RBAC object's rules, roleRef or subjects; nothing for a Namespace
// or ServiceAccount).
func contentOf(o *unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	for k, v := range o.Object {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
			continue
		}
		out[k] = v
	}
	return out
}

// ensure creates want if absent (marked as join's), updates the content
// of an object that differs (leaving it unmarked: it was not join's to
// begin with, or it was and stays so), and otherwise leaves it. It
// returns the verb ("create", "update" or "" for unchanged).
func ensure(ctx context.Context, dyn dynamic.Interface, want *unstructured.Unstructured, dryRun bool) (string, error) {
	ri, err := resourceFor(dyn, want)
	if err != nil {
		return "", err
	}
	have, err := ri.Get(ctx, want.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		obj := want.DeepCopy()
		markCreated(obj)
		if !dryRun {
			if _, err := ri.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				return "", fmt.Errorf("creating %s: %w", objName(want), err)
			}
		}
		return "create", nil
	case err != nil:
		return "", fmt.Errorf("reading %s: %w", objName(want), err)
	}
	if want.GetKind() == "CustomResourceDefinition" {
		// A CRD that is there is the cluster's: another version of it may
		// be installed on purpose, and replacing it could drop objects.
		return "", nil
	}
	// Only what the manifest says is compared: fields the API server
	// fills in (a Namespace's spec.finalizers) are not join's.
	wantContent := contentOf(want)
	same := true
	for k, v := range wantContent {
		if !equality.Semantic.DeepEqual(v, have.Object[k]) {
			same = false
		}
	}
	if same {
		return "", nil
	}
	upd := have.DeepCopy()
	for k, v := range wantContent {
		upd.Object[k] = v
	}
	if !dryRun {
		if _, err := ri.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return "", fmt.Errorf("updating %s: %w", objName(want), err)
		}
	}
	return "update", nil
}

// memberObjects are the objects join ensures in a member, in install
// order: the CRDs, then deploy/member's manifests.
func memberObjects() (crdObjs, identity []*unstructured.Unstructured, err error) {
	// The files as they are (not crds.All's typed, defaulted copies): what
	// `kubectl apply -k deploy/crds` would send.
	for _, name := range crds.Files {
		raw, err := crds.Raw(name)
		if err != nil {
			return nil, nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(raw, &m); err != nil {
			return nil, nil, fmt.Errorf("decoding %s: %w", name, err)
		}
		crdObjs = append(crdObjs, &unstructured.Unstructured{Object: m})
	}
	identity, err = memberdeploy.Objects()
	return crdObjs, identity, err
}

// clusterPropertyObject is the About API ClusterProperty naming the
// cluster id.
func clusterPropertyObject(id string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": mcsapi.ClusterPropertyGVR.GroupVersion().String(),
		"kind":       "ClusterProperty",
		"metadata":   map[string]any{"name": mcsapi.ClusterIDProperty},
		"spec":       map[string]any{"value": id},
	}}
}

// tokenSecretObject is the long-lived token Secret of mcs-importer-member,
// which the member's token controller fills.
func tokenSecretObject() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"type":       "kubernetes.io/service-account-token",
		"metadata": map[string]any{
			"name":        tokenSecretName,
			"namespace":   memberdeploy.Namespace,
			"annotations": map[string]any{"kubernetes.io/service-account.name": memberdeploy.ServiceAccount},
		},
	}}
}

// waitFor polls cond every 200ms until it holds, fails, or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%s: not after %s: %w", what, timeout, last)
			}
			return fmt.Errorf("%s: not after %s", what, timeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// crdEstablished says whether the CRD name is established.
func crdEstablished(ctx context.Context, dyn dynamic.Interface, name string) (bool, error) {
	o, err := dyn.Resource(gvrOf["CustomResourceDefinition"]).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true, nil
		}
	}
	return false, nil
}

// plural is n and a noun, pluralised by an s.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// listWords joins words for a sentence.
func listWords(words []string) string { return strings.Join(words, ", ") }

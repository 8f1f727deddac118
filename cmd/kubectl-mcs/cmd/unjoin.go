package cmd

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	memberdeploy "github.com/mcs-dns/mcs-dns/deploy/member"
	"github.com/mcs-dns/mcs-dns/internal/memberconn"
)

// UnjoinOptions are the options of kubectl mcs unjoin.
type UnjoinOptions struct {
	joinFlags
}

// NewUnjoinOptions are unjoin's options with their defaults.
func NewUnjoinOptions(streams genericiooptions.IOStreams) *UnjoinOptions {
	return &UnjoinOptions{joinFlags: newJoinFlags(streams)}
}

// NewCmdUnjoin is kubectl mcs unjoin.
func NewCmdUnjoin(streams genericiooptions.IOStreams) *cobra.Command {
	o := NewUnjoinOptions(streams)
	cmd := &cobra.Command{
		Use:   "unjoin --hosting-context CONTEXT --member-context CONTEXT",
		Short: "Undo join: the member's context leaves the importer's kubeconfig Secret, and what join created in the member goes",
		Long: `Undo kubectl mcs join. In the hosting cluster: the member's context (the one
whose server is the member's) leaves the importer's kubeconfig Secret, and
the Secret goes too when join created it and no context is left. In the
member: the objects join created (annotated mcs-dns.io/created-by=
kubectl-mcs-join) are deleted: the token Secret (which revokes the token),
the ClusterProperty, the importer's identity. Objects that were there before
join are kept. A CRD join created is deleted only when no object of it is
left (no ServiceExport, ServiceImport or ClusterProperty anywhere); the
namespace only when nothing but join's objects is in it.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.Complete(c); err != nil {
				return err
			}
			return o.Run(c.Context())
		},
	}
	o.addFlags(cmd.Flags())
	return cmd
}

// Complete reads the flags and builds the clients.
func (o *UnjoinOptions) Complete(c *cobra.Command) error {
	return o.complete(c.Flags())
}

// Run unjoins the member.
func (o *UnjoinOptions) Run(ctx context.Context) error {
	o.findSecret(ctx)
	r := &report{out: o.Out, dryRun: o.DryRun}
	id, _, err := memberconn.MemberClusterID(ctx, o.memberDyn, o.MemberContext)
	if err != nil {
		return fmt.Errorf("member %q: %w", o.MemberContext, err)
	}
	fmt.Fprintf(o.Out, "unjoining member %q (server %s, cluster ID %q) from %s of hosting cluster %q\n", o.MemberContext, o.server, id, o.secretRef(), o.HostingContext)
	if err := o.unjoinHosting(ctx, r); err != nil {
		return err
	}
	if err := o.unjoinMember(ctx, r); err != nil {
		return err
	}
	switch {
	case r.changes == 0:
		fmt.Fprintf(o.Out, "nothing to change: member %q is not joined\n", o.MemberContext)
	case o.DryRun:
		fmt.Fprintf(o.Out, "dry run: %s would change; nothing was changed\n", plural(r.changes, "object"))
	default:
		fmt.Fprintf(o.Out, "unjoined: %s changed; remove %q from the importer's --contexts and restart it\n", plural(r.changes, "object"), id)
	}
	return nil
}

// unjoinHosting removes the member's contexts (and their clusters and
// users, unless another context uses them) from the kubeconfig Secret.
func (o *UnjoinOptions) unjoinHosting(ctx context.Context, r *report) error {
	sec, kc, err := o.hostingKubeconfig(ctx)
	if err != nil {
		return err
	}
	names := contextsOf(kc, o.server)
	if len(names) == 0 {
		r.line("hosting", "", o.secretRef(), "no context for server "+o.server)
		return nil
	}
	for _, name := range names {
		c := kc.Contexts[name]
		delete(kc.Contexts, name)
		if !clusterUsed(kc, c.Cluster) {
			delete(kc.Clusters, c.Cluster)
		}
		if !userUsed(kc, c.AuthInfo) {
			delete(kc.AuthInfos, c.AuthInfo)
		}
		if kc.CurrentContext == name {
			kc.CurrentContext = ""
		}
	}
	if kc.CurrentContext == "" {
		rest := make([]string, 0, len(kc.Contexts))
		for n := range kc.Contexts {
			rest = append(rest, n)
		}
		slices.Sort(rest)
		if len(rest) > 0 {
			kc.CurrentContext = rest[0]
		}
	}
	if len(kc.Contexts) == 0 && sec.Annotations[createdByAnnotation] == createdByValue {
		if !o.DryRun {
			err := o.hostKube.CoreV1().Secrets(o.SecretNamespace).Delete(ctx, o.SecretName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sec.UID}})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("hosting cluster %q: deleting %s: %w", o.HostingContext, o.secretRef(), err)
			}
		}
		r.line("hosting", "delete", o.secretRef(), "join created it and no context is left")
		return nil
	}
	if !o.DryRun {
		if err := o.writeHostingKubeconfig(ctx, sec, kc); err != nil {
			return err
		}
	}
	for _, name := range names {
		r.line("hosting", "delete", "context "+name+" in "+o.secretRef(), "")
	}
	return nil
}

func clusterUsed(kc *clientcmdapi.Config, cluster string) bool {
	for _, c := range kc.Contexts {
		if c.Cluster == cluster {
			return true
		}
	}
	return false
}

func userUsed(kc *clientcmdapi.Config, user string) bool {
	for _, c := range kc.Contexts {
		if c.AuthInfo == user {
			return true
		}
	}
	return false
}

// unjoinMember deletes what join created in the member, in the reverse
// of join's order.
func (o *UnjoinOptions) unjoinMember(ctx context.Context, r *report) error {
	crdObjs, identity, err := memberObjects()
	if err != nil {
		return err
	}
	var ns *unstructured.Unstructured
	var objs []*unstructured.Unstructured
	objs = append(objs, tokenSecretObject(), clusterPropertyObject(""))
	for _, obj := range slices.Backward(identity) {
		if obj.GetKind() == "Namespace" {
			ns = obj
			continue
		}
		objs = append(objs, obj)
	}
	// Whatever is deleted here is not counted as left in the namespace or
	// as an object of a CRD.
	gone := map[string]bool{}
	for _, obj := range objs {
		if err := o.deleteIfJoins(ctx, r, obj, gone); err != nil {
			return err
		}
	}
	if ns != nil {
		have, err := o.get(ctx, ns)
		switch {
		case err != nil:
			return err
		case have == nil:
		case !createdByJoin(have):
			r.kept("member", objName(ns), "it was there before join")
		default:
			if left, err := o.leftInNamespace(ctx, gone); err != nil {
				return err
			} else if len(left) > 0 {
				r.kept("member", objName(ns), "it holds objects join did not create: "+listWords(left))
			} else if err := o.delete(ctx, r, ns, gone); err != nil {
				return err
			}
		}
	}
	for _, crd := range slices.Backward(crdObjs) {
		have, err := o.get(ctx, crd)
		switch {
		case err != nil:
			return err
		case have == nil:
			continue
		case !createdByJoin(have):
			r.kept("member", objName(crd), "it was there before join")
			continue
		}
		n, kind, err := o.objectsOf(ctx, have, gone)
		if err != nil {
			return err
		}
		if n > 0 {
			r.kept("member", objName(crd), "objects of it remain: "+plural(n, kind))
			continue
		}
		if err := o.delete(ctx, r, crd, gone); err != nil {
			return err
		}
	}
	return nil
}

// get reads obj's live copy, nil when it is absent (or its kind is not
// served).
func (o *UnjoinOptions) get(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := resourceFor(o.memberDyn, obj)
	if err != nil {
		return nil, err
	}
	have, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("member %q: reading %s: %w", o.MemberContext, objName(obj), err)
	}
	return have, nil
}

func (o *UnjoinOptions) deleteIfJoins(ctx context.Context, r *report, obj *unstructured.Unstructured, gone map[string]bool) error {
	have, err := o.get(ctx, obj)
	switch {
	case err != nil:
		return err
	case have == nil:
		return nil
	case !createdByJoin(have):
		r.kept("member", objName(obj), "it was there before join")
		return nil
	}
	return o.delete(ctx, r, have, gone)
}

func (o *UnjoinOptions) delete(ctx context.Context, r *report, obj *unstructured.Unstructured, gone map[string]bool) error {
	gone[objName(obj)] = true
	if !o.DryRun {
		ri, err := resourceFor(o.memberDyn, obj)
		if err != nil {
			return err
		}
		if err := ri.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("member %q: deleting %s: %w", o.MemberContext, objName(obj), err)
		}
	}
	r.line("member", "delete", objName(obj), "")
	return nil
}

// leftInNamespace lists what is in the importer's namespace besides
// join's objects and what the cluster puts in every namespace.
func (o *UnjoinOptions) leftInNamespace(ctx context.Context, gone map[string]bool) ([]string, error) {
	var left []string
	check := func(gvr schema.GroupVersionResource, kind string, ignore func(*unstructured.Unstructured) bool) error {
		l, err := o.memberDyn.Resource(gvr).Namespace(memberdeploy.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("member %q: listing %s in %s: %w", o.MemberContext, gvr.Resource, memberdeploy.Namespace, err)
		}
		for i := range l.Items {
			it := &l.Items[i]
			it.SetKind(kind)
			if gone[objName(it)] || (ignore != nil && ignore(it)) {
				continue
			}
			left = append(left, objName(it))
		}
		return nil
	}
	none := func(*unstructured.Unstructured) bool { return false }
	for _, c := range []struct {
		gvr    schema.GroupVersionResource
		kind   string
		ignore func(*unstructured.Unstructured) bool
	}{
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "Deployment", none},
		{schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "Pod", none},
		{schema.GroupVersionResource{Version: "v1", Resource: "services"}, "Service", none},
		{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ConfigMap", func(u *unstructured.Unstructured) bool {
			return u.GetName() == "kube-root-ca.crt"
		}},
		{gvrOf["Secret"], "Secret", func(u *unstructured.Unstructured) bool {
			// Tokens the token controller keeps for a ServiceAccount
			// that is going away.
			return u.GetAnnotations()["kubernetes.io/service-account.name"] == memberdeploy.ServiceAccount
		}},
		{gvrOf["ServiceAccount"], "ServiceAccount", func(u *unstructured.Unstructured) bool { return u.GetName() == "default" }},
		{gvrOf["Role"], "Role", none},
		{gvrOf["RoleBinding"], "RoleBinding", none},
		{schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, "Lease", none},
	} {
		if err := check(c.gvr, c.kind, c.ignore); err != nil {
			return nil, err
		}
	}
	return left, nil
}

// objectsOf counts the objects of the CRD crd (in any namespace), but
// those deleted here, and names their kind.
func (o *UnjoinOptions) objectsOf(ctx context.Context, crd *unstructured.Unstructured, gone map[string]bool) (int, string, error) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	version := ""
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if served, _ := m["served"].(bool); served {
			version, _ = m["name"].(string)
			if storage, _ := m["storage"].(bool); storage {
				break
			}
		}
	}
	if version == "" {
		return 0, kind, nil
	}
	l, err := o.memberDyn.Resource(schema.GroupVersionResource{Group: group, Version: version, Resource: plural}).List(ctx, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return 0, kind, nil
		}
		return 0, kind, fmt.Errorf("member %q: listing %s.%s: %w", o.MemberContext, plural, group, err)
	}
	n := 0
	for i := range l.Items {
		it := &l.Items[i]
		it.SetKind(kind)
		if !gone[objName(it)] {
			n++
		}
	}
	return n, kind, nil
}

package vip

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-dns/mcs-dns/internal/mcsapi"
)

// derivedSpec is the derived Service the import asks for.
func derivedSpec(imp *mcsv1beta1.ServiceImport, name string) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: imp.Namespace,
			Name:      name,
			Labels: map[string]string{
				mcsapi.LabelAppManagedBy: mcsapi.ManagedByImporter,
				mcsapi.LabelDerivedFor:   imp.Name,
			},
		},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: derivedPorts(imp.Spec.Ports)},
	}
	// kube-proxy reads session affinity from the Service the VIP belongs
	// to, so the derived Service carries the import's.
	svc.Spec.SessionAffinity, svc.Spec.SessionAffinityConfig = derivedAffinity(imp.Spec)
	switch fams := imp.Spec.IPFamilies; len(fams) {
	case 0:
	case 1:
		svc.Spec.IPFamilies = slices.Clone(fams)
		svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
	default:
		// Dual-stack where the cluster can, single-stack where it cannot:
		// only the primary family is asked for, and the API server adds
		// the other where it has a range for it (asking for both fails on
		// a single-stack cluster, PreferDualStack or not).
		svc.Spec.IPFamilies = slices.Clone(fams[:1])
		svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
	}
	return svc
}

// derivedPorts turns the import's ports into Service ports. A Service with
// several ports needs a name on each; unnamed import ports get one made
// from protocol and number (they have no SRV records either way).
func derivedPorts(in []mcsv1beta1.ServicePort) []corev1.ServicePort {
	out := make([]corev1.ServicePort, 0, len(in))
	used := make(map[string]bool, len(in))
	for _, p := range in {
		used[p.Name] = true
	}
	for _, p := range in {
		sp := corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, AppProtocol: p.AppProtocol}
		if sp.Protocol == "" {
			sp.Protocol = corev1.ProtocolTCP
		}
		if sp.Name == "" && len(in) > 1 {
			// A name no other port of the import has ("tcp-80", else
			// "tcp-80-2", ...): a Service's port names are unique.
			base := fmt.Sprintf("%s-%d", strings.ToLower(string(sp.Protocol)), sp.Port)
			sp.Name = base
			for i := 2; used[sp.Name]; i++ {
				sp.Name = fmt.Sprintf("%s-%d", base, i)
			}
			used[sp.Name] = true
		}
		out = append(out, sp)
	}
	if len(out) == 0 {
		// A Service needs a port; an import without ports still gets a VIP.
		out = append(out, corev1.ServicePort{Name: "none", Protocol: corev1.ProtocolTCP, Port: 1})
	}
	return out
}

// clientIPTimeout is the API server's default ClientIP affinity timeout
// (3 hours), filled in where a ClientIP Service names none.
const clientIPTimeout int32 = 10800

// derivedAffinity is the session affinity a derived Service of an import
// with spec has, as the API server stores it: None with no config (it
// refuses a config then), or ClientIP with its timeout defaulted.
func derivedAffinity(spec mcsv1beta1.ServiceImportSpec) (corev1.ServiceAffinity, *corev1.SessionAffinityConfig) {
	if spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		return corev1.ServiceAffinityNone, nil
	}
	timeout := clientIPTimeout
	if c := spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		timeout = *c.ClientIP.TimeoutSeconds
	}
	return corev1.ServiceAffinityClientIP, &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(timeout)}}
}

// mutableSpecEqual reports whether the fields of a derived Service that
// follow its import in place (ports, session affinity) are want's.
func mutableSpecEqual(want, have *corev1.Service) bool {
	return portsEqual(want.Spec.Ports, have.Spec.Ports) && affinityEqual(want, have)
}

func affinityEqual(want, have *corev1.Service) bool {
	wa, ha := want.Spec.SessionAffinity, have.Spec.SessionAffinity
	if ha == "" {
		ha = corev1.ServiceAffinityNone
	}
	if wa != ha {
		return false
	}
	if wa != corev1.ServiceAffinityClientIP {
		return true
	}
	timeout := func(c *corev1.SessionAffinityConfig) int32 {
		if c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
			return clientIPTimeout
		}
		return *c.ClientIP.TimeoutSeconds
	}
	return timeout(want.Spec.SessionAffinityConfig) == timeout(have.Spec.SessionAffinityConfig)
}

func portsEqual(want, have []corev1.ServicePort) bool {
	return slices.EqualFunc(want, have, func(a, b corev1.ServicePort) bool {
		return a.Name == b.Name && a.Protocol == b.Protocol && a.Port == b.Port && ptr.Equal(a.AppProtocol, b.AppProtocol)
	})
}

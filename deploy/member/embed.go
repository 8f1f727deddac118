// Package member embeds the manifests every member cluster needs so that
// mcs-importer can reach it (the files of this folder's kustomization):
// namespace mcs-dns-system, ServiceAccount mcs-importer-member, its
// ClusterRole and bindings, the leader-election Role and the aggregated
// export roles. `kubectl mcs join` applies exactly these objects, so the
// manifests `kubectl apply -k deploy/member` installs and the ones join
// installs are one source.
package member

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

//go:embed namespace.yaml rbac.yaml aggregate-roles.yaml
var files embed.FS

// Files lists the embedded manifests in the kustomization's order, which
// is also install order (the namespace first).
var Files = []string{"namespace.yaml", "rbac.yaml", "aggregate-roles.yaml"}

// Namespace and ServiceAccount name the importer's identity in a member.
const (
	Namespace      = "mcs-dns-system"
	ServiceAccount = "mcs-importer-member"
)

// Raw returns the bytes of one embedded manifest.
func Raw(name string) ([]byte, error) { return files.ReadFile(name) }

// Objects decodes every object of the embedded manifests, in install order.
func Objects() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, name := range Files {
		raw, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("decoding %s: %w", name, err)
			}
			if len(m) == 0 {
				continue
			}
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out, nil
}

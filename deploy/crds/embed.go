// Package crds embeds the CustomResourceDefinitions mcs-dns needs in every
// member cluster: mcs-api v0.5.2's ServiceExport and ServiceImport (copied
// verbatim from sigs.k8s.io/mcs-api/config/crd) and the About API
// ClusterProperty. The test harness installs exactly these files, so the
// manifests we ship are the ones the tests prove.
package crds

import (
	"embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed *.k8s.io_*.yaml multicluster.x-k8s.io_*.yaml
var files embed.FS

// Files lists the embedded CRD manifests in install order.
var Files = []string{
	"multicluster.x-k8s.io_serviceexports.yaml",
	"multicluster.x-k8s.io_serviceimports.yaml",
	"about.k8s.io_clusterproperties.yaml",
}

// Raw returns the bytes of one embedded manifest.
func Raw(name string) ([]byte, error) { return files.ReadFile(name) }

// All decodes every embedded CRD.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(Files))
	for _, name := range Files {
		raw, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", name, err)
		}
		out = append(out, crd)
	}
	return out, nil
}

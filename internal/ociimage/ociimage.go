// Package ociimage builds mcs-dns's container images without a container
// runtime: each image is one static binary on an empty base, in a single
// layer, and every byte of it follows from the source tree, the Go
// toolchain and the build's Meta, so the same commit gives the same
// digests wherever it is built.
//
// Build writes, per program, an OCI image layout holding an image index of
// every platform (for `crane push`, skopeo, or a registry mirror) and, per
// platform, a `docker save`-style tarball (for `docker load` and
// `podman load`).
package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// User is the user and group every image runs as: not root, and numeric,
// since an empty base has no /etc/passwd to look a name up in. 65532 is the
// "nonroot" user of distroless images, which clusters' policies often
// expect.
const User = "65532:65532"

// Label keys of the OCI image spec's pre-defined annotations.
const (
	LabelTitle    = "org.opencontainers.image.title"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
)

// Program is one binary and the image it becomes.
type Program struct {
	// Name is the binary's and the image's name: the file is /<Name>.
	Name string
	// Package is the Go package to build, relative to the module root.
	Package string
}

// Programs are the images `make images` builds.
var Programs = []Program{
	{Name: "coredns", Package: "./cmd/coredns"},
	{Name: "mcs-importer", Package: "./cmd/mcs-importer"},
}

// Platforms are the platforms `make images` builds for.
var Platforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64", Variant: "v8"},
}

// Meta is what an image says about the build it came from. It is the only
// input besides the binary, so equal Meta and equal binaries give equal
// digests.
type Meta struct {
	// Version tags the images (<repository>/<name>:<Version>) and is their
	// version label.
	Version string
	// Revision is the source's commit, the revision label.
	Revision string
	// Created is the images' creation time and the binary's mtime: a
	// fixed time (the commit's), never the time of the build.
	Created time.Time
}

func (m Meta) validate() error {
	if m.Version == "" {
		return fmt.Errorf("no version")
	}
	if _, err := name.NewTag("x:" + m.Version); err != nil {
		return fmt.Errorf("version %q cannot be an image tag: %w", m.Version, err)
	}
	if m.Revision == "" {
		return fmt.Errorf("no revision")
	}
	return nil
}

// HostPlatform is the platform of this process, with the variant Platforms
// gives it.
func HostPlatform() v1.Platform {
	for _, p := range Platforms {
		if p.OS == runtime.GOOS && p.Architecture == runtime.GOARCH {
			return p
		}
	}
	return v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
}

// ParsePlatform parses os/arch[/variant].
func ParsePlatform(s string) (v1.Platform, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return v1.Platform{}, fmt.Errorf("platform %q is not os/arch[/variant]", s)
	}
	p := v1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}

func platformString(p v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// Compile cross-compiles the Go package pkg of the module in dir into the
// static binary out, for platform p.
func Compile(ctx context.Context, dir, pkg string, p v1.Platform, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build",
		"-trimpath",
		// The revision is in the image's labels; leaving VCS stamping out
		// keeps the binary the same whether or not the go command finds
		// git, and whatever GOFLAGS the caller has.
		"-buildvcs=false",
		// -buildid= : the build ID hashes inputs that include the build's
		// paths; without it two checkouts of one commit would differ.
		"-ldflags=-s -w -buildid=",
		"-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0", // static: the image has no libc
		"GOOS="+p.OS,
		"GOARCH="+p.Architecture,
		// The baseline instruction sets, whatever the caller's
		// environment says, so that the images run on any machine of
		// their platform and do not depend on who built them.
		"GOAMD64=v1",
		"GOARM64=v8.0",
	)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %v\n%s", pkg, platformString(p), err, msg)
	}
	return nil
}

// Layer is a layer holding just the file /<name>: binary, mode 0555, owned
// by root (so that the user the image runs as may run it but not change
// it), with mtime created.
func Layer(name string, binary []byte, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     name,
		Mode:     0o555,
		Size:     int64(len(binary)),
		ModTime:  created.UTC(),
		Format:   tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// Image is binary as /<name> on an empty base, for platform p: an OCI image
// that runs it as User, with nothing else in its filesystem (no shell).
func Image(name string, binary []byte, p v1.Platform, m Meta) (v1.Image, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	created := v1.Time{Time: m.Created.UTC()}
	layer, err := Layer(name, binary, m.Created)
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   created,
			CreatedBy: "mcs-dns make images: /" + name,
			Comment:   "the static binary " + name,
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS = p.OS
	cf.Architecture = p.Architecture
	cf.Variant = p.Variant
	cf.Config = v1.Config{
		User:       User,
		Entrypoint: []string{"/" + name},
		WorkingDir: "/",
		Labels: map[string]string{
			LabelTitle:    name,
			LabelVersion:  m.Version,
			LabelRevision: m.Revision,
		},
	}
	return mutate.ConfigFile(img, cf)
}

// Index is an OCI image index of imgs, each under the platform of its
// config, in the order given.
func Index(imgs ...v1.Image) (v1.ImageIndex, error) {
	adds := make([]mutate.IndexAddendum, 0, len(imgs))
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				Platform: &v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant},
			},
		})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}

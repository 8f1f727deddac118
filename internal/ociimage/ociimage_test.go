package ociimage_test

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"

	"github.com/mcs-dns/mcs-dns/internal/ociimage"
)

var (
	meta = ociimage.Meta{
		Version:  "v1.2.3",
		Revision: "0123456789abcdef0123456789abcdef01234567",
		Created:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	amd64 = ociimage.Platforms[0]
	arm64 = ociimage.Platforms[1]
	// A stand-in for a binary: the image does not look inside it.
	binary = []byte("\x7fELF not really, but bytes all the same")
)

func digest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	require.NoError(t, err)
	return d
}

func TestImageConfig(t *testing.T) {
	img, err := ociimage.Image("mcs-importer", binary, arm64, meta)
	require.NoError(t, err)

	mt, err := img.MediaType()
	require.NoError(t, err)
	require.Equal(t, types.OCIManifestSchema1, mt)
	m, err := img.Manifest()
	require.NoError(t, err)
	require.Equal(t, types.OCIConfigJSON, m.Config.MediaType)
	require.Len(t, m.Layers, 1)
	require.Equal(t, types.OCILayer, m.Layers[0].MediaType)

	cf, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, "linux", cf.OS)
	require.Equal(t, "arm64", cf.Architecture)
	require.Equal(t, "v8", cf.Variant)
	require.True(t, cf.Created.Time.Equal(meta.Created), "created %s", cf.Created)
	require.Equal(t, "65532:65532", cf.Config.User)
	require.Equal(t, []string{"/mcs-importer"}, cf.Config.Entrypoint)
	require.Empty(t, cf.Config.Cmd)
	require.Equal(t, "/", cf.Config.WorkingDir)
	require.Equal(t, map[string]string{
		"org.opencontainers.image.title":    "mcs-importer",
		"org.opencontainers.image.version":  "v1.2.3",
		"org.opencontainers.image.revision": meta.Revision,
	}, cf.Config.Labels)
	require.Len(t, cf.RootFS.DiffIDs, 1)
	require.Len(t, cf.History, 1)
}

// The filesystem is the binary and nothing else: no shell, no /etc.
func TestImageFilesystem(t *testing.T) {
	img, err := ociimage.Image("coredns", binary, amd64, meta)
	require.NoError(t, err)
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	require.NoError(t, err)
	require.Equal(t, "coredns", hdr.Name)
	require.Equal(t, byte(tar.TypeReg), hdr.Typeflag)
	require.Equal(t, int64(0o555), hdr.Mode)
	require.Equal(t, 0, hdr.Uid)
	require.Equal(t, 0, hdr.Gid)
	require.True(t, hdr.ModTime.Equal(meta.Created), "mtime %s", hdr.ModTime)
	got, err := io.ReadAll(tr)
	require.NoError(t, err)
	require.Equal(t, binary, got)
	_, err = tr.Next()
	require.ErrorIs(t, err, io.EOF, "a second file in the image")
}

// Equal inputs give equal digests; each input shows in the digest.
func TestImageReproducible(t *testing.T) {
	build := func(name string, bin []byte, p v1.Platform, m ociimage.Meta) v1.Hash {
		t.Helper()
		img, err := ociimage.Image(name, bin, p, m)
		require.NoError(t, err)
		return digest(t, img)
	}
	base := build("coredns", binary, amd64, meta)
	require.Equal(t, base, build("coredns", bytes.Clone(binary), amd64, meta))

	other := meta
	other.Revision = "fedcba9876543210fedcba9876543210fedcba98"
	later := meta
	later.Created = meta.Created.Add(time.Second)
	version := meta
	version.Version = "v1.2.4"
	for what, d := range map[string]v1.Hash{
		"binary":   build("coredns", append(bytes.Clone(binary), 0), amd64, meta),
		"name":     build("mcs-importer", binary, amd64, meta),
		"platform": build("coredns", binary, arm64, meta),
		"revision": build("coredns", binary, amd64, other),
		"created":  build("coredns", binary, amd64, later),
		"version":  build("coredns", binary, amd64, version),
	} {
		require.NotEqual(t, base, d, "a different %s gave the same digest", what)
	}
}

func TestImageNeedsMeta(t *testing.T) {
	for _, m := range []ociimage.Meta{
		{Revision: meta.Revision},
		{Version: "v1", Revision: ""},
		{Version: "not a tag", Revision: meta.Revision},
	} {
		_, err := ociimage.Image("coredns", binary, amd64, m)
		require.Error(t, err, "%+v", m)
	}
}

// What WriteLayout and WriteTarball write reads back as the same images:
// the layout as an index of both platforms, each tarball as its image,
// tagged.
func TestWriteReadBack(t *testing.T) {
	dir := t.TempDir()
	a, err := ociimage.Image("coredns", binary, amd64, meta)
	require.NoError(t, err)
	b, err := ociimage.Image("coredns", binary, arm64, meta)
	require.NoError(t, err)
	idx, err := ociimage.Index(a, b)
	require.NoError(t, err)

	lay := filepath.Join(dir, "coredns")
	require.NoError(t, ociimage.WriteLayout(lay, idx, meta.Version))
	// Writing again replaces, not appends.
	require.NoError(t, ociimage.WriteLayout(lay, idx, meta.Version))
	top, err := layout.ImageIndexFromPath(lay)
	require.NoError(t, err)
	tm, err := top.IndexManifest()
	require.NoError(t, err)
	require.Len(t, tm.Manifests, 1)
	require.Equal(t, types.OCIImageIndex, tm.Manifests[0].MediaType)
	require.Equal(t, meta.Version, tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
	wantIdx, err := idx.Digest()
	require.NoError(t, err)
	require.Equal(t, wantIdx, tm.Manifests[0].Digest)

	inner, err := top.ImageIndex(tm.Manifests[0].Digest)
	require.NoError(t, err)
	im, err := inner.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 2)
	for i, want := range []v1.Image{a, b} {
		desc := im.Manifests[i]
		require.Equal(t, digest(t, want), desc.Digest)
		require.Equal(t, ociimage.Platforms[i], *desc.Platform)
		got, err := inner.Image(desc.Digest)
		require.NoError(t, err)
		require.Equal(t, digest(t, want), digest(t, got))
	}

	tags, err := ociimage.Tags("mcs-dns", "coredns", meta.Version)
	require.NoError(t, err)
	require.Len(t, tags, 2)
	require.Equal(t, "mcs-dns/coredns:v1.2.3", tags[0].String())
	require.Equal(t, "mcs-dns/coredns:latest", tags[1].String())
	tb := filepath.Join(dir, ociimage.TarballName("coredns", amd64))
	require.Equal(t, "coredns-linux-amd64.tar", filepath.Base(tb))
	require.NoError(t, ociimage.WriteTarball(tb, a, tags))
	first, err := os.ReadFile(tb)
	require.NoError(t, err)
	for range 5 {
		again := filepath.Join(dir, "again.tar")
		require.NoError(t, ociimage.WriteTarball(again, a, tags))
		raw, err := os.ReadFile(again)
		require.NoError(t, err)
		require.True(t, bytes.Equal(first, raw), "two tarballs of one image differ")
	}
	mf, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return openFile(tb) })
	require.NoError(t, err)
	require.Len(t, mf, 1)
	require.Equal(t, []string{"mcs-dns/coredns:v1.2.3", "mcs-dns/coredns:latest"}, mf[0].RepoTags)
	loaded, err := tarball.ImageFromPath(tb, &tags[0])
	require.NoError(t, err)
	// `docker save` has no manifest of its own; what `docker load` keys
	// the image by is its config, the image ID.
	wantID, err := a.ConfigName()
	require.NoError(t, err)
	gotID, err := loaded.ConfigName()
	require.NoError(t, err)
	require.Equal(t, wantID, gotID)
	wantLayers, err := a.Layers()
	require.NoError(t, err)
	gotLayers, err := loaded.Layers()
	require.NoError(t, err)
	require.Len(t, gotLayers, 1)
	wd, err := wantLayers[0].DiffID()
	require.NoError(t, err)
	gd, err := gotLayers[0].DiffID()
	require.NoError(t, err)
	require.Equal(t, wd, gd)
}

func TestParsePlatform(t *testing.T) {
	p, err := ociimage.ParsePlatform("linux/arm64/v8")
	require.NoError(t, err)
	require.Equal(t, arm64, p)
	p, err = ociimage.ParsePlatform("linux/amd64")
	require.NoError(t, err)
	require.Equal(t, amd64, p)
	for _, bad := range []string{"", "linux", "linux/", "/amd64", "a/b/c/d"} {
		_, err := ociimage.ParsePlatform(bad)
		require.Error(t, err, bad)
	}
}

func openFile(path string) (io.ReadCloser, error) { return os.Open(path) }

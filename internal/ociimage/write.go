package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Tags are the tags a tarball of the image of program carries:
// <repository>/<program>:<version> and :latest (the tag the manifests in
// deploy/ name).
func Tags(repository, program, version string) ([]name.Tag, error) {
	var tags []name.Tag
	for _, v := range []string{version, "latest"} {
		t, err := name.NewTag(repository + "/" + program + ":" + v)
		if err != nil {
			return nil, err
		}
		tags = append(tags, t)
	}
	return tags, nil
}

// TarballName is the file name of the tarball of the image name for p.
func TarballName(name string, p v1.Platform) string {
	return name + "-" + p.OS + "-" + p.Architecture + ".tar"
}

// WriteLayout writes idx as the OCI image layout dir (replacing whatever
// was there), its one entry named version.
func WriteLayout(dir string, idx v1.ImageIndex, version string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		// What `skopeo copy oci:<dir>:<version>` and containerd look for.
		"org.opencontainers.image.ref.name": version,
	}))
}

// WriteTarball writes img as a `docker save`-style tarball at path, tagged
// with tags in their order. (go-containerregistry's tarball writers order
// several tags of one image as a map iteration does, so the same image
// would give tarballs that differ; this one gives the same bytes.)
func WriteTarball(path string, img v1.Image, tags []name.Tag) (err error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	// Every entry's mtime is the image's: nothing of the time of writing.
	mtime := cf.Created.Time.UTC()
	cfgName, err := img.ConfigName()
	if err != nil {
		return err
	}
	rawCfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	desc := tarball.Descriptor{Config: cfgName.Hex + ".json"}
	for _, t := range tags {
		desc.RepoTags = append(desc.RepoTags, t.String())
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		desc.Layers = append(desc.Layers, d.Hex+".tar.gz")
	}
	manifest, err := json.Marshal(tarball.Manifest{desc})
	if err != nil {
		return err
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	entry := func(name string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: mtime, Format: tar.FormatUSTAR,
		}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	if err := entry(desc.Config, int64(len(rawCfg)), bytes.NewReader(rawCfg)); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, l := range layers {
		if seen[desc.Layers[i]] {
			continue
		}
		seen[desc.Layers[i]] = true
		mt, err := l.MediaType()
		if err != nil {
			return err
		}
		if mt != types.OCILayer && mt != types.DockerLayer {
			return fmt.Errorf("layer %s is %s, not a gzipped tar", desc.Layers[i], mt)
		}
		size, err := l.Size()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		err = entry(desc.Layers[i], size, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	if err := entry("manifest.json", int64(len(manifest)), bytes.NewReader(manifest)); err != nil {
		return err
	}
	return tw.Close()
}

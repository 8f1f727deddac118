package ociimage

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Options say what Build builds.
type Options struct {
	// Dir is the module root to build in.
	Dir string
	// Out is the folder the layouts and tarballs go to.
	Out string
	// Repository prefixes the tarballs' tags (<Repository>/<name>:<version>).
	Repository string
	// Programs to build (default Programs).
	Programs []Program
	// Platforms to build for (default Platforms).
	Platforms []v1.Platform
	Meta      Meta
	// Log, if set, gets a line per step.
	Log io.Writer
}

// Result is one program's images, as written.
type Result struct {
	Name string
	// Layout is the OCI image layout folder; Index the digest of the image
	// index in it.
	Layout string
	Index  v1.Hash
	Images []Platform
}

// Platform is one program's image for one platform.
type Platform struct {
	Platform v1.Platform
	// Digest is the image manifest's digest (what a registry serves it
	// under); Config its config's, the image ID `docker images` shows.
	Digest  v1.Hash
	Config  v1.Hash
	Tarball string
}

// Build compiles each program for each platform and writes, under
// o.Out, the OCI image layout <name>/ with an index of every platform and
// the tarballs <name>-<os>-<arch>.tar.
func Build(ctx context.Context, o Options) ([]Result, error) {
	if err := o.Meta.validate(); err != nil {
		return nil, err
	}
	programs, platforms := o.Programs, o.Platforms
	if programs == nil {
		programs = Programs
	}
	if platforms == nil {
		platforms = Platforms
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "mcs-dns-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	var results []Result
	for _, prog := range programs {
		tags, err := Tags(o.Repository, prog.Name, o.Meta.Version)
		if err != nil {
			return nil, err
		}
		res := Result{Name: prog.Name, Layout: filepath.Join(o.Out, prog.Name)}
		var imgs []v1.Image
		for _, p := range platforms {
			logf("building %s for %s", prog.Name, platformString(p))
			bin := filepath.Join(work, prog.Name+"-"+p.OS+"-"+p.Architecture)
			if err := Compile(ctx, o.Dir, prog.Package, p, bin); err != nil {
				return nil, err
			}
			raw, err := os.ReadFile(bin)
			if err != nil {
				return nil, err
			}
			img, err := Image(prog.Name, raw, p, o.Meta)
			if err != nil {
				return nil, fmt.Errorf("%s for %s: %w", prog.Name, platformString(p), err)
			}
			built := Platform{Platform: p, Tarball: filepath.Join(o.Out, TarballName(prog.Name, p))}
			if built.Digest, err = img.Digest(); err != nil {
				return nil, err
			}
			if built.Config, err = img.ConfigName(); err != nil {
				return nil, err
			}
			if err := WriteTarball(built.Tarball, img, tags); err != nil {
				return nil, fmt.Errorf("writing %s: %w", built.Tarball, err)
			}
			imgs = append(imgs, img)
			res.Images = append(res.Images, built)
		}
		idx, err := Index(imgs...)
		if err != nil {
			return nil, err
		}
		if res.Index, err = idx.Digest(); err != nil {
			return nil, err
		}
		if err := WriteLayout(res.Layout, idx, o.Meta.Version); err != nil {
			return nil, fmt.Errorf("writing %s: %w", res.Layout, err)
		}
		results = append(results, res)
	}
	return results, nil
}

// Summary is the digests of results, a line each, for people and for
// comparing two builds.
func Summary(results []Result) string {
	var b strings.Builder
	for _, r := range results {
		fmt.Fprintf(&b, "%s index %s (%s)\n", r.Name, r.Index, r.Layout)
		for _, img := range r.Images {
			fmt.Fprintf(&b, "%s %s %s (%s; image ID %s)\n", r.Name, platformString(img.Platform), img.Digest, img.Tarball, img.Config)
		}
	}
	return b.String()
}

// Command images builds the container images of coredns and mcs-importer
// (`make images`) with no container runtime: static binaries on an empty
// base, per program an OCI image layout with an index of every platform
// and per platform a `docker save`-style tarball, under -out. It prints
// each image's digest; the same commit, built with the same Go toolchain,
// gives the same digests.
//
// The version, revision and creation time default to what git says of the
// checkout (`git describe --tags --always --dirty`, HEAD, and HEAD's commit
// time, or SOURCE_DATE_EPOCH when set).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/mcs-dns/mcs-dns/internal/ociimage"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if _, err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "images: %v\n", err)
		}
		os.Exit(2)
	}
}

// run builds what args say, logs progress to stderr and prints the
// digests to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) ([]ociimage.Result, error) {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "bin/images", "`folder` to write the OCI layouts and tarballs to")
	dir := fs.String("dir", ".", "the module's root `folder`")
	repo := fs.String("repository", "mcs-dns", "`repository` prefix of the tarballs' tags (<repository>/<name>:<version> and :latest)")
	version := fs.String("version", "", "the images' `version` label and tag (default: git describe --tags --always --dirty)")
	revision := fs.String("revision", "", "the images' revision label, a `commit` (default: git rev-parse HEAD)")
	created := fs.String("created", "", "the images' creation time in Unix `seconds` (default: $SOURCE_DATE_EPOCH, else the commit time of HEAD)")
	programs := fs.String("programs", "", "comma-separated `names` of the programs to build (default: all: coredns,mcs-importer)")
	platforms := fs.String("platforms", "", "comma-separated os/arch[/variant] `platforms` to build for, or \"host\" (default: linux/amd64,linux/arm64/v8)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	o := ociimage.Options{Dir: *dir, Out: *out, Repository: *repo, Log: stderr}
	var err error
	if o.Programs, err = selectPrograms(*programs); err != nil {
		return nil, err
	}
	if o.Platforms, err = parsePlatforms(*platforms); err != nil {
		return nil, err
	}
	if o.Meta, err = meta(*dir, *version, *revision, *created); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "version %s, revision %s, created %s\n", o.Meta.Version, o.Meta.Revision, o.Meta.Created.Format(time.RFC3339))
	results, err := ociimage.Build(ctx, o)
	if err != nil {
		return nil, err
	}
	fmt.Fprint(stdout, ociimage.Summary(results))
	return results, nil
}

func selectPrograms(list string) ([]ociimage.Program, error) {
	if list == "" {
		return ociimage.Programs, nil
	}
	var out []ociimage.Program
next:
	for _, n := range strings.Split(list, ",") {
		for _, p := range ociimage.Programs {
			if p.Name == n {
				out = append(out, p)
				continue next
			}
		}
		return nil, fmt.Errorf("no program %q (there are coredns and mcs-importer)", n)
	}
	return out, nil
}

func parsePlatforms(list string) ([]v1.Platform, error) {
	switch list {
	case "":
		return ociimage.Platforms, nil
	case "host":
		return []v1.Platform{ociimage.HostPlatform()}, nil
	}
	var out []v1.Platform
	for _, s := range strings.Split(list, ",") {
		p, err := ociimage.ParsePlatform(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// meta fills in what the flags leave empty from git and SOURCE_DATE_EPOCH.
func meta(dir, version, revision, created string) (ociimage.Meta, error) {
	m := ociimage.Meta{Version: version, Revision: revision}
	var err error
	if m.Version == "" {
		if m.Version, err = git(dir, "describe", "--tags", "--always", "--dirty"); err != nil {
			return m, err
		}
	}
	if m.Revision == "" {
		if m.Revision, err = git(dir, "rev-parse", "HEAD"); err != nil {
			return m, err
		}
	}
	if created == "" {
		created = os.Getenv("SOURCE_DATE_EPOCH")
	}
	if created == "" {
		// The commit's time, not the build's: a rebuild of the commit
		// then gives the same image.
		if created, err = git(dir, "log", "-1", "--format=%ct", "HEAD"); err != nil {
			return m, err
		}
	}
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		return m, fmt.Errorf("creation time %q is not Unix seconds", created)
	}
	m.Created = time.Unix(secs, 0).UTC()
	return m, nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%v: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("git %s: %w (or pass the value as a flag)", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"

	"github.com/mcs-dns/mcs-dns/internal/ociimage"
	"github.com/mcs-dns/mcs-dns/test/cluster"
	"github.com/mcs-dns/mcs-dns/test/procs"
)

const (
	testVersion  = "v0.0.0-test"
	testRevision = "0123456789abcdef0123456789abcdef01234567"
	testCreated  = "1767225600" // 2026-01-01T00:00:00Z
)

// build runs the command as `make images` does, for the host's platform
// only, into a fresh folder.
func build(t *testing.T, programs string) (string, []ociimage.Result) {
	t.Helper()
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	results, err := run(context.Background(), []string{
		"-dir", "../..", "-out", out, "-platforms", "host", "-programs", programs,
		"-version", testVersion, "-revision", testRevision, "-created", testCreated,
	}, &stdout, &stderr)
	require.NoError(t, err, "stderr:\n%s", &stderr)
	t.Logf("built %s in %s:\n%s", programs, time.Since(start).Round(time.Second), &stdout)
	return out, results
}

func result(t *testing.T, results []ociimage.Result, name string) ociimage.Result {
	t.Helper()
	for _, r := range results {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no %s among the results", name)
	return ociimage.Result{}
}

// layoutImage reads the host platform's image out of the OCI layout dir,
// checking the layout's shape on the way.
func layoutImage(t *testing.T, dir string) v1.Image {
	t.Helper()
	top, err := layout.ImageIndexFromPath(dir)
	require.NoError(t, err)
	tm, err := top.IndexManifest()
	require.NoError(t, err)
	require.Len(t, tm.Manifests, 1)
	require.Equal(t, testVersion, tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	require.NoError(t, err)
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 1)
	require.Equal(t, ociimage.HostPlatform(), *im.Manifests[0].Platform)
	img, err := idx.Image(im.Manifests[0].Digest)
	require.NoError(t, err)
	return img
}

// unpack extracts img's filesystem under a fresh folder, requires it to be
// the one file /<name> (no shell, nothing else) and returns that file's
// path.
func unpack(t *testing.T, img v1.Image, name string) string {
	t.Helper()
	dir := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var files []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		files = append(files, hdr.Name)
		require.Equal(t, byte(tar.TypeReg), hdr.Typeflag, hdr.Name)
		require.Equal(t, int64(0o555), hdr.Mode, hdr.Name)
		f, err := os.OpenFile(filepath.Join(dir, filepath.Base(hdr.Name)), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o555)
		require.NoError(t, err)
		_, err = io.Copy(f, tr)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	require.Equal(t, []string{name}, files, "the image's files")
	require.NotContains(t, files, "bin/sh")
	return filepath.Join(dir, name)
}

func requireConfig(t *testing.T, img v1.Image, name string) {
	t.Helper()
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, "65532:65532", cf.Config.User)
	require.Equal(t, []string{"/" + name}, cf.Config.Entrypoint)
	require.Equal(t, testVersion, cf.Config.Labels["org.opencontainers.image.version"])
	require.Equal(t, testRevision, cf.Config.Labels["org.opencontainers.image.revision"])
	require.Equal(t, name, cf.Config.Labels["org.opencontainers.image.title"])
	require.Equal(t, ociimage.HostPlatform().Architecture, cf.Architecture)
	require.Equal(t, "linux", cf.OS)
	require.Equal(t, int64(1767225600), cf.Created.Unix())
}

// readyz is the status and body of mcs-importer's /readyz on addr (0 if
// it does not answer).
func readyz(addr string) (int, string) {
	// No keep-alive: no connection (and goroutine) outlives the poll.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// The images `make images` builds, for the host's platform: the same
// inputs give the same digests; each image is its one static binary,
// configured to run as non-root; the mcs-importer in the image joins a
// real member cluster and reports ready; the coredns in the image runs.
//
// To keep the test's time down it builds for the host's platform only
// (`make images` builds linux/amd64 and linux/arm64 alike), and compares
// two builds of mcs-importer, the smaller binary, not of coredns.
func TestImagesReproducibleAndRun(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles coredns and mcs-importer and starts an API server")
	}
	out1, first := build(t, "coredns,mcs-importer")
	out2, second := build(t, "mcs-importer")

	a, b := result(t, first, "mcs-importer"), result(t, second, "mcs-importer")
	require.Equal(t, a.Index, b.Index, "two builds of one tree gave different indexes")
	require.Len(t, a.Images, 1)
	require.Len(t, b.Images, 1)
	require.Equal(t, a.Images[0].Digest, b.Images[0].Digest, "two builds of one tree gave different images")
	require.Equal(t, filepath.Join(out1, ociimage.TarballName("mcs-importer", ociimage.HostPlatform())), a.Images[0].Tarball)
	require.Equal(t, filepath.Join(out2, "mcs-importer"), b.Layout)
	t1, err := os.ReadFile(a.Images[0].Tarball)
	require.NoError(t, err)
	t2, err := os.ReadFile(b.Images[0].Tarball)
	require.NoError(t, err)
	require.True(t, bytes.Equal(t1, t2), "two builds of one tree gave different tarballs")

	// The image as the layout holds it (what a registry gets) and as the
	// tarball holds it (what `docker load` gets) are one image.
	img := layoutImage(t, a.Layout)
	d, err := img.Digest()
	require.NoError(t, err)
	require.Equal(t, a.Images[0].Digest, d)
	requireConfig(t, img, "mcs-importer")
	fromTar, err := tarball.ImageFromPath(a.Images[0].Tarball, nil)
	require.NoError(t, err)
	id, err := fromTar.ConfigName()
	require.NoError(t, err)
	require.Equal(t, a.Images[0].Config, id)
	requireConfig(t, fromTar, "mcs-importer")

	t.Run("mcs-importer joins a member", func(t *testing.T) {
		bin := unpack(t, img, "mcs-importer")
		set := cluster.Start(t, cluster.Names("east")...)
		addr := fmt.Sprintf("127.0.0.1:%d", procs.FreePort(t))
		p := procs.Start(t, "mcs-importer (from the image)", bin,
			"--kubeconfig", set.Kubeconfig, "--contexts", "east", "--metrics-addr", addr)
		// Ready: it reached the member with the credentials given and
		// works on it.
		var code int
		var body string
		for deadline := time.Now().Add(60 * time.Second); code != http.StatusOK; time.Sleep(200 * time.Millisecond) {
			if p.Exited() {
				t.Fatalf("mcs-importer exited: %v\n%s", p.Wait(), p.Output())
			}
			if time.Now().After(deadline) {
				t.Fatalf("not ready within 60s; last /readyz: %d %s", code, body)
			}
			code, body = readyz(addr)
		}
		require.Contains(t, body, "member east: up")
	})

	t.Run("coredns runs", func(t *testing.T) {
		c := result(t, first, "coredns")
		img := layoutImage(t, c.Layout)
		requireConfig(t, img, "coredns")
		bin := unpack(t, img, "coredns")
		out, err := exec.Command(bin, "-version").CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.True(t, strings.HasPrefix(string(out), "CoreDNS-"), "coredns -version said:\n%s", out)
	})
}

func TestFlags(t *testing.T) {
	progs, err := selectPrograms("mcs-importer")
	require.NoError(t, err)
	require.Equal(t, []ociimage.Program{{Name: "mcs-importer", Package: "./cmd/mcs-importer"}}, progs)
	progs, err = selectPrograms("")
	require.NoError(t, err)
	require.Equal(t, ociimage.Programs, progs)
	_, err = selectPrograms("coredns,kubectl-mcs")
	require.Error(t, err)

	plats, err := parsePlatforms("host")
	require.NoError(t, err)
	require.Equal(t, []v1.Platform{ociimage.HostPlatform()}, plats)
	plats, err = parsePlatforms("")
	require.NoError(t, err)
	require.Equal(t, ociimage.Platforms, plats)
	plats, err = parsePlatforms("linux/amd64,linux/arm64/v8")
	require.NoError(t, err)
	require.Equal(t, ociimage.Platforms, plats)
	_, err = parsePlatforms("linux")
	require.Error(t, err)

	// Given every value, meta asks git nothing.
	m, err := meta("/nonexistent", testVersion, testRevision, testCreated)
	require.NoError(t, err)
	require.Equal(t, ociimage.Meta{Version: testVersion, Revision: testRevision, Created: time.Unix(1767225600, 0).UTC()}, m)
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	m, err = meta("/nonexistent", testVersion, testRevision, "")
	require.NoError(t, err)
	require.Equal(t, int64(1700000000), m.Created.Unix())
	_, err = meta("/nonexistent", testVersion, testRevision, "yesterday")
	require.Error(t, err)

	_, err = run(context.Background(), []string{"stray"}, io.Discard, io.Discard)
	require.Error(t, err)
}

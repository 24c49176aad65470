// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// writeTarGz writes files (name → content) as a gzip-compressed tar.
func writeTarGz(t *testing.T, path string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(content))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readLayout returns what a layout's index.json lists, the image index
// listed first and that index's platform entries.
func readLayout(t *testing.T, out string) (entries *v1.IndexManifest, idx v1.ImageIndex, platforms *v1.IndexManifest) {
	t.Helper()
	lp, err := layout.FromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	if entries, err = top.IndexManifest(); err != nil {
		t.Fatal(err)
	}
	if idx, err = top.ImageIndex(entries.Manifests[0].Digest); err != nil {
		t.Fatal(err)
	}
	if platforms, err = idx.IndexManifest(); err != nil {
		t.Fatal(err)
	}
	return entries, idx, platforms
}

// TestBuildWithRootfs: an image over a root filesystem has it as its first
// layer, keeps its users (adding nonroot), runs as the user given and
// records ports and volumes, as a Dockerfile's USER, EXPOSE and VOLUME do.
func TestBuildWithRootfs(t *testing.T) {
	dir, bin, ca := buildInputs(t)
	rootfs := filepath.Join(dir, "rootfs.tar.gz")
	writeTarGz(t, rootfs, map[string]string{
		"etc/passwd":        "root:x:0:0:root:/root:/usr/sbin/nologin\nmessagebus:x:100:101::/nonexistent:/usr/sbin/nologin\n",
		"etc/group":         "root:x:0:\nmessagebus:x:101:\n",
		"usr/bin/ganesha":   "daemon",
		"etc/nsswitch.conf": "passwd: files\n",
		dpkgStatusPath:      testStatus,
	})
	var binaries platformFlag
	if err := binaries.Set("linux/amd64=" + bin); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "images", "layout") // its parent does not exist yet, as in a fresh clone
	o := buildOptions{
		Name: "prov", Version: "v1", Revision: "abc", Source: "https://example.com", Tag: "v1",
		Created: time.Unix(1700000000, 0).UTC(), Binaries: binaries, CACertificates: ca, Out: out,
		RootFS: map[string]string{"linux/amd64": rootfs}, User: "0:0",
		ExposedPorts: []string{"2049/tcp"}, Volumes: []string{"/export"},
	}
	if _, err := build(o); err != nil {
		t.Fatal(err)
	}
	_, idx, im := readLayout(t, out)
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 3 {
		t.Fatalf("%d layers, want 3 (root filesystem, base, binary)", len(layers))
	}
	if got := layerFiles(t, layers[0]); got["usr/bin/ganesha"] != "daemon" {
		t.Errorf("the first layer is not the root filesystem: %v", got)
	}
	base := layerFiles(t, layers[1])
	for _, want := range []string{"messagebus:x:100:101:", "nonroot:x:65532:65532:", "root:x:0:0:"} {
		if !strings.Contains(base["etc/passwd"], want) {
			t.Errorf("/etc/passwd lacks %q:\n%s", want, base["etc/passwd"])
		}
	}
	if !strings.Contains(base["etc/group"], "messagebus:x:101:") || !strings.Contains(base["etc/group"], "nonroot:x:65532:") {
		t.Errorf("/etc/group lacks the root filesystem's groups or nonroot:\n%s", base["etc/group"])
	}
	if base["etc/nsswitch.conf"] != "passwd: files\n" {
		t.Errorf("nsswitch.conf is %q, want the root filesystem's", base["etc/nsswitch.conf"])
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "0:0" {
		t.Errorf("user %q, want 0:0", cfg.Config.User)
	}
	if _, ok := cfg.Config.ExposedPorts["2049/tcp"]; !ok {
		t.Errorf("exposed ports %v lack 2049/tcp", cfg.Config.ExposedPorts)
	}
	if _, ok := cfg.Config.Volumes["/export"]; !ok {
		t.Errorf("volumes %v lack /export", cfg.Config.Volumes)
	}
	if !strings.Contains(strings.Join(cfg.Config.Env, " "), "/usr/sbin") {
		t.Errorf("PATH %v lacks the sbin directories of the OS", cfg.Config.Env)
	}

	// Without a root filesystem for every platform the build fails.
	if err := binaries.Set("linux/arm64=" + bin); err != nil {
		t.Fatal(err)
	}
	o.Binaries = binaries
	if _, err := build(o); err == nil || !strings.Contains(err.Error(), "no root filesystem given for linux/arm64") {
		t.Errorf("a platform without a root filesystem gave %v", err)
	}
}

func layerFiles(t *testing.T, l v1.Layer) map[string]string {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err != nil {
			return files
		}
		var b bytes.Buffer
		if _, err := b.ReadFrom(tr); err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(hdr.Name, "./")] = b.String()
	}
}

// TestPlatformLabels: the index names arm's variant, and a -platform-label
// lands on its platform's image only (config label and manifest annotation).
func TestPlatformLabels(t *testing.T) {
	dir, bin, ca := buildInputs(t)
	var binaries platformFlag
	for _, p := range []string{"linux/amd64", "linux/arm/v7"} {
		if err := binaries.Set(p + "=" + bin); err != nil {
			t.Fatal(err)
		}
	}
	labels, err := parsePlatformLabels([]string{"linux/arm/v7=io.example.suites=bookworm,bookworm-updates"})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "layout")
	o := buildOptions{
		Name: "prov", Version: "v1", Revision: "abc", Source: "https://example.com",
		Created: time.Unix(1700000000, 0).UTC(), Binaries: binaries, CACertificates: ca, Out: out,
		PlatformLabels: labels,
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := build(o); err != nil {
		t.Fatal(err)
	}
	_, idx, im := readLayout(t, out)
	want := map[string]string{"linux/amd64": "", "linux/arm/v7": "bookworm,bookworm-updates"}
	for _, desc := range im.Manifests {
		p := desc.Platform.String()
		w, ok := want[p]
		if !ok {
			t.Errorf("index entry for %s, want one of %v", p, want)
			continue
		}
		delete(want, p)
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Platform().String(); got != p {
			t.Errorf("%s: the configuration says %s", p, got)
		}
		manifest, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if got, got2 := cfg.Config.Labels["io.example.suites"], manifest.Annotations["io.example.suites"]; got != w || got2 != w {
			t.Errorf("%s: label %q, annotation %q, want %q", p, got, got2, w)
		}
	}
	if len(want) > 0 {
		t.Errorf("the index lacks %v", want)
	}

	for _, bad := range []string{"linux/arm/v7=io.example.suites=", "linux/arm/v7=io.example.suites", "arm=k=v"} {
		if _, err := parsePlatformLabels([]string{bad}); err == nil {
			t.Errorf("-platform-label %q was accepted", bad)
		}
	}
	o.PlatformLabels, _ = parsePlatformLabels([]string{"linux/s390x=k=v"})
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "linux/s390x, which has no -binary") {
		t.Errorf("a label for a platform without a binary gave %v", err)
	}
}

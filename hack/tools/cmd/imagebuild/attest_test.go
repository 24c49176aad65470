// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

const testStatus = `Package: libfoo1
Status: install ok installed
Architecture: amd64
Version: 1:2.3-4+deb12u1
Description: foo
 more text: not a field

Package: foo-data
Status: install ok installed
Architecture: all
Version: 2.3-4
`

// TestAttestations builds an image of a Go binary over a root filesystem with two Debian packages,
// pushes it to registries with and without the OCI referrers API, and
// fetches the SBOM and provenance back as a user would.
func TestAttestations(t *testing.T) {
	dir, bin, ca := buildInputs(t)
	rootfs := filepath.Join(dir, "rootfs.tar.gz")
	writeTarGz(t, rootfs, map[string]string{dpkgStatusPath: testStatus})
	var binaries platformFlag
	if err := binaries.Set("linux/amd64=" + bin); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "layout")
	o := buildOptions{
		Name: "prov", Version: "v1", Revision: "0123abc", Source: "https://example.com/repo", Tag: "v1",
		Created: time.Unix(1700000000, 0).UTC(), Binaries: binaries, CACertificates: ca, Out: out,
		RootFS:     map[string]string{"linux/amd64": rootfs},
		Provenance: provenanceOptions{BuilderID: "https://ci.example.com", Goals: []string{"push"}, Params: map[string]string{"PLATFORMS": "linux/amd64"}},
	}
	if _, err := build(o); err != nil {
		t.Fatal(err)
	}
	entries, _, platforms := readLayout(t, out)
	var types []string
	for _, d := range entries.Manifests {
		types = append(types, d.ArtifactType)
	}
	if want := []string{"", spdxMediaType, inTotoMediaType}; !slices.Equal(types, want) {
		t.Fatalf("index.json lists artifact types %q, want %q (the index, then its SBOM and provenance)", types, want)
	}
	manifest := platforms.Manifests[0].Digest

	for _, referrersAPI := range []bool{false, true} {
		srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(referrersAPI)))
		t.Cleanup(srv.Close)
		ref := strings.TrimPrefix(srv.URL, "http://") + "/ns/prov:v1"
		if _, err := push(t.Context(), out, ref); err != nil {
			t.Fatalf("referrers API %v: push: %v", referrersAPI, err)
		}
		got := filepath.Join(dir, "fetched", map[bool]string{false: "fallback", true: "api"}[referrersAPI])
		files, err := fetchAttestations(t.Context(), ref, got)
		if err != nil {
			t.Fatalf("referrers API %v: %v", referrersAPI, err)
		}
		slices.Sort(files)
		want := []string{filepath.Join(got, "linux_amd64", "provenance.intoto.json"), filepath.Join(got, "linux_amd64", "sbom.spdx.json")}
		if !slices.Equal(files, want) {
			t.Fatalf("referrers API %v: fetched %q, want %q", referrersAPI, files, want)
		}
	}

	var sbom struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name, VersionInfo string
			ExternalRefs      []struct {
				ReferenceLocator string
			}
		}
	}
	readJSON(t, filepath.Join(dir, "fetched", "api", "linux_amd64", "sbom.spdx.json"), &sbom)
	purls := map[string]string{}
	for _, p := range sbom.Packages {
		purls[p.Name] = p.ExternalRefs[0].ReferenceLocator
	}
	for name, want := range map[string]string{
		"libfoo1":                                "pkg:deb/debian/libfoo1@1:2.3-4+deb12u1?arch=amd64",
		"foo-data":                               "pkg:deb/debian/foo-data@2.3-4?arch=all",
		"github.com/google/go-containerregistry": "pkg:golang/github.com/google/go-containerregistry@v0.22.1",
		"prov":                                   "pkg:oci/prov@sha256:" + manifest.Hex + "?arch=amd64&os=linux",
	} {
		if purls[name] != want {
			t.Errorf("SBOM: %s has purl %q, want %q", name, purls[name], want)
		}
	}
	if sbom.SPDXVersion != "SPDX-2.3" || len(sbom.Packages) != len(purls) {
		t.Errorf("SBOM: version %q, %d packages of %d distinct names", sbom.SPDXVersion, len(sbom.Packages), len(purls))
	}

	var prov statement
	readJSON(t, filepath.Join(dir, "fetched", "fallback", "linux_amd64", "provenance.intoto.json"), &prov)
	deps := prov.Predicate.BuildDefinition.ResolvedDependencies
	if prov.Subject[0].Digest["sha256"] != manifest.Hex || prov.PredicateType != slsaProvenanceV1 ||
		prov.Predicate.RunDetails.Builder.ID != "https://ci.example.com" ||
		len(deps) != 3 || deps[0].Digest["gitCommit"] != "0123abc" || deps[1].URI != purls["libfoo1"] {
		t.Errorf("provenance: %+v", prov)
	}
	params, _ := json.Marshal(prov.Predicate.BuildDefinition.ExternalParameters)
	if !strings.Contains(string(params), `"goals":["push"],"variables":{"PLATFORMS":"linux/amd64"}`) {
		t.Errorf("provenance: external parameters %s lack the make goals and variables", params)
	}

	// A binary without Go build information gets no image rather than an
	// image without an SBOM.
	fake := filepath.Join(dir, "fake")
	if err := os.WriteFile(fake, []byte("\x7fELF fake"), 0o755); err != nil {
		t.Fatal(err)
	}
	o.Binaries = platformFlag{{Platform: binaries[0].Platform, Path: fake}}
	if _, err := build(o); err == nil || !strings.Contains(err.Error(), "Go build information") {
		t.Errorf("a binary without build information gave %v", err)
	}
}

// buildInputs returns a temporary directory holding a CA bundle and a Go
// binary (the SBOM reads its build information): testdata/gobinary, a
// small static program with module dependencies, built as make builds the
// provisioners.
func buildInputs(t *testing.T) (dir, bin, ca string) {
	t.Helper()
	dir = t.TempDir()
	bin = filepath.Join(dir, "gobinary")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/gobinary")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/gobinary: %v\n%s", err, out)
	}
	ca = filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("CA"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, bin, ca
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

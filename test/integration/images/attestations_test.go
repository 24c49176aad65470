// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package images

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// What a user's tools look for among an image's referrers.
const (
	spdxType      = "application/spdx+json"
	inTotoType    = "application/vnd.in-toto+json"
	slsaPredicate = "https://slsa.dev/provenance/v1"
	inTotoV1      = "https://in-toto.io/Statement/v1"
)

// attested is what a platform's SBOM and provenance must describe.
type attested struct {
	binary, dpkgStatus []byte
	revision           string
}

// The parts of SPDX 2.3 and SLSA provenance v1 a user's check reads.
type spdxDocument struct {
	SPDXVersion string `json:"spdxVersion"`
	Packages    []struct {
		Name         string `json:"name"`
		VersionInfo  string `json:"versionInfo"`
		ExternalRefs []struct {
			Type    string `json:"referenceType"`
			Locator string `json:"referenceLocator"`
		} `json:"externalRefs"`
	} `json:"packages"`
}

type provenance struct {
	Type          string `json:"_type"`
	PredicateType string `json:"predicateType"`
	Subject       []struct {
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
	Predicate struct {
		BuildDefinition struct {
			BuildType          string `json:"buildType"`
			ExternalParameters struct {
				Source struct {
					Repository string `json:"repository"`
					Revision   string `json:"revision"`
				} `json:"source"`
				Make struct {
					Goals     []string          `json:"goals"`
					Variables map[string]string `json:"variables"`
				} `json:"make"`
			} `json:"externalParameters"`
			ResolvedDependencies []struct {
				URI    string            `json:"uri"`
				Digest map[string]string `json:"digest"`
			} `json:"resolvedDependencies"`
		} `json:"buildDefinition"`
		RunDetails struct {
			Builder struct {
				ID string `json:"id"`
			} `json:"builder"`
		} `json:"runDetails"`
	} `json:"predicate"`
}

// checkAttestations reads the referrers of one platform's manifest from
// the registry, as `oras discover` or crane would, and checks the SBOM
// against `go version -m` of the image's binary and dpkg's status of its
// root filesystem, and the provenance against the revision built.
func checkAttestations(ctx context.Context, t *testing.T, manifest name.Digest, platform string, want attested) {
	t.Helper()
	opts := []remote.Option{remote.WithContext(ctx)}
	refs, err := remote.Referrers(manifest, opts...)
	if err != nil {
		t.Fatalf("%s: listing the referrers of %s: %v", platform, manifest, err)
	}
	list, err := refs.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string][]byte{}
	for _, desc := range list.Manifests {
		artifactType, data := artifactBlob(t, manifest.Context().Digest(desc.Digest.String()), opts)
		if _, dup := found[artifactType]; dup {
			t.Errorf("%s: two referrers of type %s", platform, artifactType)
		}
		found[artifactType] = data
	}
	sbom, ok := found[spdxType]
	if !ok {
		t.Errorf("%s: %s has no %s referrer (found %d referrers)", platform, manifest, spdxType, len(list.Manifests))
	} else {
		checkSBOM(t, platform, sbom, want)
	}
	prov, ok := found[inTotoType]
	if !ok {
		t.Errorf("%s: %s has no %s referrer", platform, manifest, inTotoType)
	} else {
		checkProvenance(t, platform, prov, manifest, want)
	}
}

// artifactBlob returns the artifact type of a referrer and its one layer,
// whose media type is that type. The type is read from the referrer's
// manifest: go-containerregistry's registry (v0.22.1) lists a referrer
// under its config's media type even when the manifest has an
// artifactType, where the distribution spec (and the tag-schema fallback
// as go-containerregistry writes it) takes the artifactType.
func artifactBlob(t *testing.T, ref name.Digest, opts []remote.Option) (artifactType string, data []byte) {
	t.Helper()
	img, err := remote.Image(ref, opts...)
	if err != nil {
		t.Fatalf("reading referrer %s: %v", ref, err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject == nil || m.Subject.Digest.String() == "" {
		t.Errorf("referrer %s has no subject", ref)
	}
	artifactType = m.ArtifactType
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("referrer %s: %d layers (%v), want 1", ref, len(layers), err)
	}
	if mt, _ := layers[0].MediaType(); string(mt) != artifactType {
		t.Errorf("referrer %s: layer of type %s, want %s", ref, mt, artifactType)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if data, err = io.ReadAll(rc); err != nil {
		t.Fatal(err)
	}
	return artifactType, data
}

func checkSBOM(t *testing.T, platform string, data []byte, want attested) {
	t.Helper()
	var doc spdxDocument
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: the SBOM is not JSON: %v", platform, err)
	}
	if doc.SPDXVersion != "SPDX-2.3" {
		t.Errorf("%s: spdxVersion %q, want SPDX-2.3", platform, doc.SPDXVersion)
	}
	var goModules, debs []string
	for _, p := range doc.Packages {
		for _, r := range p.ExternalRefs {
			switch {
			case r.Type != "purl":
			case strings.HasPrefix(r.Locator, "pkg:golang/") && p.Name != "stdlib":
				goModules = append(goModules, p.Name+" "+p.VersionInfo)
			case strings.HasPrefix(r.Locator, "pkg:deb/debian/"):
				u, err := url.Parse(r.Locator)
				if err != nil {
					t.Errorf("%s: purl %q: %v", platform, r.Locator, err)
					continue
				}
				debs = append(debs, p.Name+" "+p.VersionInfo+" "+u.Query().Get("arch"))
			}
		}
	}
	wantModules := goVersionModules(t, want.binary)
	slices.Sort(goModules)
	if !slices.Equal(goModules, wantModules) {
		t.Errorf("%s: the SBOM's Go modules differ from `go version -m` of the image's binary:\nSBOM:\n%s\ngo version -m:\n%s",
			platform, strings.Join(goModules, "\n"), strings.Join(wantModules, "\n"))
	}
	wantDebs := dpkgPackages(want.dpkgStatus)
	slices.Sort(debs)
	if !slices.Equal(debs, wantDebs) {
		t.Errorf("%s: the SBOM's Debian packages differ from the image's /var/lib/dpkg/status:\nSBOM:\n%s\ndpkg status:\n%s",
			platform, strings.Join(debs, "\n"), strings.Join(wantDebs, "\n"))
	}
}

// goVersionModules runs `go version -m` on the binary and returns its
// main module and dependencies as "path version", sorted, where a
// dependency replaced by another module has the replacement's version and
// one replaced by a local directory none.
func goVersionModules(t *testing.T, binary []byte) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "binary")
	if err := os.WriteFile(path, binary, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "version", "-m", path).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	var mods []string
	for line := range strings.SplitSeq(string(out), "\n") {
		f := strings.Split(strings.TrimPrefix(line, "\t"), "\t")
		switch {
		case len(f) >= 3 && (f[0] == "mod" || f[0] == "dep"):
			mods = append(mods, f[1]+" "+f[2])
		case len(f) >= 2 && f[0] == "=>" && len(mods) > 0:
			version := ""
			if len(f) >= 3 {
				version = f[2]
			}
			last := &mods[len(mods)-1]
			*last = strings.Fields(*last)[0] + " " + version
		}
	}
	if len(mods) == 0 {
		t.Fatalf("go version -m listed no modules:\n%s", out)
	}
	slices.Sort(mods)
	return mods
}

// dpkgPackages lists "name version architecture" of dpkg's status file,
// sorted.
func dpkgPackages(status []byte) []string {
	var pkgs []string
	var name, version, arch string
	flush := func() {
		if name != "" {
			pkgs = append(pkgs, name+" "+version+" "+arch)
		}
		name, version, arch = "", "", ""
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			flush()
			continue
		}
		k, v, _ := strings.Cut(line, ": ")
		switch k {
		case "Package":
			name = v
		case "Version":
			version = v
		case "Architecture":
			arch = v
		}
	}
	flush()
	slices.Sort(pkgs)
	return pkgs
}

func checkProvenance(t *testing.T, platform string, data []byte, manifest name.Digest, want attested) {
	t.Helper()
	var st provenance
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatalf("%s: the provenance is not JSON: %v", platform, err)
	}
	if st.Type != inTotoV1 || st.PredicateType != slsaPredicate {
		t.Errorf("%s: provenance _type %q predicateType %q, want %s and %s", platform, st.Type, st.PredicateType, inTotoV1, slsaPredicate)
	}
	h, err := v1.NewHash(manifest.DigestStr())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Subject) != 1 || st.Subject[0].Digest["sha256"] != h.Hex {
		t.Errorf("%s: provenance subject %v, want the manifest %s", platform, st.Subject, h)
	}
	def := st.Predicate.BuildDefinition
	if got := def.ExternalParameters.Source; got.Revision != want.revision || got.Repository != sourceURL {
		t.Errorf("%s: provenance source %+v, want %s at %s", platform, got, sourceURL, want.revision)
	}
	if !slices.Contains(def.ExternalParameters.Make.Goals, "push") || def.ExternalParameters.Make.Variables["PLATFORMS"] == "" {
		t.Errorf("%s: provenance make parameters %+v, want the goal push and PLATFORMS", platform, def.ExternalParameters.Make)
	}
	if def.BuildType == "" || st.Predicate.RunDetails.Builder.ID == "" {
		t.Errorf("%s: provenance without buildType or builder.id", platform)
	}
	var commit bool
	var debs []string
	for _, d := range def.ResolvedDependencies {
		commit = commit || d.Digest["gitCommit"] == want.revision
		if strings.HasPrefix(d.URI, "pkg:deb/") {
			debs = append(debs, d.URI)
		}
	}
	if !commit {
		t.Errorf("%s: no resolved dependency has gitCommit %s: %+v", platform, want.revision, def.ResolvedDependencies)
	}
	if got, w := len(debs), len(dpkgPackages(want.dpkgStatus)); got != w {
		t.Errorf("%s: provenance resolves %d Debian packages, the image's dpkg status lists %d", platform, got, w)
	}
}

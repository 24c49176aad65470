// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Each platform's image gets two OCI artifacts whose subject is its
// manifest (OCI 1.1 referrers): an SPDX 2.3 SBOM of the Go modules built
// into the binary (and the Debian packages of the root filesystem, if any),
// and an in-toto statement of SLSA provenance v1. Both derive from the
// build's inputs only (no clock, no host name), so the same commit and make
// invocation give the same digests.
const (
	spdxMediaType     = "application/spdx+json"
	inTotoMediaType   = "application/vnd.in-toto+json"
	slsaProvenanceV1  = "https://slsa.dev/provenance/v1"
	inTotoStatementV1 = "https://in-toto.io/Statement/v1"
	// buildType names the steps the provenance's parameters feed; the
	// document describes them.
	buildType = "https://github.com/kubeprov/external-storage/blob/main/docs/releasing.md#sbom-and-provenance"
	// emptyMediaType and emptyJSON are the OCI empty descriptor's, the
	// config of an artifact that has none.
	emptyMediaType = "application/vnd.oci.empty.v1+json"
	emptyJSON      = "{}"

	annotationTitle         = "org.opencontainers.image.title"
	annotationPredicateType = "in-toto.io/predicate-type"
	dpkgStatusPath          = "var/lib/dpkg/status"
)

// provenanceOptions are how the build was invoked (make's goals and
// variables) and by whom.
type provenanceOptions struct {
	BuilderID string
	Goals     []string
	Params    map[string]string
}

// debianPackage is one package of dpkg's status file.
type debianPackage struct {
	Name, Version, Arch string
}

func (p debianPackage) purl() string {
	return fmt.Sprintf("pkg:deb/debian/%s@%s?arch=%s", url.PathEscape(p.Name), url.PathEscape(p.Version), url.QueryEscape(p.Arch))
}

// attestations returns the SBOM and the provenance of one platform's image.
func attestations(o buildOptions, b platformBinary, img v1.Image) ([]v1.Image, error) {
	subject, err := partial.Descriptor(img)
	if err != nil {
		return nil, err
	}
	subject = &v1.Descriptor{MediaType: subject.MediaType, Size: subject.Size, Digest: subject.Digest}
	info, err := buildinfo.ReadFile(b.Path)
	if err != nil {
		return nil, fmt.Errorf("reading the Go build information of %s for its SBOM: %w", b.Path, err)
	}
	var debs []debianPackage
	if rootfs := o.RootFS[b.Platform.String()]; rootfs != "" {
		files, err := readFiles(rootfs, dpkgStatusPath)
		if err != nil {
			return nil, fmt.Errorf("root filesystem %s: %w", rootfs, err)
		}
		if debs = parseDpkgStatus(files[dpkgStatusPath]); len(debs) == 0 {
			return nil, fmt.Errorf("root filesystem %s: no packages in /%s for the SBOM", rootfs, dpkgStatusPath)
		}
	}
	sbom, err := marshalJSON(spdxDocument(o, b.Platform, *subject, info, debs))
	if err != nil {
		return nil, err
	}
	prov, err := marshalJSON(provenanceStatement(o, b.Platform, *subject, info, debs))
	if err != nil {
		return nil, err
	}
	created := o.Created.Format(time.RFC3339)
	sbomArtifact, err := newArtifact(*subject, spdxMediaType, sbom,
		map[string]string{annotationTitle: "sbom.spdx.json"},
		map[string]string{labelCreated: created})
	if err != nil {
		return nil, err
	}
	provArtifact, err := newArtifact(*subject, inTotoMediaType, prov,
		map[string]string{annotationTitle: "provenance.intoto.json", annotationPredicateType: slsaProvenanceV1},
		map[string]string{labelCreated: created, annotationPredicateType: slsaProvenanceV1})
	if err != nil {
		return nil, err
	}
	return []v1.Image{sbomArtifact, provArtifact}, nil
}

// marshalJSON indents (people read these) and keeps purls' "&" as it is.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(v)
	return b.Bytes(), err
}

// parseDpkgStatus lists the packages of a dpkg status file, in its order.
func parseDpkgStatus(status []byte) []debianPackage {
	var pkgs []debianPackage
	var p debianPackage
	flush := func() {
		if p.Name != "" {
			pkgs = append(pkgs, p)
		}
		p = debianPackage{}
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			flush()
			continue
		}
		switch k, v, _ := strings.Cut(line, ":"); k {
		case "Package":
			p.Name = strings.TrimSpace(v)
		case "Version":
			p.Version = strings.TrimSpace(v)
		case "Architecture":
			p.Arch = strings.TrimSpace(v)
		}
	}
	flush()
	return pkgs
}

// SPDX 2.3 JSON, the fields written here.
type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	DocumentDescribes []string           `json:"documentDescribes"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name                  string       `json:"name"`
	SPDXID                string       `json:"SPDXID"`
	VersionInfo           string       `json:"versionInfo,omitempty"`
	DownloadLocation      string       `json:"downloadLocation"`
	FilesAnalyzed         bool         `json:"filesAnalyzed"`
	SourceInfo            string       `json:"sourceInfo,omitempty"`
	PrimaryPackagePurpose string       `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs          []spdxExtRef `json:"externalRefs,omitempty"`
}

type spdxExtRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

func purlRef(purl string) []spdxExtRef {
	return []spdxExtRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: purl}}
}

// goPurl is pkg:golang/PATH@VERSION; a version Go does not know (a local
// replacement, "(devel)") is left out.
func goPurl(path, version string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	p := "pkg:golang/" + strings.Join(segs, "/")
	if version != "" && version != "(devel)" {
		p += "@" + url.PathEscape(version)
	}
	return p
}

// goPackage describes a module as `go version -m` does: a module replaced
// by another has the replacement's version, one replaced by a local
// directory none (its source is this commit's).
func goPackage(id string, m *debug.Module) spdxPackage {
	p := spdxPackage{Name: m.Path, SPDXID: id, VersionInfo: m.Version, DownloadLocation: "NOASSERTION"}
	purlPath := m.Path
	if r := m.Replace; r != nil {
		p.VersionInfo, purlPath = r.Version, r.Path
		if r.Version == "" {
			p.SourceInfo = "built from the directory " + r.Path + " of the source revision (a replace directive)"
			purlPath = m.Path
		} else {
			p.SourceInfo = "replaced by " + r.Path + "@" + r.Version
		}
	}
	p.ExternalRefs = purlRef(goPurl(purlPath, p.VersionInfo))
	return p
}

func spdxDocument(o buildOptions, platform v1.Platform, subject v1.Descriptor, info *debug.BuildInfo, debs []debianPackage) spdxDoc {
	const imageID = "SPDXRef-Image"
	image := spdxPackage{
		Name: o.Name, SPDXID: imageID, VersionInfo: o.Version, DownloadLocation: "NOASSERTION",
		PrimaryPackagePurpose: "CONTAINER",
		ExternalRefs: purlRef(fmt.Sprintf("pkg:oci/%s@%s?arch=%s&os=%s", url.PathEscape(o.Name),
			url.PathEscape(subject.Digest.String()), url.QueryEscape(platform.Architecture), url.QueryEscape(platform.OS))),
	}
	goVersion := strings.TrimPrefix(info.GoVersion, "go")
	pkgs := []spdxPackage{image, {
		Name: "stdlib", SPDXID: "SPDXRef-go-stdlib", VersionInfo: info.GoVersion, DownloadLocation: "NOASSERTION",
		ExternalRefs: purlRef("pkg:golang/stdlib@" + url.PathEscape(goVersion)),
	}}
	main := goPackage("SPDXRef-go-main", &info.Main)
	main.PrimaryPackagePurpose = "APPLICATION"
	pkgs = append(pkgs, main)
	for i, m := range info.Deps {
		pkgs = append(pkgs, goPackage(fmt.Sprintf("SPDXRef-go-%d", i+1), m))
	}
	for i, d := range debs {
		pkgs = append(pkgs, spdxPackage{
			Name: d.Name, SPDXID: fmt.Sprintf("SPDXRef-deb-%d", i+1), VersionInfo: d.Version,
			DownloadLocation: "NOASSERTION", ExternalRefs: purlRef(d.purl()),
		})
	}
	rels := []spdxRelationship{{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: imageID}}
	for _, p := range pkgs[1:] {
		rels = append(rels, spdxRelationship{Element: imageID, Type: "CONTAINS", Related: p.SPDXID})
	}
	return spdxDoc{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              fmt.Sprintf("%s %s %s", o.Name, o.Version, platform),
		DocumentNamespace: fmt.Sprintf("%s/spdx/%s/%s", strings.TrimSuffix(o.Source, "/"), url.PathEscape(o.Name), subject.Digest.Hex),
		CreationInfo: spdxCreationInfo{
			Created:  o.Created.Format(time.RFC3339),
			Creators: []string{"Tool: imagebuild (external-storage hack/tools)"},
		},
		DocumentDescribes: []string{imageID},
		Packages:          pkgs,
		Relationships:     rels,
	}
}

// in-toto Statement v1 with a SLSA provenance v1 predicate.
type statement struct {
	Type          string               `json:"_type"`
	Subject       []resourceDescriptor `json:"subject"`
	PredicateType string               `json:"predicateType"`
	Predicate     slsaProvenance       `json:"predicate"`
}

type resourceDescriptor struct {
	Name   string            `json:"name,omitempty"`
	URI    string            `json:"uri,omitempty"`
	Digest map[string]string `json:"digest,omitempty"`
}

type slsaProvenance struct {
	BuildDefinition struct {
		BuildType            string               `json:"buildType"`
		ExternalParameters   any                  `json:"externalParameters"`
		InternalParameters   any                  `json:"internalParameters,omitempty"`
		ResolvedDependencies []resourceDescriptor `json:"resolvedDependencies"`
	} `json:"buildDefinition"`
	RunDetails struct {
		Builder struct {
			ID string `json:"id"`
		} `json:"builder"`
	} `json:"runDetails"`
}

func provenanceStatement(o buildOptions, platform v1.Platform, subject v1.Descriptor, info *debug.BuildInfo, debs []debianPackage) statement {
	var p slsaProvenance
	p.BuildDefinition.BuildType = buildType
	type source struct {
		Repository string `json:"repository"`
		Revision   string `json:"revision"`
	}
	type makeInvocation struct {
		Goals     []string          `json:"goals"`
		Variables map[string]string `json:"variables"`
	}
	p.BuildDefinition.ExternalParameters = struct {
		Source   source         `json:"source"`
		Make     makeInvocation `json:"make"`
		Platform string         `json:"platform"`
	}{source{o.Source, o.Revision}, makeInvocation{o.Provenance.Goals, o.Provenance.Params}, platform.String()}
	// What the Go toolchain recorded (-trimpath, -ldflags, GOARCH, ...).
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	p.BuildDefinition.InternalParameters = map[string]any{"goVersion": info.GoVersion, "goBuildSettings": settings}
	deps := []resourceDescriptor{{URI: "git+" + o.Source + "@" + o.Revision, Digest: map[string]string{"gitCommit": o.Revision}}}
	for _, d := range debs {
		deps = append(deps, resourceDescriptor{Name: d.Name, URI: d.purl()})
	}
	p.BuildDefinition.ResolvedDependencies = deps
	p.RunDetails.Builder.ID = o.Provenance.BuilderID
	return statement{
		Type:          inTotoStatementV1,
		Subject:       []resourceDescriptor{{Name: o.Name, Digest: map[string]string{"sha256": subject.Digest.Hex}}},
		PredicateType: slsaProvenanceV1,
		Predicate:     p,
	}
}

// artifact is an OCI 1.1 artifact manifest: the empty config, one blob of
// the artifact's type, and the subject it refers to.
type artifact struct {
	manifest []byte
	blob     v1.Layer
	digest   v1.Hash
}

func newArtifact(subject v1.Descriptor, mediaType string, data []byte, blobAnnotations, annotations map[string]string) (v1.Image, error) {
	blob := static.NewLayer(data, types.MediaType(mediaType))
	digest, err := blob.Digest()
	if err != nil {
		return nil, err
	}
	emptyDigest, _, err := v1.SHA256(strings.NewReader(emptyJSON))
	if err != nil {
		return nil, err
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  mediaType,
		Config:        v1.Descriptor{MediaType: emptyMediaType, Size: int64(len(emptyJSON)), Digest: emptyDigest, Data: []byte(emptyJSON)},
		Layers: []v1.Descriptor{{
			MediaType: types.MediaType(mediaType), Size: int64(len(data)), Digest: digest, Annotations: blobAnnotations,
		}},
		Annotations: annotations,
		Subject:     &subject,
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return partial.CompressedToImage(&artifact{manifest: raw, blob: blob, digest: digest})
}

func (a *artifact) RawConfigFile() ([]byte, error)      { return []byte(emptyJSON), nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }

func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if h != a.digest {
		return nil, fmt.Errorf("the artifact has no blob %s", h)
	}
	return a.blob, nil
}

// isReferrer tells the artifacts among a layout's entries.
func isReferrer(d v1.Descriptor) bool {
	return d.ArtifactType != "" && !slices.Contains([]types.MediaType{types.OCIImageIndex, types.DockerManifestList}, d.MediaType)
}

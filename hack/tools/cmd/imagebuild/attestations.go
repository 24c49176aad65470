// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// fetchAttestations writes the files of every referrer of ref's platform
// images (or of ref itself, if it is one image) under out/<os>_<arch>/,
// named by their title annotation, and returns the paths written. Registries
// without the referrers API are read through the tag-schema fallback.
func fetchAttestations(ctx context.Context, ref, out string) ([]string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("-ref %q: %w", ref, err)
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	desc, err := remote.Get(r, opts...)
	if err != nil {
		return nil, err
	}
	images := []v1.Descriptor{desc.Descriptor}
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, err
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		images = m.Manifests
	}
	var written []string
	for _, img := range images {
		dir := filepath.Join(out, img.Digest.Hex)
		if img.Platform != nil {
			dir = filepath.Join(out, strings.ReplaceAll(img.Platform.String(), "/", "_"))
		}
		files, err := fetchReferrers(r.Context().Digest(img.Digest.String()), dir, opts)
		if err != nil {
			return nil, err
		}
		written = append(written, files...)
	}
	if len(written) == 0 {
		return nil, fmt.Errorf("%s: no referrers (SBOM or provenance) found", ref)
	}
	return written, nil
}

// fetchReferrers writes the blobs of subject's referrers into dir.
func fetchReferrers(subject name.Digest, dir string, opts []remote.Option) ([]string, error) {
	refs, err := remote.Referrers(subject, opts...)
	if err != nil {
		return nil, fmt.Errorf("listing the referrers of %s: %w", subject, err)
	}
	list, err := refs.IndexManifest()
	if err != nil {
		return nil, err
	}
	var written []string
	for _, d := range list.Manifests {
		art, err := remote.Image(subject.Context().Digest(d.Digest.String()), opts...)
		if err != nil {
			return nil, err
		}
		m, err := art.Manifest()
		if err != nil {
			return nil, err
		}
		if m.Subject == nil || m.Subject.Digest.String() != subject.DigestStr() {
			return nil, fmt.Errorf("referrer %s of %s names another subject", d.Digest, subject)
		}
		for _, l := range m.Layers {
			// A title is a file name chosen by whoever pushed: no paths.
			file := filepath.Base(l.Annotations[annotationTitle])
			if file == "." || file == ".." || file == "/" || file == "" {
				file = l.Digest.Hex
			}
			path := filepath.Join(dir, file)
			if err := writeBlob(art, l.Digest, path); err != nil {
				return nil, fmt.Errorf("%s of %s: %w", path, subject, err)
			}
			written = append(written, path)
		}
	}
	return written, nil
}

func writeBlob(art v1.Image, digest v1.Hash, path string) (err error) {
	layer, err := art.LayerByDigest(digest)
	if err != nil {
		return err
	}
	// Compressed is the blob as stored: these are JSON, not tar layers.
	rc, err := layer.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	_, err = io.Copy(f, rc)
	return err
}

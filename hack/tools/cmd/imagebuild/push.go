// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// push sends the one index or image a layout's index.json lists to ref,
// then the artifacts listed beside it that refer to it or to its platform
// images (build's SBOMs and provenance), and returns the pushed reference
// with its digest. The artifacts go by digest; a registry without the OCI
// 1.1 referrers API gets go-containerregistry's tag-schema fallback (an
// index tagged sha256-<subject digest>). Registries on localhost or a
// loopback address are spoken to over plain HTTP (go-containerregistry's
// rule), so a local test registry needs no TLS.
func push(ctx context.Context, dir, ref string) (string, error) {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return "", fmt.Errorf("-ref %q: %w", ref, err)
	}
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return "", fmt.Errorf("reading the OCI layout in %s (run make image first): %w", dir, err)
	}
	manifest, err := root.IndexManifest()
	if err != nil {
		return "", err
	}
	main, referrers := splitReferrers(manifest.Manifests)
	if len(main) != 1 {
		return "", fmt.Errorf("%s lists %d images or indexes in index.json, want exactly one (besides SBOMs and provenance)", dir, len(main))
	}
	desc := main[0]
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if err := pushSubject(root, dir, desc, tag, opts); err != nil {
		return "", err
	}
	// After their subjects, so that a registry never lists a referrer of a
	// manifest it does not have.
	for _, d := range referrers {
		img, err := root.Image(d.Digest)
		if err != nil {
			return "", err
		}
		if err := remote.Write(tag.Context().Digest(d.Digest.String()), img, opts...); err != nil {
			return "", fmt.Errorf("pushing the %s %s of %s: %w", d.ArtifactType, d.Digest, tag, err)
		}
	}
	return tag.String() + "@" + desc.Digest.String(), nil
}

// splitReferrers tells the artifacts that refer to an image (isReferrer)
// from the images and indexes a layout's index.json lists.
func splitReferrers(manifests []v1.Descriptor) (main, referrers []v1.Descriptor) {
	for _, d := range manifests {
		if isReferrer(d) {
			referrers = append(referrers, d)
		} else {
			main = append(main, d)
		}
	}
	return main, referrers
}

// pushSubject sends the index or image desc of the layout root (in dir)
// to tag.
func pushSubject(root v1.ImageIndex, dir string, desc v1.Descriptor, tag name.Tag, opts []remote.Option) error {
	switch {
	case desc.MediaType.IsIndex():
		idx, err := root.ImageIndex(desc.Digest)
		if err != nil {
			return err
		}
		err = remote.WriteIndex(tag, idx, opts...)
		if err != nil {
			return fmt.Errorf("pushing %s: %w", tag, err)
		}
	case desc.MediaType.IsImage():
		img, err := root.Image(desc.Digest)
		if err != nil {
			return err
		}
		if err := remote.Write(tag, img, opts...); err != nil {
			return fmt.Errorf("pushing %s: %w", tag, err)
		}
	default:
		return fmt.Errorf("%s: index.json lists a %s, want an image or an image index", dir, desc.MediaType)
	}
	return nil
}

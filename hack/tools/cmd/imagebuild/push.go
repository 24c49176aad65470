// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// push sends the one index or image a layout's index.json lists to ref and
// returns the pushed reference with its digest. Registries on localhost or a
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
	if len(manifest.Manifests) != 1 {
		return "", fmt.Errorf("%s lists %d entries in index.json, want exactly one", dir, len(manifest.Manifests))
	}
	desc := manifest.Manifests[0]
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	switch {
	case desc.MediaType.IsIndex():
		idx, err := root.ImageIndex(desc.Digest)
		if err != nil {
			return "", err
		}
		err = remote.WriteIndex(tag, idx, opts...)
		if err != nil {
			return "", fmt.Errorf("pushing %s: %w", tag, err)
		}
	case desc.MediaType.IsImage():
		img, err := root.Image(desc.Digest)
		if err != nil {
			return "", err
		}
		if err := remote.Write(tag, img, opts...); err != nil {
			return "", fmt.Errorf("pushing %s: %w", tag, err)
		}
	default:
		return "", fmt.Errorf("%s: index.json lists a %s, want an image or an image index", dir, desc.MediaType)
	}
	return tag.String() + "@" + desc.Digest.String(), nil
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package all is the registry of every backend, by name, for the programs
// that drive them alike: the fault suite (test/faults) and the scale
// benchmark (test/bench).
package all

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/backend/cinder"
	"github.com/kubeprov/external-storage/test/backend/csi"
	"github.com/kubeprov/external-storage/test/backend/flex"
	"github.com/kubeprov/external-storage/test/backend/hostpath"
	"github.com/kubeprov/external-storage/test/backend/nfs"
)

// Names names every backend, in the order the suite runs them.
var Names = []string{"hostpath", "csi", "nfs", "cinder", "flex"}

// constructors make each backend.
var constructors = map[string]func(context.Context, backend.Config) (backend.Backend, error){
	"hostpath": adapt(hostpath.New),
	"csi":      adapt(csi.New),
	"nfs":      adapt(nfs.New),
	"cinder":   adapt(cinder.New),
	"flex":     adapt(flex.New),
}

// adapt turns a subpackage's New, which returns its concrete type, into a
// constructor of the interface (a nil *T must not become a non-nil
// interface on error).
func adapt[B backend.Backend](newBackend func(context.Context, backend.Config) (B, error)) func(context.Context, backend.Config) (backend.Backend, error) {
	return func(ctx context.Context, cfg backend.Config) (backend.Backend, error) {
		b, err := newBackend(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
}

// New makes the backend called name.
func New(ctx context.Context, name string, cfg backend.Config) (backend.Backend, error) {
	newBackend, ok := constructors[name]
	if !ok {
		return nil, fmt.Errorf("unknown backend %q (known: %s)", name, strings.Join(Names, ", "))
	}
	return newBackend(ctx, cfg)
}

// IsMissing reports whether New failed because the machine lacks
// what the backend needs (Ganesha, Cinder, the flex driver's tools), as
// opposed to failing to start it.
func IsMissing(err error) bool {
	return errors.Is(err, nfs.ErrMissing) || errors.Is(err, cinder.ErrMissing) || errors.Is(err, flex.ErrMissing)
}

// Parse checks a comma-separated list of backend names; names in
// extra are accepted too.
func Parse(list string, extra ...string) ([]string, error) {
	known := slices.Concat(extra, Names)
	var names []string
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(known, name) {
			return nil, fmt.Errorf("unknown backend %q (known: %s)", name, strings.Join(known, ", "))
		}
		names = append(names, name)
	}
	return names, nil
}

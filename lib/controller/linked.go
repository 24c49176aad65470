// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"errors"
	"fmt"
	"runtime/debug"

	"k8s.io/apimachinery/pkg/util/version"
)

// requiredModules are lib's own requirements (lib/go.mod, kept equal by a
// test) that a port's go.mod can lower without a compile error: a
// "replace k8s.io/client-go => k8s.io/client-go v0.2x" or a client_golang
// pin left over from the old library wins over lib's requirement, and what
// it builds is not what lib was tested with.
var requiredModules = map[string]string{
	"github.com/prometheus/client_golang": "v1.23.2",
	"k8s.io/api":                          "v0.36.3",
	"k8s.io/apimachinery":                 "v0.36.3",
	"k8s.io/client-go":                    "v0.36.3",
	"k8s.io/component-base":               "v0.36.3",
}

// checkLinkedModules returns an error naming each module of requiredModules
// linked into this binary at a lower version than lib requires. A module
// without build information, replaced by a directory or of a version that
// does not parse is not judged.
func checkLinkedModules() error {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return tooOld(info.Deps)
}

func tooOld(deps []*debug.Module) error {
	var errs []error
	for _, m := range deps {
		want, ok := requiredModules[m.Path]
		if !ok {
			continue
		}
		linked, how := m.Version, ""
		if m.Replace != nil {
			linked, how = m.Replace.Version, fmt.Sprintf(" (replaced by %s %s)", m.Replace.Path, m.Replace.Version)
		}
		have, err := version.ParseSemantic(linked)
		if err != nil {
			continue
		}
		if have.LessThan(version.MustParseSemantic(want)) {
			errs = append(errs, fmt.Errorf("%s %s is linked%s, lib needs at least %s", m.Path, linked, how, want))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("this binary links older modules than lib requires: remove the replace directives or pins that lower them from go.mod, then run go mod tidy: %w", errors.Join(errs...))
}

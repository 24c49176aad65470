// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// The versions checked at start-up are lib's go.mod requirements: a bump of
// one that forgets the other fails here.
func TestRequiredModulesAreLibsRequirements(t *testing.T) {
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range requiredModules {
		re := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(path) + `\s+(\S+)`)
		m := re.FindSubmatch(gomod)
		if m == nil || string(m[1]) != want {
			t.Errorf("lib/go.mod requires %s %q; the start-up check wants %s", path, m, want)
		}
	}
}

func TestTooOldNamesTheModuleAndVersions(t *testing.T) {
	for _, tc := range []struct {
		name string
		deps []*debug.Module
		want []string // substrings; none: no error
	}{
		{name: "as required", deps: []*debug.Module{{Path: "k8s.io/client-go", Version: "v0.36.3"}, {Path: "github.com/prometheus/client_golang", Version: "v1.23.2"}}},
		{name: "newer", deps: []*debug.Module{{Path: "k8s.io/client-go", Version: "v0.37.0"}}},
		{name: "replaced by a directory", deps: []*debug.Module{{Path: "k8s.io/client-go", Version: "v0.36.3", Replace: &debug.Module{Path: "../client-go"}}}},
		{name: "replaced by the same version", deps: []*debug.Module{{Path: "k8s.io/api", Version: "v0.36.3", Replace: &debug.Module{Path: "k8s.io/api", Version: "v0.36.3"}}}},
		{name: "old replace", deps: []*debug.Module{
			{Path: "k8s.io/client-go", Version: "v0.36.3", Replace: &debug.Module{Path: "k8s.io/client-go", Version: "v0.20.4"}},
			{Path: "github.com/prometheus/client_golang", Version: "v1.11.0"},
		}, want: []string{
			"k8s.io/client-go v0.20.4 is linked (replaced by k8s.io/client-go v0.20.4), lib needs at least v0.36.3",
			"github.com/prometheus/client_golang v1.11.0 is linked, lib needs at least v1.23.2",
			"remove the replace directives or pins",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tooOld(tc.deps)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

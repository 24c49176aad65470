// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package pathpattern

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestTemplateKeys: the claim keys a local-path pattern reads are listed,
// however it spells the read, so that a restarted controller keeps them.
func TestTemplateKeys(t *testing.T) {
	for pattern, want := range map[string][2][]string{
		"{{ .PVC.Namespace }}/{{ .PVC.Name }}/":                     {nil, nil},
		"{{ .PVC.Labels.app }}/{{ .PVName }}":                       {{"app"}, nil},
		`{{ index .PVC.Annotations "team.example.com/name" }}/x`:    {nil, {"team.example.com/name"}},
		`{{ $.PVC.Labels.tier }}-{{ index $.PVC.Labels "zone" }}`:   {{"tier", "zone"}, nil},
		`{{ if .PVC.Annotations.fast }}ssd{{ else }}hdd{{ end }}/x`: {nil, {"fast"}},
		`{{ printf "%s-%s" .PVC.Name (index .PVC.Labels "a") }}`:    {{"a"}, nil},
		`{{ $n := .PVC.Name }}{{ $n }}/{{ .PVC.UID }}`:              {nil, nil},
	} {
		labels, annotations, err := TemplateKeys(pattern)
		if err != nil || !slices.Equal(labels, want[0]) || !slices.Equal(annotations, want[1]) {
			t.Errorf("TemplateKeys(%q) = %v, %v, %v; want %v, %v", pattern, labels, annotations, err, want[0], want[1])
		}
		if l, a := MetadataKeys(pattern); !slices.Equal(l, want[0]) || !slices.Equal(a, want[1]) {
			t.Errorf("MetadataKeys(%q) = %v, %v; want %v, %v", pattern, l, a, want[0], want[1])
		}
	}
}

// TestTemplateKeysRefuses: a pattern whose reads cannot be listed is an
// error naming what to write instead.
func TestTemplateKeysRefuses(t *testing.T) {
	for pattern, wantErr := range map[string]string{
		"{{ range $k, $v := .PVC.Labels }}{{ $v }}{{ end }}": "is not supported",
		"{{ with .PVC }}{{ .Name }}{{ end }}":                "is not supported",
		"{{ len .PVC.Labels }}":                              "reads all of the claim's labels",
		`{{ index .PVC.Annotations .PVC.Name }}`:             "reads all of the claim's annotations",
		"{{ .PVC.ResourceVersion }}":                         ".PVC.ResourceVersion cannot be read",
		"{{ . }}":                                            "reads more than named fields",
		"{{ $ }}":                                            "$ cannot be read",
		"{{ .PVC }}":                                         ".PVC cannot be read",
		`{{ $l := index .PVC.Labels "a" }}{{ $l.x }}`:        "fields of variables are not supported",
		`{{ define "x" }}a{{ end }}{{ template "x" }}`:       "is not supported",
		"{{ .PVC.Name":                                       "unclosed action",
	} {
		_, _, err := TemplateKeys(pattern)
		if !errors.Is(err, ErrPathPattern) || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("TemplateKeys(%q) = %v; want an ErrPathPattern containing %q", pattern, err, wantErr)
		}
	}
}

func TestExpandTemplate(t *testing.T) {
	c := claim()
	c.UID = "uid-1"
	for pattern, want := range map[string]string{
		"{{ .PVC.Namespace }}/{{ .PVC.Name }}/":              "ns/data",
		"{{ .PVName }}_{{ .PVC.Namespace }}_{{ .PVC.Name }}": "pvc-1_ns_data",
		"{{ .PVC.Labels.app }}/{{ .PVC.UID }}":               "db/uid-1",
	} {
		got, err := ExpandTemplate(pattern, c, "pvc-1", Rules{Root: "the node path"})
		if err != nil || got != want {
			t.Errorf("ExpandTemplate(%q) = %q, %v; want %q", pattern, got, err, want)
		}
	}
}

// TestExpandTemplateRefuses: whatever a claim's author writes, a template
// cannot name a directory outside the root.
func TestExpandTemplateRefuses(t *testing.T) {
	for pattern, wantErr := range map[string]string{
		"{{ .PVC.Annotations.dir }}":                      `it expands to "../x", which could leave the node path`,
		"/{{ .PVC.Name }}":                                `it expands to "/data"`,
		"{{ .PVC.Labels.none }}/x":                        `map has no entry for key "none"`,
		`{{ index .PVC.Labels "none" }}/x`:                `it expands to "/x"`,
		`{{ printf "%0999999d" 1 }}`:                      "more than 4096 bytes",
		"{{ .PVC.Name }}/./x":                             `has a "." component`,
		"{{ .PVC.Name }}//x":                              "has an empty component",
		"{{ .PVC.Namespace }}/{{ .PVC.Annotations.dir }}": `it expands to "ns/../x"`,
	} {
		got, err := ExpandTemplate(pattern, claim(), "pvc-1", Rules{Root: "the node path"})
		if !errors.Is(err, ErrPathPattern) || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ExpandTemplate(%q) = %q, %v; want an ErrPathPattern containing %q", pattern, got, err, wantErr)
		}
	}
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package pathpattern expands the pathPattern class parameter shared by the
// provisioners that make a directory per volume under a root (nfs subdir,
// hostpath): ${.PVC.namespace}, ${.PVC.name}, ${.PVC.labels.KEY},
// ${.PVC.annotations.KEY} and ${.PV.name} are replaced, once, and the result
// must be a plain relative path that cannot leave the root whatever a
// claim's author writes in its name, labels and annotations.
package pathpattern

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Key is the class parameter naming each volume's directory.
const Key = "pathPattern"

// MaxComponentBytes is the longest directory name most filesystems accept.
const MaxComponentBytes = 255

// Errors callers test with errors.Is.
var (
	// ErrPathPattern marks every error of Expand.
	ErrPathPattern = errors.New("invalid pathPattern")
	// ErrInvalidPath: a relative path is empty, absolute, holds a NUL byte,
	// or has an empty, ".", ".." or over-long component.
	ErrInvalidPath = errors.New("invalid path")
)

// Rules are what a provisioner's root adds to the rules of every pattern.
type Rules struct {
	// Default is the pattern used when the class sets none.
	Default string
	// Root names the root in messages ("the NFS share", "the node path").
	Root string
	// MaxBytes bounds the expanded path; zero means no bound.
	MaxBytes int
	// MaxBytesReason ends the message of a path over MaxBytes ("an NFS
	// client can mount").
	MaxBytesReason string
	// Lenient is nfs-subdir-external-provisioner's reading: a label or
	// annotation the claim lacks is the empty string, empty and "."
	// components are dropped, and a path left empty is Default's. Without
	// it each of these is an error.
	Lenient bool
	// Value, if set, is a further rule for each value a variable inserts
	// (the error names the variable: a claim's annotation) and for the
	// expanded path (which the pattern's own text is part of).
	Value func(string) error
}

// checkValue applies r.Value to what the variable named what inserts.
func (r Rules) checkValue(pattern, what, v string) error {
	if r.Value == nil {
		return nil
	}
	if err := r.Value(v); err != nil {
		return fmt.Errorf("%w %q: %s %q: %w", ErrPathPattern, pattern, what, v, err)
	}
	return nil
}

// Expand returns the directory, relative to the root, that pattern names for
// the claim and PV. Values are inserted as they are and never expanded
// again. An empty pattern means r.Default, checked alike.
func Expand(pattern string, pvc *corev1.PersistentVolumeClaim, pvName string, r Rules) (string, error) {
	if pattern == "" {
		pattern = r.Default
	}
	if strings.HasPrefix(pattern, "/") {
		return "", fmt.Errorf("%w %q: it must be relative to %s, not absolute", ErrPathPattern, pattern, r.Root)
	}
	if strings.Contains(pattern, "{{") {
		return "", fmt.Errorf("%w %q: Go templates ({{ .PVC.Name }}) are not supported; write ${.PVC.namespace}, ${.PVC.name}, ${.PVC.labels.KEY}, ${.PVC.annotations.KEY} or ${.PV.name}",
			ErrPathPattern, pattern)
	}
	var out strings.Builder
	rest := pattern
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			out.WriteString(rest)
			break
		}
		out.WriteString(rest[:i])
		end := strings.IndexByte(rest[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("%w %q: ${ without a closing }", ErrPathPattern, pattern)
		}
		expr := rest[i+2 : i+end]
		if strings.Contains(expr, "${") {
			return "", fmt.Errorf("%w %q: ${ inside ${%s}: variables cannot be nested", ErrPathPattern, pattern, expr)
		}
		v, err := variable(expr, pvc, pvName, r.Lenient)
		if err != nil {
			return "", fmt.Errorf("%w %q: %w", ErrPathPattern, pattern, err)
		}
		if err := r.checkValue(pattern, variableSource(expr), v); err != nil {
			return "", err
		}
		out.WriteString(v)
		rest = rest[i+end+1:]
	}
	rel := out.String()
	if r.Lenient {
		rel = collapse(rel)
		if rel == "" {
			strict := r
			strict.Lenient = false
			return Expand(r.Default, pvc, pvName, strict)
		}
	}
	return checkExpanded(pattern, rel, r)
}

// checkExpanded applies the rules every expanded pattern obeys: r's bound,
// and a plain relative path that cannot leave the root.
func checkExpanded(pattern, rel string, r Rules) (string, error) {
	if r.MaxBytes > 0 && len(rel) > r.MaxBytes {
		return "", fmt.Errorf("%w %q: it expands to a path of %d bytes, more than the %d %s",
			ErrPathPattern, pattern, len(rel), r.MaxBytes, r.MaxBytesReason)
	}
	if err := ValidateRelative(rel); err != nil {
		return "", fmt.Errorf("%w %q: it expands to %q, which could leave %s or is not a plain relative path (%w)",
			ErrPathPattern, pattern, rel, r.Root, err)
	}
	if err := r.checkValue(pattern, "it expands to", rel); err != nil {
		return "", err
	}
	return rel, nil
}

// collapse drops the empty and "." components of rel; ".." components are
// kept, for ValidateRelative to refuse.
func collapse(rel string) string {
	comps := strings.Split(rel, "/")
	kept := comps[:0]
	for _, c := range comps {
		if c != "" && c != "." {
			kept = append(kept, c)
		}
	}
	return strings.Join(kept, "/")
}

// ValidateRelative checks that rel is a clean relative slash path that stays
// inside whatever root it is joined to.
func ValidateRelative(rel string) error {
	switch {
	case rel == "":
		return fmt.Errorf("%w: empty", ErrInvalidPath)
	case strings.HasPrefix(rel, "/"):
		return fmt.Errorf("%w: %q is absolute", ErrInvalidPath, rel)
	case strings.ContainsRune(rel, 0):
		return fmt.Errorf("%w: %q contains a NUL byte", ErrInvalidPath, rel)
	}
	for c := range strings.SplitSeq(rel, "/") {
		switch {
		case c == "":
			return fmt.Errorf("%w: %q has an empty component", ErrInvalidPath, rel)
		case c == "." || c == "..":
			return fmt.Errorf("%w: %q has a %q component", ErrInvalidPath, rel, c)
		case len(c) > MaxComponentBytes:
			return fmt.Errorf("%w: a component of %q is longer than %d bytes", ErrInvalidPath, rel, MaxComponentBytes)
		}
	}
	return nil
}

// MetadataKeys returns the claim labels and annotations pattern reads, for
// controller.ClaimMetadataReader, in either spelling (TemplateKeys; a
// template whose reads cannot be listed reads none, since ExpandTemplate
// refuses it).
func MetadataKeys(pattern string) (labels, annotations []string) {
	if IsTemplate(pattern) {
		labels, annotations, _ = TemplateKeys(pattern)
		return labels, annotations
	}
	for _, m := range patternVariable.FindAllStringSubmatch(pattern, -1) {
		switch expr := m[1]; {
		case strings.HasPrefix(expr, ".PVC.labels."):
			labels = append(labels, strings.TrimPrefix(expr, ".PVC.labels."))
		case strings.HasPrefix(expr, ".PVC.annotations."):
			annotations = append(annotations, strings.TrimPrefix(expr, ".PVC.annotations."))
		}
	}
	return labels, annotations
}

// variableSource names where a ${...} variable's value comes from, for
// messages: "claim annotation \"team\"".
func variableSource(expr string) string {
	switch {
	case strings.HasPrefix(expr, ".PVC.labels."):
		return fmt.Sprintf("claim label %q", strings.TrimPrefix(expr, ".PVC.labels."))
	case strings.HasPrefix(expr, ".PVC.annotations."):
		return fmt.Sprintf("claim annotation %q", strings.TrimPrefix(expr, ".PVC.annotations."))
	}
	return "${" + expr + "}"
}

var patternVariable = regexp.MustCompile(`\$\{([^}]*)\}`)

// variable resolves one ${...} expression; a missing label or annotation
// is "" when lenient.
func variable(expr string, pvc *corev1.PersistentVolumeClaim, pvName string, lenient bool) (string, error) {
	switch {
	case expr == ".PVC.namespace":
		return pvc.Namespace, nil
	case expr == ".PVC.name":
		return pvc.Name, nil
	case expr == ".PV.name":
		return pvName, nil
	case strings.HasPrefix(expr, ".PVC.labels."):
		key := strings.TrimPrefix(expr, ".PVC.labels.")
		v, ok := pvc.Labels[key]
		if !lenient && (!ok || v == "") {
			return "", fmt.Errorf("the claim has no label %q", key)
		}
		return v, nil
	case strings.HasPrefix(expr, ".PVC.annotations."):
		key := strings.TrimPrefix(expr, ".PVC.annotations.")
		v, ok := pvc.Annotations[key]
		if !lenient && (!ok || v == "") {
			return "", fmt.Errorf("the claim has no annotation %q", key)
		}
		return v, nil
	default:
		return "", fmt.Errorf("unknown variable ${%s}; use ${.PVC.namespace}, ${.PVC.name}, ${.PVC.labels.KEY}, ${.PVC.annotations.KEY} or ${.PV.name}", expr)
	}
}

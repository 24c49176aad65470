// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package subdir

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/nfs/pkg/dirs"
)

// KeyPathPattern is the class parameter naming each volume's directory.
const KeyPathPattern = "pathPattern"

// DefaultPathPattern names a volume's directory "<namespace>-<claim>-<pv>"
// when the class sets no pathPattern.
const DefaultPathPattern = "${.PVC.namespace}-${.PVC.name}-${.PV.name}"

// MaxPathBytes bounds the directory a pathPattern names. NFSv3 clients
// mount paths of at most 1024 bytes (MNTPATHLEN), share included: a longer
// directory, made deep by a claim's annotations, could be created on the
// share but never mounted.
const MaxPathBytes = 1024

// ErrPathPattern marks every error of a pathPattern.
var ErrPathPattern = errors.New("invalid pathPattern")

// Expand returns the directory, relative to the share, that pattern names
// for the claim and PV, with the former subdir provisioner's semantics:
// ${.PVC.namespace}, ${.PVC.name}, ${.PVC.labels.KEY},
// ${.PVC.annotations.KEY} and ${.PV.name} are replaced, a label or
// annotation the claim lacks by the empty string; then empty and "."
// components are dropped (a missing value between two slashes leaves no
// empty directory name), and a path that is empty after that falls back to
// DefaultPathPattern, as the former provisioner did. The safety rules stay:
// an absolute pattern, an unknown variable, a ".." component, a NUL byte or
// a path too long to mount is an ErrPathPattern, so that the directory stays
// inside the share whatever the claim's labels and annotations say. An
// empty pattern means DefaultPathPattern.
func Expand(pattern string, pvc *corev1.PersistentVolumeClaim, pvName string) (string, error) {
	return expand(pattern, pvc, pvName, false)
}

// ExpandStrict is Expand without leniency: a label or annotation the claim
// lacks (or has empty) is an error, and so is an empty or "." component of
// the expanded path; nothing falls back to DefaultPathPattern.
func ExpandStrict(pattern string, pvc *corev1.PersistentVolumeClaim, pvName string) (string, error) {
	return expand(pattern, pvc, pvName, true)
}

func expand(pattern string, pvc *corev1.PersistentVolumeClaim, pvName string, strict bool) (string, error) {
	if pattern == "" {
		pattern = DefaultPathPattern
	}
	if strings.HasPrefix(pattern, "/") {
		return "", fmt.Errorf("%w %q: it must be relative to the NFS share, not absolute", ErrPathPattern, pattern)
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
		v, err := variable(expr, pvc, pvName, strict)
		if err != nil {
			return "", fmt.Errorf("%w %q: %w", ErrPathPattern, pattern, err)
		}
		out.WriteString(v)
		rest = rest[i+end+1:]
	}
	rel := out.String()
	if !strict {
		rel = collapse(rel)
		if rel == "" {
			// The former provisioner's fallback: the default name.
			return expand(DefaultPathPattern, pvc, pvName, true)
		}
	}
	if len(rel) > MaxPathBytes {
		return "", fmt.Errorf("%w %q: it expands to a path of %d bytes, more than the %d an NFS client can mount",
			ErrPathPattern, pattern, len(rel), MaxPathBytes)
	}
	if err := dirs.Validate(rel); err != nil {
		return "", fmt.Errorf("%w %q: it expands to %q, which could leave the NFS share or is not a plain relative path (%w)",
			ErrPathPattern, pattern, rel, err)
	}
	return rel, nil
}

// collapse drops the empty and "." components of rel; ".." components are
// kept, for dirs.Validate to refuse. Bounded work whatever rel's length.
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

// MetadataKeys returns the claim labels and annotations pattern reads.
func MetadataKeys(pattern string) (labels, annotations []string) {
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

var patternVariable = regexp.MustCompile(`\$\{([^}]*)\}`)

// variable resolves one ${...} expression; a missing label or annotation
// is "" unless strict.
func variable(expr string, pvc *corev1.PersistentVolumeClaim, pvName string, strict bool) (string, error) {
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
		if strict && (!ok || v == "") {
			return "", fmt.Errorf("the claim has no label %q", key)
		}
		return v, nil
	case strings.HasPrefix(expr, ".PVC.annotations."):
		key := strings.TrimPrefix(expr, ".PVC.annotations.")
		v, ok := pvc.Annotations[key]
		if strict && (!ok || v == "") {
			return "", fmt.Errorf("the claim has no annotation %q", key)
		}
		return v, nil
	default:
		return "", fmt.Errorf("unknown variable ${%s}; use ${.PVC.namespace}, ${.PVC.name}, ${.PVC.labels.KEY}, ${.PVC.annotations.KEY} or ${.PV.name}", expr)
	}
}

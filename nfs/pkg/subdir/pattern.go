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
// for the claim and PV: ${.PVC.namespace}, ${.PVC.name}, ${.PVC.labels.KEY},
// ${.PVC.annotations.KEY} and ${.PV.name} are replaced; the result must be a
// relative path whose components are neither empty, "." nor "..", so that it
// stays inside the share whatever the claim's labels and annotations say.
// An empty pattern means DefaultPathPattern, checked alike.
func Expand(pattern string, pvc *corev1.PersistentVolumeClaim, pvName string) (string, error) {
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
		v, err := variable(rest[i+2:i+end], pvc, pvName)
		if err != nil {
			return "", fmt.Errorf("%w %q: %w", ErrPathPattern, pattern, err)
		}
		out.WriteString(v)
		rest = rest[i+end+1:]
	}
	rel := out.String()
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

// variable resolves one ${...} expression.
func variable(expr string, pvc *corev1.PersistentVolumeClaim, pvName string) (string, error) {
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
		if !ok || v == "" {
			return "", fmt.Errorf("the claim has no label %q", key)
		}
		return v, nil
	case strings.HasPrefix(expr, ".PVC.annotations."):
		key := strings.TrimPrefix(expr, ".PVC.annotations.")
		v, ok := pvc.Annotations[key]
		if !ok || v == "" {
			return "", fmt.Errorf("the claim has no annotation %q", key)
		}
		return v, nil
	default:
		return "", fmt.Errorf("unknown variable ${%s}; use ${.PVC.namespace}, ${.PVC.name}, ${.PVC.labels.KEY}, ${.PVC.annotations.KEY} or ${.PV.name}", expr)
	}
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package params parses the StorageClass parameters both modes share and
// the checks every mode applies: unknown keys are rejected with a message
// naming them, so that a typo never silently means a default.
package params

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/kubeprov/external-storage/lib/controller"
)

// Keys both modes understand.
const (
	KeyGID        = "gid"
	KeyRootSquash = "rootSquash"
)

// KeyMountOptions is the classic nfs-provisioner's parameter: a
// comma-separated list of mount options for every PV of the class, besides
// the class's own mountOptions field.
const KeyMountOptions = "mountOptions"

// AnnGID makes kubelet add the group to the supplemental groups of pods
// using the volume, so that they can write into it without running as root.
const AnnGID = "pv.beta.kubernetes.io/gid"

// GIDNone is the gid value meaning "leave the group alone".
const GIDNone = "none"

// CheckKnown returns an error naming every key of the class that is not in
// known, and listing the known ones (controller.CheckParameters).
func CheckKnown(class *storagev1.StorageClass, known ...string) error {
	if err := controller.CheckParameters(class, known...); err != nil {
		return fmt.Errorf("StorageClass %s has %w", className(class), err)
	}
	return nil
}

// FoldKeys returns class with every parameter key that is one of known
// but for case spelled as known, as the classic nfs-provisioner compared its
// keys without regard to case (RootSquash, GID). Keys that name the same
// parameter twice are an error naming both. class itself is not changed.
func FoldKeys(class *storagev1.StorageClass, known ...string) (*storagev1.StorageClass, error) {
	if class == nil || len(class.Parameters) == 0 {
		return class, nil
	}
	folded := make(map[string]string, len(class.Parameters))
	spelled := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(class.Parameters)) {
		name := k
		if i := slices.IndexFunc(known, func(kn string) bool { return strings.EqualFold(kn, k) }); i >= 0 {
			name = known[i]
		}
		if other, dup := spelled[name]; dup {
			return nil, fmt.Errorf("StorageClass %s has parameters %s and %s, which are the same parameter (keys are compared without regard to case); keep one",
				class.Name, other, k)
		}
		spelled[name] = k
		folded[name] = class.Parameters[k]
	}
	c := *class
	c.Parameters = folded
	return &c, nil
}

// GID parses the gid parameter: absent or "none" is nil, else a group id.
func GID(class *storagev1.StorageClass) (*int, error) {
	v, ok := parameters(class)[KeyGID]
	if !ok || strings.EqualFold(v, GIDNone) {
		return nil, nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 31)
	if err != nil {
		return nil, fmt.Errorf("StorageClass %s parameter gid must be %q or a group id from 0 to %d, not %q",
			className(class), GIDNone, 1<<31-1, v)
	}
	gid := int(n)
	return &gid, nil
}

// Bool parses a "true"/"false" parameter, def when absent. The second result
// says whether it was given.
func Bool(class *storagev1.StorageClass, key string, def bool) (bool, bool, error) {
	v, ok := parameters(class)[key]
	if !ok {
		return def, false, nil
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return def, true, fmt.Errorf("StorageClass %s parameter %s must be \"true\" or \"false\", not %q", className(class), key, v)
	}
	return b, true, nil
}

// String returns a parameter and whether it was given.
func String(class *storagev1.StorageClass, key string) (string, bool) {
	v, ok := parameters(class)[key]
	return v, ok
}

// MountOptions parses the mountOptions parameter: options separated by
// commas, spaces around them and empty ones dropped. An option with a space
// or a control character in it is an error (mount would split or misread
// it).
func MountOptions(class *storagev1.StorageClass) ([]string, error) {
	v, ok := parameters(class)[KeyMountOptions]
	if !ok {
		return nil, nil
	}
	var opts []string
	for o := range strings.SplitSeq(v, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if strings.IndexFunc(o, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			return nil, fmt.Errorf("StorageClass %s parameter %s: option %q contains a space or control character; separate options with commas",
				className(class), KeyMountOptions, o)
		}
		opts = append(opts, o)
	}
	return opts, nil
}

// AddMountOptions appends to pv's mount options those of opts it lacks.
func AddMountOptions(pv *corev1.PersistentVolume, opts []string) {
	for _, o := range opts {
		if !slices.Contains(pv.Spec.MountOptions, o) {
			pv.Spec.MountOptions = append(pv.Spec.MountOptions, o)
		}
	}
}

// Annotations returns the PV annotations for gid (none when nil).
func Annotations(gid *int) map[string]string {
	if gid == nil {
		return map[string]string{}
	}
	return map[string]string{AnnGID: strconv.Itoa(*gid)}
}

func parameters(class *storagev1.StorageClass) map[string]string {
	if class == nil {
		return nil
	}
	return class.Parameters
}

func className(class *storagev1.StorageClass) string {
	if class == nil {
		return "(none)"
	}
	return class.Name
}

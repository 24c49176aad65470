// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package mapper

import (
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// FC maps driver_volume_type fibre_channel (what Cinder's backends report;
// fc is accepted too): target_wwn (a string or a list; target_wwns as a
// fallback) with target_lun (or the first of target_luns), or wwids.
type FC struct{}

// Map implements Mapper.
func (FC) Map(req Request) (*Result, error) {
	d := &data{kind: "fibre_channel", m: req.Connection.Data}
	wwns := d.strs("target_wwn")
	if len(wwns) == 0 {
		wwns = d.strs("target_wwns")
	}
	lun, hasLun := d.integer("target_lun")
	if !hasLun {
		if luns := d.integers("target_luns"); len(luns) > 0 {
			lun, hasLun = luns[0], true
		}
	}
	wwids := d.strs("wwids")
	if d.err != nil {
		return nil, d.err
	}
	src := &corev1.FCVolumeSource{FSType: req.FSType}
	switch {
	case len(wwns) > 0:
		if !hasLun {
			return nil, missing("fibre_channel", "target_lun", " next to target_wwn")
		}
		if lun < 0 || lun > 1<<14 {
			return nil, fmt.Errorf("the fibre_channel connection info from Cinder has target_lun %d, out of range", lun)
		}
		for _, w := range wwns {
			n, err := normalizeWWN(w)
			if err != nil {
				return nil, err
			}
			src.TargetWWNs = append(src.TargetWWNs, n)
		}
		l := int32(lun) //nolint:gosec // range checked above
		src.Lun = &l
	case len(wwids) > 0:
		src.WWIDs = wwids
	default:
		return nil, missing("fibre_channel", "target_wwn (with target_lun) or wwids", "")
	}
	return &Result{Source: corev1.PersistentVolumeSource{FC: src}}, nil
}

// normalizeWWN writes a WWN the way the kubelet looks for it under
// /dev/disk/by-path: 16 lowercase hex digits, no 0x, no colons.
func normalizeWWN(w string) (string, error) {
	n := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(strings.ToLower(w), "0x"), ":", ""))
	if b, err := hex.DecodeString(n); err != nil || len(b) != 8 {
		return "", fmt.Errorf("the fibre_channel connection info from Cinder has target_wwn %q, which is not a 16-digit WWN", w)
	}
	return n, nil
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package subdir

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Claim annotations nfs-subdir-external-provisioner reads for the mode and
// owner of a claim's directory; they win over the instance's defaults
// (Ownership in Config, from NFS_DEFAULT_MODE, NFS_DEFAULT_UID and
// NFS_DEFAULT_GID).
const (
	AnnDirectoryMode = "k8s-sigs.io/nfs-directory-mode"
	AnnDirectoryUID  = "k8s-sigs.io/nfs-directory-uid"
	AnnDirectoryGID  = "k8s-sigs.io/nfs-directory-gid"
)

// ownershipAnnotations are the claim annotations Provision reads besides
// those of pathPattern.
var ownershipAnnotations = []string{AnnDirectoryMode, AnnDirectoryUID, AnnDirectoryGID}

// maxMode is the largest directory mode accepted: permission bits, sticky
// and setgid (new files inherit the group). Upstream accepts up to 0777;
// setuid means nothing on a directory and is refused.
const maxMode = os.ModeSticky | os.ModeSetgid | os.ModePerm

// maxID is the largest user or group id accepted, as for the class's gid.
const maxID = 1<<31 - 1

// Ownership is the mode and owner a volume directory gets; nil fields are
// not set (a new directory is then 0777 and keeps the provisioner's user
// and group, as before these settings existed).
type Ownership struct {
	Mode     *os.FileMode
	UID, GID *int
}

// set reports whether any field is given.
func (o Ownership) set() bool { return o.Mode != nil || o.UID != nil || o.GID != nil }

// ParseMode parses an octal directory mode ("755", "0770", "2770").
func ParseMode(s string) (os.FileMode, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 8, 32)
	if err != nil || n > 0o3777 {
		return 0, fmt.Errorf("%q is not an octal mode from 0 to 3777 (permission bits, sticky 1000, setgid 2000)", s)
	}
	mode := os.FileMode(n & 0o777)
	if n&0o1000 != 0 {
		mode |= os.ModeSticky
	}
	if n&0o2000 != 0 {
		mode |= os.ModeSetgid
	}
	return mode & maxMode, nil
}

// ParseID parses a numeric user or group id; names are refused (the
// provisioner's user database is not the clients').
func ParseID(s string) (int, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 31)
	if err != nil {
		return 0, fmt.Errorf("%q is not a numeric id from 0 to %d", s, maxID)
	}
	return int(n), nil
}

// claimOwnership reads the claim's annotations; each overrides the
// corresponding field of def. A bad value is an error naming the
// annotation: the claim's author can fix it.
func claimOwnership(pvc *corev1.PersistentVolumeClaim, def Ownership) (Ownership, error) {
	o := def
	ann := pvc.GetAnnotations()
	// An empty annotation is no annotation, as upstream.
	if v := ann[AnnDirectoryMode]; v != "" {
		m, err := ParseMode(v)
		if err != nil {
			return o, fmt.Errorf("PersistentVolumeClaim annotation %s: %w", AnnDirectoryMode, err)
		}
		o.Mode = &m
	}
	for _, f := range []struct {
		key string
		dst **int
	}{{AnnDirectoryUID, &o.UID}, {AnnDirectoryGID, &o.GID}} {
		v := ann[f.key]
		if v == "" {
			continue
		}
		n, err := ParseID(v)
		if err != nil {
			return o, fmt.Errorf("PersistentVolumeClaim annotation %s: %w", f.key, err)
		}
		*f.dst = &n
	}
	return o, nil
}

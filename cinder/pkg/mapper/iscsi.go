// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package mapper

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Keys of a kubernetes.io/iscsi-chap Secret, as the kubelet reads them.
const (
	ChapSessionUsername   = "node.session.auth.username"
	ChapSessionPassword   = "node.session.auth.password" //nolint:gosec // G101: a key name, not a credential
	ChapDiscoveryUsername = "discovery.sendtargets.auth.username"
	ChapDiscoveryPassword = "discovery.sendtargets.auth.password"
)

// ChapSecretSuffix is appended to the PV name to name its CHAP Secret.
const ChapSecretSuffix = "-iscsi-chap" //nolint:gosec // G101: a name suffix, not a credential

// maxISCSILun is the highest LUN a Kubernetes iSCSI volume accepts.
const maxISCSILun = 255

// ISCSI maps driver_volume_type iscsi: target_portal, target_iqn and
// target_lun (or target_portals, target_iqns and target_luns with
// multipath), CHAP credentials (auth_method CHAP, auth_username,
// auth_password; discovery_auth_* for discovery CHAP) into a per-volume
// Secret.
type ISCSI struct{}

// Map implements Mapper.
func (ISCSI) Map(req Request) (*Result, error) {
	d := &data{kind: "iscsi", m: req.Connection.Data}
	portal, iqn := d.str("target_portal"), d.str("target_iqn")
	lun, hasLun := d.integer("target_lun")
	portals, iqns, luns := d.strs("target_portals"), d.strs("target_iqns"), d.integers("target_luns")
	if d.err != nil {
		return nil, d.err
	}
	// Multipath answers may carry only the lists.
	if portal == "" && len(portals) > 0 {
		portal = portals[0]
	}
	if iqn == "" && len(iqns) > 0 {
		iqn = iqns[0]
	}
	if !hasLun && len(luns) > 0 {
		lun, hasLun = luns[0], true
	}
	switch {
	case portal == "":
		return nil, missing("iscsi", "target_portal", "")
	case iqn == "":
		return nil, missing("iscsi", "target_iqn", "")
	case !hasLun:
		return nil, missing("iscsi", "target_lun", "")
	case lun < 0 || lun > maxISCSILun:
		return nil, fmt.Errorf("the iscsi connection info from Cinder has target_lun %d; Kubernetes iSCSI volumes accept LUNs 0-%d", lun, maxISCSILun)
	}
	if !strings.HasPrefix(iqn, "iqn.") && !strings.HasPrefix(iqn, "eui.") && !strings.HasPrefix(iqn, "naa.") {
		return nil, fmt.Errorf("the iscsi connection info from Cinder has target_iqn %q, which is not an iqn., eui. or naa. name", iqn)
	}
	if req.InitiatorName == "" {
		return nil, errors.New("cinder serves this volume over iSCSI but the provisioner has no --initiator-name: set it to the initiator IQN the nodes log in with (the one Cinder grants access to)")
	}

	src := &corev1.ISCSIPersistentVolumeSource{
		TargetPortal:  portal,
		IQN:           iqn,
		Lun:           int32(lun), //nolint:gosec // checked against maxISCSILun above
		FSType:        req.FSType,
		Portals:       extraPortals(portal, iqn, lun, portals, iqns, luns),
		InitiatorName: &req.InitiatorName,
	}

	secretData := map[string][]byte{}
	if strings.EqualFold(d.str("auth_method"), "CHAP") {
		user, pass := d.str("auth_username"), d.str("auth_password")
		if user == "" || pass == "" {
			return nil, missing("iscsi", "auth_username or auth_password", " although auth_method is CHAP")
		}
		secretData[ChapSessionUsername], secretData[ChapSessionPassword] = []byte(user), []byte(pass)
		src.SessionCHAPAuth = true
	}
	if strings.EqualFold(d.str("discovery_auth_method"), "CHAP") {
		user, pass := d.str("discovery_auth_username"), d.str("discovery_auth_password")
		if user == "" || pass == "" {
			return nil, missing("iscsi", "discovery_auth_username or discovery_auth_password", " although discovery_auth_method is CHAP")
		}
		secretData[ChapDiscoveryUsername], secretData[ChapDiscoveryPassword] = []byte(user), []byte(pass)
		src.DiscoveryCHAPAuth = true
	}
	if d.err != nil {
		return nil, d.err
	}
	res := &Result{Source: corev1.PersistentVolumeSource{ISCSI: src}}
	if len(secretData) > 0 {
		// One Secret per volume: each volume's credentials reach only the
		// node attaching it, and deleting one volume revokes only its own.
		res.Secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: req.PVName + ChapSecretSuffix, Namespace: req.SecretNamespace},
			Type:       "kubernetes.io/iscsi-chap",
			Data:       secretData,
		}
		src.SecretRef = &corev1.SecretReference{Name: res.Secret.Name, Namespace: res.Secret.Namespace}
	}
	return res, nil
}

// extraPortals returns the multipath portals other than the primary one. A
// Kubernetes iSCSI volume has one IQN and one LUN for all its portals, so a
// path that Cinder gives with another IQN or LUN cannot be expressed and is
// left out (the primary path still works).
func extraPortals(primary, iqn string, lun int, portals, iqns []string, luns []int) []string {
	var out []string
	for i, p := range portals {
		if p == primary {
			continue
		}
		if i < len(iqns) && iqns[i] != iqn {
			continue
		}
		if i < len(luns) && luns[i] != lun {
			continue
		}
		out = append(out, p)
	}
	return out
}

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
	t, err := readISCSITarget(d)
	if err != nil {
		return nil, err
	}
	if req.InitiatorName == "" {
		return nil, errors.New("cinder serves this volume over iSCSI but the provisioner has no --initiator-name: set it to the initiator IQN the nodes log in with (the one Cinder grants access to)")
	}

	src := &corev1.ISCSIPersistentVolumeSource{
		TargetPortal:  t.portal,
		IQN:           t.iqn,
		Lun:           int32(t.lun), //nolint:gosec // checked against maxISCSILun in readISCSITarget
		FSType:        req.FSType,
		Portals:       extraPortals(t.portal, t.iqn, t.lun, t.portals, t.iqns, t.luns),
		InitiatorName: &req.InitiatorName,
	}

	secretData := map[string][]byte{}
	if src.SessionCHAPAuth, err = readCHAP(d, sessionCHAP, secretData); err != nil {
		return nil, err
	}
	if src.DiscoveryCHAPAuth, err = readCHAP(d, discoveryCHAP, secretData); err != nil {
		return nil, err
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

// iscsiTarget is the primary path of an iSCSI volume and, with multipath,
// the lists of all its paths.
type iscsiTarget struct {
	portal, iqn string
	lun         int
	portals     []string
	iqns        []string
	luns        []int
}

// readISCSITarget reads and checks the target of an iscsi connection. The
// keys are read in a fixed order, so that the first one of the wrong kind
// is the one reported.
func readISCSITarget(d *data) (*iscsiTarget, error) {
	t := &iscsiTarget{}
	t.portal, t.iqn = d.str("target_portal"), d.str("target_iqn")
	lun, hasLun := d.integer("target_lun")
	t.portals, t.iqns, t.luns = d.strs("target_portals"), d.strs("target_iqns"), d.integers("target_luns")
	if d.err != nil {
		return nil, d.err
	}
	// Multipath answers may carry only the lists.
	if t.portal == "" && len(t.portals) > 0 {
		t.portal = t.portals[0]
	}
	if t.iqn == "" && len(t.iqns) > 0 {
		t.iqn = t.iqns[0]
	}
	if !hasLun && len(t.luns) > 0 {
		lun, hasLun = t.luns[0], true
	}
	t.lun = lun
	return t, t.check(hasLun)
}

// check refuses a target a Kubernetes iSCSI volume cannot express: one
// without portal, IQN or LUN, a LUN out of range, or an IQN of no known
// naming scheme.
func (t *iscsiTarget) check(hasLun bool) error {
	switch {
	case t.portal == "":
		return missing("iscsi", "target_portal", "")
	case t.iqn == "":
		return missing("iscsi", "target_iqn", "")
	case !hasLun:
		return missing("iscsi", "target_lun", "")
	case t.lun < 0 || t.lun > maxISCSILun:
		return fmt.Errorf("the iscsi connection info from Cinder has target_lun %d; Kubernetes iSCSI volumes accept LUNs 0-%d", t.lun, maxISCSILun)
	}
	if !strings.HasPrefix(t.iqn, "iqn.") && !strings.HasPrefix(t.iqn, "eui.") && !strings.HasPrefix(t.iqn, "naa.") {
		return fmt.Errorf("the iscsi connection info from Cinder has target_iqn %q, which is not an iqn., eui. or naa. name", t.iqn)
	}
	return nil
}

// chapKeys are the connection keys of one CHAP exchange (session or
// discovery) and the keys of the kubernetes.io/iscsi-chap Secret they go to.
type chapKeys struct {
	method, username, password string
	secretUser, secretPassword string
}

var (
	sessionCHAP   = chapKeys{"auth_method", "auth_username", "auth_password", ChapSessionUsername, ChapSessionPassword}
	discoveryCHAP = chapKeys{"discovery_auth_method", "discovery_auth_username", "discovery_auth_password", ChapDiscoveryUsername, ChapDiscoveryPassword}
)

// readCHAP copies the credentials of one CHAP exchange into secretData when
// the connection asks for CHAP, and reports whether it does. The error
// names the keys only: the credentials never appear in it.
func readCHAP(d *data, k chapKeys, secretData map[string][]byte) (bool, error) {
	if !strings.EqualFold(d.str(k.method), "CHAP") {
		return false, nil
	}
	user, pass := d.str(k.username), d.str(k.password)
	if user == "" || pass == "" {
		return false, missing("iscsi", k.username+" or "+k.password, " although "+k.method+" is CHAP")
	}
	secretData[k.secretUser], secretData[k.secretPassword] = []byte(user), []byte(pass)
	return true, nil
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

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package mapper

import (
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// defaultCephMonitorPort is used for a host Cinder lists without a port.
const defaultCephMonitorPort = "6789"

// RBD maps driver_volume_type rbd: name (pool/image), hosts and ports (the
// Ceph monitors), auth_enabled and auth_username (the cephx user). The
// cephx key itself never comes from Cinder: the user keeps it in a Secret of
// type kubernetes.io/rbd named by the class parameters rbdSecretName and
// rbdSecretNamespace (default: the claim's namespace).
type RBD struct{}

// Map implements Mapper.
func (RBD) Map(req Request) (*Result, error) {
	d := &data{kind: "rbd", m: req.Connection.Data}
	name := d.str("name")
	hosts, ports := d.strs("hosts"), d.strs("ports")
	user := d.str("auth_username")
	auth := d.boolean("auth_enabled", user != "")
	if d.err != nil {
		return nil, d.err
	}
	pool, image, ok := strings.Cut(name, "/")
	if name == "" {
		return nil, missing("rbd", "name", " (pool/image)")
	}
	if !ok || pool == "" || image == "" {
		return nil, fmt.Errorf("the rbd connection info from Cinder has name %q, which is not pool/image", name)
	}
	if len(hosts) == 0 {
		return nil, missing("rbd", "hosts", " (the Ceph monitors)")
	}
	monitors := make([]string, len(hosts))
	for i, h := range hosts {
		port := defaultCephMonitorPort
		if i < len(ports) && ports[i] != "" {
			port = ports[i]
		}
		monitors[i] = net.JoinHostPort(strings.Trim(h, "[]"), port)
	}
	src := &corev1.RBDPersistentVolumeSource{
		CephMonitors: monitors,
		RBDPool:      pool,
		RBDImage:     image,
		FSType:       req.FSType,
	}
	if auth {
		if user == "" {
			return nil, missing("rbd", "auth_username", " although auth_enabled is true")
		}
		if req.RBDSecretName == "" {
			return nil, fmt.Errorf("cinder serves this volume over rbd with cephx user %q: create a Secret of type kubernetes.io/rbd whose key \"key\" holds that user's key and name it in the StorageClass parameter rbdSecretName (and rbdSecretNamespace, default the claim's namespace)", user)
		}
		ns := req.RBDSecretNamespace
		if ns == "" {
			ns = req.ClaimNamespace
		}
		src.RadosUser = user
		src.SecretRef = &corev1.SecretReference{Name: req.RBDSecretName, Namespace: ns}
	}
	return &Result{Source: corev1.PersistentVolumeSource{RBD: src}}, nil
}

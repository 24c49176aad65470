// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package mapper

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const password = "chap-Passw0rd-never-shown"

func request(kind string, data map[string]any) Request {
	return Request{
		Connection:      Connection{DriverVolumeType: kind, Data: data},
		PVName:          "pvc-1",
		ClaimNamespace:  "apps",
		SecretNamespace: "apps",
		InitiatorName:   "iqn.2026-01.io.kubeprov:nodes",
		FSType:          "ext4",
	}
}

func mustMap(t *testing.T, req Request) *Result {
	t.Helper()
	res, err := Map(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func wantError(t *testing.T, req Request, want ...string) {
	t.Helper()
	_, err := Map(req)
	if err == nil {
		t.Fatalf("Map succeeded, want an error containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("error holds the password: %v", err)
	}
}

func TestISCSISinglePathWithCHAP(t *testing.T) {
	res := mustMap(t, request("iscsi", map[string]any{
		"target_portal": "192.0.2.1:3260", "target_iqn": "iqn.2010-10.org.openstack:volume-1", "target_lun": float64(0),
		"auth_method": "CHAP", "auth_username": "u1", "auth_password": password,
		"discovery_auth_method": "CHAP", "discovery_auth_username": "d1", "discovery_auth_password": "dpass",
	}))
	src := res.Source.ISCSI
	if src.TargetPortal != "192.0.2.1:3260" || src.IQN != "iqn.2010-10.org.openstack:volume-1" || src.Lun != 0 || src.FSType != "ext4" ||
		*src.InitiatorName != "iqn.2026-01.io.kubeprov:nodes" || len(src.Portals) != 0 || !src.SessionCHAPAuth || !src.DiscoveryCHAPAuth {
		t.Errorf("source = %+v", src)
	}
	s := res.Secret
	if s == nil || s.Name != "pvc-1-iscsi-chap" || s.Namespace != "apps" || s.Type != "kubernetes.io/iscsi-chap" {
		t.Fatalf("secret = %+v", s)
	}
	want := map[string]string{ChapSessionUsername: "u1", ChapSessionPassword: password, ChapDiscoveryUsername: "d1", ChapDiscoveryPassword: "dpass"}
	for k, v := range want {
		if string(s.Data[k]) != v {
			t.Errorf("secret %s = %q, want %q", k, s.Data[k], v)
		}
	}
	if *src.SecretRef != (corev1.SecretReference{Name: s.Name, Namespace: s.Namespace}) {
		t.Errorf("secretRef = %+v", src.SecretRef)
	}
}

func TestISCSIMultipath(t *testing.T) {
	res := mustMap(t, request("iscsi", map[string]any{
		"target_portals": []any{"192.0.2.1:3260", "192.0.2.2:3260", "[2001:db8::3]:3260", "192.0.2.4:3260"},
		"target_iqns":    []any{"iqn.2010-10.org.openstack:v1", "iqn.2010-10.org.openstack:v1", "iqn.2010-10.org.openstack:v1", "iqn.2010-10.org.openstack:other"},
		"target_luns":    []any{float64(5), float64(5), float64(5), float64(5)},
	}))
	src := res.Source.ISCSI
	if src.TargetPortal != "192.0.2.1:3260" || src.IQN != "iqn.2010-10.org.openstack:v1" || src.Lun != 5 {
		t.Errorf("primary path = %+v", src)
	}
	// The path with another IQN cannot be expressed on one Kubernetes volume.
	if !slices.Equal(src.Portals, []string{"192.0.2.2:3260", "[2001:db8::3]:3260"}) {
		t.Errorf("portals = %v", src.Portals)
	}
	if res.Secret != nil || src.SecretRef != nil || src.SessionCHAPAuth {
		t.Errorf("CHAP set without auth_method: %+v", src)
	}
}

func TestISCSIStringLun(t *testing.T) {
	res := mustMap(t, request("ISCSI", map[string]any{"target_portal": "192.0.2.1", "target_iqn": "iqn.x:y", "target_lun": "7"}))
	if res.Source.ISCSI.Lun != 7 {
		t.Errorf("lun = %d", res.Source.ISCSI.Lun)
	}
}

func TestISCSIErrors(t *testing.T) {
	ok := func() map[string]any {
		return map[string]any{"target_portal": "192.0.2.1:3260", "target_iqn": "iqn.2010-10.org.openstack:v1", "target_lun": float64(1)}
	}
	with := func(k string, v any) map[string]any { m := ok(); m[k] = v; return m }
	without := func(k string) map[string]any { m := ok(); delete(m, k); return m }

	wantError(t, request("iscsi", without("target_portal")), "lacks target_portal")
	wantError(t, request("iscsi", without("target_iqn")), "lacks target_iqn")
	wantError(t, request("iscsi", without("target_lun")), "lacks target_lun")
	wantError(t, request("iscsi", with("target_lun", float64(300))), "target_lun 300", "0-255")
	wantError(t, request("iscsi", with("target_lun", 1.5)), "target_lun of an unexpected kind")
	wantError(t, request("iscsi", with("target_iqn", "volume-1")), `target_iqn "volume-1"`)
	wantError(t, request("iscsi", with("target_portals", map[string]any{"a": 1})), "target_portals of an unexpected kind")

	chap := with("auth_method", "CHAP")
	chap["auth_password"] = password
	wantError(t, request("iscsi", chap), "auth_username or auth_password")

	noInitiator := request("iscsi", ok())
	noInitiator.InitiatorName = ""
	wantError(t, noInitiator, "--initiator-name")
}

func TestRBD(t *testing.T) {
	req := request("rbd", map[string]any{
		"name": "volumes/volume-1", "hosts": []any{"192.0.2.10", "2001:db8::11", "192.0.2.12"}, "ports": []any{"6789", float64(3300)},
		"auth_enabled": true, "auth_username": "cinder", "secret_type": "ceph", "cluster_name": "ceph",
	})
	req.RBDSecretName = "ceph-cinder"
	res := mustMap(t, req)
	src := res.Source.RBD
	if !slices.Equal(src.CephMonitors, []string{"192.0.2.10:6789", "[2001:db8::11]:3300", "192.0.2.12:6789"}) {
		t.Errorf("monitors = %v", src.CephMonitors)
	}
	if src.RBDPool != "volumes" || src.RBDImage != "volume-1" || src.RadosUser != "cinder" || src.FSType != "ext4" ||
		*src.SecretRef != (corev1.SecretReference{Name: "ceph-cinder", Namespace: "apps"}) {
		t.Errorf("source = %+v", src)
	}
	if res.Secret != nil {
		t.Error("rbd must not create a secret: the cephx key is the user's")
	}

	req.RBDSecretNamespace = "ceph"
	if got := mustMap(t, req).Source.RBD.SecretRef.Namespace; got != "ceph" {
		t.Errorf("secret namespace = %s", got)
	}
}

func TestRBDWithoutAuth(t *testing.T) {
	res := mustMap(t, request("rbd", map[string]any{"name": "rbd/img", "hosts": []any{"mon1"}, "auth_enabled": false, "auth_username": "ignored"}))
	src := res.Source.RBD
	if src.SecretRef != nil || src.RadosUser != "" || !slices.Equal(src.CephMonitors, []string{"mon1:6789"}) {
		t.Errorf("source = %+v", src)
	}
}

func TestRBDErrors(t *testing.T) {
	wantError(t, request("rbd", map[string]any{"hosts": []any{"m"}}), "lacks name")
	wantError(t, request("rbd", map[string]any{"name": "image-only", "hosts": []any{"m"}}), `name "image-only", which is not pool/image`)
	wantError(t, request("rbd", map[string]any{"name": "p/i"}), "lacks hosts")
	wantError(t, request("rbd", map[string]any{"name": "p/i", "hosts": []any{"m"}, "auth_username": "cinder"}),
		`cephx user "cinder"`, "rbdSecretName", "kubernetes.io/rbd")
	wantError(t, request("rbd", map[string]any{"name": "p/i", "hosts": []any{"m"}, "auth_enabled": "maybe"}), "auth_enabled of an unexpected kind")
}

func TestFC(t *testing.T) {
	cases := map[string]struct {
		kind string
		data map[string]any
		want corev1.FCVolumeSource
	}{
		"single wwn string": {"fibre_channel", map[string]any{"target_wwn": "500A0981891B8DC5", "target_lun": float64(1)},
			corev1.FCVolumeSource{TargetWWNs: []string{"500a0981891b8dc5"}, Lun: ptr(1)}},
		"wwn list with colons and 0x": {"fibre_channel", map[string]any{"target_wwn": []any{"50:0a:09:81:89:1b:8d:c5", "0x500a0981991b8dc5"}, "target_lun": float64(2)},
			corev1.FCVolumeSource{TargetWWNs: []string{"500a0981891b8dc5", "500a0981991b8dc5"}, Lun: ptr(2)}},
		"target_wwns and target_luns": {"fibre_channel", map[string]any{"target_wwns": []any{"500a0981891b8dc5"}, "target_luns": []any{float64(4)}},
			corev1.FCVolumeSource{TargetWWNs: []string{"500a0981891b8dc5"}, Lun: ptr(4)}},
		"wwids": {"fibre_channel", map[string]any{"wwids": []any{"3600508b400105e210000900000490000"}},
			corev1.FCVolumeSource{WWIDs: []string{"3600508b400105e210000900000490000"}}},
		"fc alias": {"fc", map[string]any{"target_wwn": "500a0981891b8dc5", "target_lun": float64(0)},
			corev1.FCVolumeSource{TargetWWNs: []string{"500a0981891b8dc5"}, Lun: ptr(0)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := mustMap(t, request(tc.kind, tc.data)).Source.FC
			tc.want.FSType = "ext4"
			if !slices.Equal(src.TargetWWNs, tc.want.TargetWWNs) || !slices.Equal(src.WWIDs, tc.want.WWIDs) ||
				(src.Lun == nil) != (tc.want.Lun == nil) || (src.Lun != nil && *src.Lun != *tc.want.Lun) || src.FSType != "ext4" {
				t.Errorf("source = %+v, want %+v", src, tc.want)
			}
		})
	}
}

func TestFCErrors(t *testing.T) {
	wantError(t, request("fibre_channel", map[string]any{}), "lacks target_wwn (with target_lun) or wwids")
	wantError(t, request("fibre_channel", map[string]any{"target_wwn": "500a0981891b8dc5"}), "lacks target_lun")
	wantError(t, request("fibre_channel", map[string]any{"target_wwn": "zz", "target_lun": float64(1)}), `target_wwn "zz"`)
}

func TestUnsupported(t *testing.T) {
	_, err := Map(request("nvmeof", map[string]any{}))
	var unsupported *ErrUnsupported
	if !errors.As(err, &unsupported) || unsupported.Type != "nvmeof" {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "supported connection types are fc, fibre_channel, iscsi, rbd") {
		t.Errorf("err = %v", err)
	}
}

func ptr(n int32) *int32 { return &n }

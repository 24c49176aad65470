// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/cinder/pkg/mapper"
	"github.com/kubeprov/external-storage/test/framework"
)

// needTool skips (fails under CI=true) when a tool of hack/deps/cinder.sh
// is missing.
func needTool(t *testing.T, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	framework.Unavailable(t, "%s is not installed (hack/deps/cinder.sh installs it)", what)
}

// TestISCSILoginWithPV proves the iSCSI PV is right: the test driver
// exports the volume on a real (userspace) iSCSI target with the volume's
// CHAP credentials and an ACL for the connector's initiator, and a
// userspace initiator logs in with exactly what the PV and its Secret say:
// portal, IQN, LUN, initiator name and CHAP. A wrong password or another
// initiator is refused, and after the claim is deleted the target is gone.
func TestISCSILoginWithPV(t *testing.T) {
	needTool(t, cinderAPI.TGTPortal != "", "tgt (tgtd, tgtadm)")
	_, err := exec.LookPath("iscsi-readcapacity16")
	needTool(t, err == nil, "libiscsi-bin (iscsi-readcapacity16)")

	ctx := framework.TestContext(t, testTimeout)
	ns := cp.CreateTestNamespace(t, "cinder-login")
	sc := createClass(t, ns, provisionerName, map[string]string{"type": "iscsi"})
	pvc := createPVC(ctx, t, ns, sc.Name)
	_, pv, err := framework.WaitForPVCBound(ctx, cp.Client, ns, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	src := pv.Spec.ISCSI
	if src == nil || src.SecretRef == nil || src.InitiatorName == nil {
		t.Fatalf("iSCSI source = %+v", src)
	}
	if src.TargetPortal != cinderAPI.TGTPortal {
		t.Fatalf("portal = %s, want the test target's %s", src.TargetPortal, cinderAPI.TGTPortal)
	}
	secret, err := cp.Client.CoreV1().Secrets(src.SecretRef.Namespace).Get(ctx, src.SecretRef.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	user, pass := string(secret.Data[mapper.ChapSessionUsername]), string(secret.Data[mapper.ChapSessionPassword])

	login := func(initiator, password string) (string, error) {
		url := fmt.Sprintf("iscsi://%s%%%s@%s/%s/%d", user, password, src.TargetPortal, src.IQN, src.Lun)
		out, err := exec.CommandContext(ctx, "iscsi-readcapacity16", "-i", initiator, url).CombinedOutput()
		return string(out), err
	}

	out, err := login(*src.InitiatorName, pass)
	if err != nil {
		t.Fatalf("login with the PV's initiator and CHAP secret failed: %v\n%s", err, out)
	}
	// The test driver backs each GiB with one MiB: 2 GiB claim, 2 MiB LUN.
	if !strings.Contains(out, "Total size:2097152") {
		t.Errorf("unexpected capacity:\n%s", out)
	}
	if out, err := login(*src.InitiatorName, pass+"x"); err == nil || !strings.Contains(out, "Authentication failure") {
		t.Errorf("a wrong CHAP password was not refused (err %v):\n%s", err, out)
	}
	if out, err := login("iqn.2026-01.io.kubeprov:someone-else", pass); err == nil || !strings.Contains(out, "Target not found") {
		t.Errorf("another initiator was not refused (err %v):\n%s", err, out)
	}

	deleteClaim(ctx, t, pvc, pv.Name)
	// os-terminate_connection removed the export.
	if out, err := login(*src.InitiatorName, pass); err == nil {
		t.Errorf("login still works after the volume was deleted:\n%s", out)
	}
}

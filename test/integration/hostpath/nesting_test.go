// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/test/framework"
)

// byAnnotation is a class whose pathPattern is the claim's annotation dir,
// as the README's pathPattern example reads one: the tenant names the
// directory.
func byAnnotation(sc *storagev1.StorageClass) {
	sc.Parameters = map[string]string{"pathPattern": "${.PVC.annotations.dir}"}
}

func withDir(dir string) func(*corev1.PersistentVolumeClaim) {
	return func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Annotations = map[string]string{"dir": dir}
	}
}

// Issue 25 case 1: a second claim whose directory would be inside the
// first claim's volume is refused with a Warning event naming why, and
// nothing is made inside the first volume.
func TestNestedClaimRefused(t *testing.T) {
	ctx := framework.TestContext(t, time.Minute)
	e := setup(t, "nested", byAnnotation)
	startProvisioner(t, e.env(), e.args(node)...)

	e.createPVC(t, "outer", withDir("a"))
	outer := bound(ctx, t, e.ns, "outer")
	inner := e.createPVC(t, "inner", withDir("a/x/data"))
	var refusal *corev1.Event
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pvc, err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, "inner", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if pvc.Spec.VolumeName != "" {
			t.Fatalf("claim inner got PV %s, inside claim outer's volume %s", pvc.Spec.VolumeName, outer.Spec.HostPath.Path)
		}
		events, err := framework.ListEvents(ctx, cp.Client, inner)
		for i := range events {
			if events[i].Reason == "ProvisioningFailed" {
				refusal = &events[i]
			}
		}
		return refusal != nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if refusal.Type != corev1.EventTypeWarning || !strings.Contains(refusal.Message, "overlaps") || !strings.Contains(refusal.Message, outer.Name) {
		t.Errorf("event %s %q; want a Warning that names the overlap with %s", refusal.Type, refusal.Message, outer.Name)
	}
	t.Logf("event: %s", refusal.Message)
	if got := entries(t, outer.Spec.HostPath.Path); len(got) != 0 {
		t.Errorf("made %v inside claim outer's volume", got)
	}
	if pvs := volumesOfClass(ctx, t, e.class.Name); len(pvs) != 1 {
		t.Errorf("%d PVs, want only outer's", len(pvs))
	}
}

// Issue 25 case 1: a parent of a volume's directory is swapped for a
// symbolic link (as a pod could when it was inside another volume), to
// another tenant's volume or to a host directory. Deleting the volume
// removes nothing the link points at: a Warning event names the link, and
// once the link is gone the deletion completes.
func TestSymlinkSwappedVolumeDeletesNothingOutside(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	e := setup(t, "swap", byAnnotation)
	startProvisioner(t, e.env(), e.args(node)...)

	e.createPVC(t, "other-tenant", withDir("other-tenant/data"))
	other := bound(ctx, t, e.ns, "other-tenant")
	precious := filepath.Join(other.Spec.HostPath.Path, "precious")
	if err := os.WriteFile(precious, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	host, hostPrecious := outsideDir(t)
	if err := os.Mkdir(filepath.Join(host, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "data", "precious"), []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"inside": "../other-tenant", "outside": host} {
		t.Run(name, func(t *testing.T) {
			e.createPVC(t, name, withDir(name+"/x/data"))
			pv := bound(ctx, t, e.ns, name)
			link := filepath.Join(e.pvDir, name, "x")
			if err := os.RemoveAll(link); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			deletePVC(t, e.ns, name)
			ev, err := framework.WaitForEvent(ctx, cp.Client, pv, "VolumeFailedDelete")
			if err != nil {
				t.Fatalf("no VolumeFailedDelete event: %v", err)
			}
			if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "symbolic link") {
				t.Errorf("event %s %q; want a Warning naming the symbolic link", ev.Type, ev.Message)
			}
			t.Logf("event: %s", ev.Message)
			assertExists(t, precious)
			assertExists(t, filepath.Join(host, "data", "precious"))
			assertExists(t, hostPrecious)
			// The admin removes the link: the retried deletion finishes.
			if err := os.Remove(link); err != nil {
				t.Fatal(err)
			}
			if err := framework.WaitForPVDeleted(ctx, cp.Client, pv.Name); err != nil {
				t.Fatal(err)
			}
		})
	}
	assertExists(t, precious)
}

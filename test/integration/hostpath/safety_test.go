// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/test/framework"
)

const node = "node-1"

// outsideDir is a directory outside --pv-dir with a file that must survive.
func outsideDir(t *testing.T) (dir, precious string) {
	t.Helper()
	dir = t.TempDir()
	precious = filepath.Join(dir, "precious")
	if err := os.WriteFile(precious, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, precious
}

func assertExists(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("%s should still exist: %v", path, err)
	}
}

// A volume directory replaced by a symlink: deleting the volume removes the
// link, never what it points to.
func TestDeleteRemovesSymlinkNotTarget(t *testing.T) {
	ctx := framework.TestContext(t, time.Minute)
	e := setup(t, "symlink", nil)
	startProvisioner(t, e.env(), e.args(node)...)
	target, precious := outsideDir(t)

	e.createPVC(t, "claim", nil)
	pv := bound(ctx, t, e.ns, "claim")
	path := pv.Spec.HostPath.Path
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	deletePVC(t, e.ns, "claim")
	if err := framework.WaitForPVDeleted(ctx, cp.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("the symlink %s is still there: %v", path, err)
	}
	assertExists(t, precious)
}

// A PV whose hostPath was pointed outside --pv-dir is refused with a
// VolumeFailedDelete event, and nothing is removed.
func TestDeleteRefusesPathOutsidePVDir(t *testing.T) {
	ctx := framework.TestContext(t, time.Minute)
	e := setup(t, "outside", nil)
	startProvisioner(t, e.env(), e.args(node)...)
	target, precious := outsideDir(t)

	// As if someone edited a PV of ours: released (its claim is gone), reclaim
	// policy Delete, hostPath pointing elsewhere.
	pv := framework.NewPV(e.ns+"-outside", e.class.Name, "1Gi")
	pv.Annotations = map[string]string{"pv.kubernetes.io/provisioned-by": e.provisioner, annNode: node}
	pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	pv.Spec.HostPath.Path = target
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: e.ns, Name: "gone", UID: "00000000-0000-0000-0000-000000000001"}
	pv, err := cp.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := framework.WaitForEvent(ctx, cp.Client, pv, "VolumeFailedDelete")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ev.Message, "refusing to delete") || !strings.Contains(ev.Message, target) || ev.Type != corev1.EventTypeWarning {
		t.Errorf("event %s %q does not explain the refusal", ev.Type, ev.Message)
	}
	assertExists(t, precious)
	if _, err := cp.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the refused PV is gone: %v", err)
	}
}

// Reclaim policy Retain: the released volume and its data stay.
func TestRetain(t *testing.T) {
	ctx := framework.TestContext(t, time.Minute)
	e := setup(t, "retain", func(sc *storagev1.StorageClass) {
		sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRetain)
	})
	startProvisioner(t, e.env(), e.args(node)...)

	e.createPVC(t, "claim", nil)
	pv := bound(ctx, t, e.ns, "claim")
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("reclaim policy %s, want the class's Retain", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	data := filepath.Join(pv.Spec.HostPath.Path, "data")
	if err := os.WriteFile(data, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	deletePVC(t, e.ns, "claim")
	if _, err := framework.WaitForPVPhase(ctx, cp.Client, pv.Name, corev1.VolumeReleased); err != nil {
		t.Fatal(err)
	}
	assertExists(t, data)
}

// Claims a directory on one node cannot serve get a Warning event that
// names what is wrong, and nothing is created.
func TestUnsupportedClaims(t *testing.T) {
	e := setup(t, "unsupported", nil)
	startProvisioner(t, e.env(), e.args(node)...)
	expectRefusals(t, e, []refusal{
		{"block", func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
		}, []string{"does not support volumeMode Block"}},
	})
}

// A --node-local instance (the DaemonSet mode, several nodes) refuses the
// access modes pods on different nodes would need, with a Warning event
// that names the mode, and creates nothing.
func TestSharedAccessModesRefusedNodeLocal(t *testing.T) {
	e := setup(t, "nodelocal-modes", func(sc *storagev1.StorageClass) {
		sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	})
	startProvisioner(t, e.env(), e.args(node, "--node-local")...)
	var cases []refusal
	for _, mode := range []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadOnlyMany} {
		cases = append(cases, refusal{strings.ToLower(string(mode)), func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{mode}
			pvc.Annotations = map[string]string{annSelectedNode: node}
		}, []string{"access mode(s) " + string(mode) + " not supported", "--node-local"}})
	}
	expectRefusals(t, e, cases)
}

// refusal is a claim the provisioner must refuse, and what its Warning
// event must say.
type refusal struct {
	name   string
	mutate func(*corev1.PersistentVolumeClaim)
	want   []string
}

// expectRefusals creates each claim, expects a ProvisioningFailed Warning
// event containing every wanted part, and then no directory and no PV.
func expectRefusals(t *testing.T, e *testEnv, cases []refusal) {
	t.Helper()
	ctx := framework.TestContext(t, time.Minute)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pvc := e.createPVC(t, tc.name, tc.mutate)
			ev, err := framework.WaitForEvent(ctx, cp.Client, pvc, "ProvisioningFailed")
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.want {
				if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, want) {
					t.Errorf("event %s %q, want a Warning containing %q", ev.Type, ev.Message, want)
				}
			}
			t.Logf("event: %s", ev.Message)
		})
	}
	if got := entries(t, e.pvDir); len(got) != 0 {
		t.Errorf("--pv-dir holds %v for claims that were refused", got)
	}
	if pvs := volumesOfClass(ctx, t, e.class.Name); len(pvs) != 0 {
		t.Errorf("%d PVs for claims that were refused", len(pvs))
	}
}

// TestWalkthroughClaims: the claims of the original hostPath walkthrough
// ("Writing an out-of-tree dynamic provisioner"), which name their class only
// through the volume.beta.kubernetes.io/storage-class annotation and ask for
// ReadWriteMany, are provisioned by the single-node mode, with ReadOnlyMany
// and the two single-writer modes beside them; deleting each claim removes
// its PV and its directory. test/e2e's TestHostpathWalkthrough replays the
// walkthrough itself, pod included, on a real node.
func TestWalkthroughClaims(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	e := setup(t, "walkthrough", nil)
	startProvisioner(t, e.env(), e.args(node)...)

	for _, mode := range []corev1.PersistentVolumeAccessMode{
		corev1.ReadWriteMany, corev1.ReadOnlyMany, corev1.ReadWriteOnce, corev1.ReadWriteOncePod,
	} {
		t.Run(string(mode), func(t *testing.T) {
			name := strings.ToLower(string(mode))
			e.createPVC(t, name, func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.StorageClassName = nil
				pvc.Annotations = map[string]string{corev1.BetaStorageClassAnnotation: e.class.Name}
				pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{mode}
				pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1Mi")
			})
			pv := bound(ctx, t, e.ns, name)
			checkVolume(t, pv, e.pvDir, node)
			if pv.Spec.StorageClassName != e.class.Name || len(pv.Spec.AccessModes) != 1 || pv.Spec.AccessModes[0] != mode {
				t.Errorf("PV %s: class %q, access modes %v; want %s and [%s]", pv.Name, pv.Spec.StorageClassName, pv.Spec.AccessModes, e.class.Name, mode)
			}
			deletePVC(t, e.ns, name)
			if err := framework.WaitForPVDeleted(ctx, cp.Client, pv.Name); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(filepath.Join(e.pvDir, pv.Name)); !os.IsNotExist(err) {
				t.Errorf("directory of deleted PV %s: %v, want it gone", pv.Name, err)
			}
		})
	}
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	cinderprov "github.com/kubeprov/external-storage/cinder/pkg/cinder"
	"github.com/kubeprov/external-storage/cinder/pkg/mapper"
	"github.com/kubeprov/external-storage/test/framework"
)

const testTimeout = 2 * time.Minute

// createClass creates a StorageClass named after the test namespace and
// deletes it when the test ends.
func createClass(t *testing.T, ns, provisioner string, params map[string]string) *storagev1.StorageClass {
	t.Helper()
	return cp.CreateTestStorageClass(t, framework.NewStorageClass(ns, provisioner, params))
}

func createPVC(ctx context.Context, t *testing.T, ns, class string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc, err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, framework.NewPVC(ns, "data", class, "1500Mi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pvc
}

// deleteClaim deletes the claim and waits until its PV, and so its Cinder
// volume, is gone.
func deleteClaim(ctx context.Context, t *testing.T, pvc *corev1.PersistentVolumeClaim, pvName string) {
	t.Helper()
	if err := cp.Client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, cp.Client, pvName); err != nil {
		t.Fatal(err)
	}
}

// volumesNamed lists the Cinder volumes named name.
func volumesNamed(ctx context.Context, t *testing.T, name string) []volumes.Volume {
	t.Helper()
	vols, err := cinderAPI.Volumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(vols, func(v volumes.Volume) bool { return v.Name != name })
}

// assertNoVolumesNamed waits until Cinder has no volume of that name: an
// attempt that was running when the claim was deleted rolls back by itself.
func assertNoVolumesNamed(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	var left []volumes.Volume
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		left = volumesNamed(ctx, t, name)
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("Cinder volumes left: %+v", left)
	}
}

func assertVolumeGone(ctx context.Context, t *testing.T, id string) {
	t.Helper()
	_, err := volumes.Get(ctx, volClient, id).Extract()
	if !gophercloud.ResponseCodeIs(err, 404) {
		t.Errorf("Cinder volume %s still there (err %v)", id, err)
	}
}

// TestProvisionEachType: for each connection type a claim gets a Bound PV
// of the native kind, and deleting the claim leaves nothing in Cinder.
func TestProvisionEachType(t *testing.T) {
	cases := map[string]struct {
		params map[string]string
		check  func(t *testing.T, pv *corev1.PersistentVolume, ns string)
	}{
		"iscsi": {
			params: map[string]string{"type": "iscsi", "fsType": "xfs"},
			check: func(t *testing.T, pv *corev1.PersistentVolume, ns string) {
				src := pv.Spec.ISCSI
				if src == nil {
					t.Fatalf("no iSCSI source: %+v", pv.Spec.PersistentVolumeSource)
				}
				id := pv.Annotations[cinderprov.AnnVolumeID]
				if src.IQN != "iqn.2010-10.org.openstack:volume-"+id || src.Lun != 1 || src.TargetPortal == "" || src.FSType != "xfs" ||
					src.InitiatorName == nil || *src.InitiatorName != initiatorName || !src.SessionCHAPAuth {
					t.Errorf("iSCSI source = %+v", src)
				}
				if src.SecretRef == nil || src.SecretRef.Namespace != ns {
					t.Fatalf("secretRef = %+v", src.SecretRef)
				}
				s, err := cp.Client.CoreV1().Secrets(ns).Get(t.Context(), src.SecretRef.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if s.Type != "kubernetes.io/iscsi-chap" || len(s.Data[mapper.ChapSessionUsername]) == 0 || len(s.Data[mapper.ChapSessionPassword]) == 0 {
					t.Errorf("CHAP secret = type %s, keys %v", s.Type, keys(s.Data))
				}
			},
		},
		"rbd": {
			params: map[string]string{"type": "rbd", "rbdSecretName": "ceph-cinder"},
			check: func(t *testing.T, pv *corev1.PersistentVolume, ns string) {
				src := pv.Spec.RBD
				id := pv.Annotations[cinderprov.AnnVolumeID]
				if src == nil || src.RBDPool != "volumes" || src.RBDImage != "volume-"+id || src.RadosUser != "cinder" ||
					!slices.Equal(src.CephMonitors, []string{"192.0.2.10:6789", "192.0.2.11:6789", "[2001:db8::12]:3300"}) ||
					src.SecretRef == nil || *src.SecretRef != (corev1.SecretReference{Name: "ceph-cinder", Namespace: ns}) {
					t.Errorf("RBD source = %+v", src)
				}
			},
		},
		"fibre_channel": {
			params: map[string]string{"type": "fibre_channel"},
			check: func(t *testing.T, pv *corev1.PersistentVolume, _ string) {
				src := pv.Spec.FC
				if src == nil || !slices.Equal(src.TargetWWNs, []string{"500a0981891b8dc5", "500a0981991b8dc5"}) || src.Lun == nil || *src.Lun != 1 {
					t.Errorf("FC source = %+v", src)
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := framework.TestContext(t, testTimeout)
			ns := cp.CreateTestNamespace(t, "cinder-"+strings.ReplaceAll(name, "_", "-"))
			sc := createClass(t, ns, provisionerName, tc.params)
			pvc := createPVC(ctx, t, ns, sc.Name)

			_, pv, err := framework.WaitForPVCBound(ctx, cp.Client, ns, pvc.Name)
			if err != nil {
				t.Fatal(err)
			}
			if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.String() != "2Gi" {
				t.Errorf("capacity = %s, want 2Gi (1500Mi rounded up to whole GiB)", got.String())
			}
			if pv.Annotations[cinderprov.AnnIdentity] != identity {
				t.Errorf("annotations = %v", pv.Annotations)
			}
			id := pv.Annotations[cinderprov.AnnVolumeID]
			vol, err := volumes.Get(ctx, volClient, id).Extract()
			if err != nil {
				t.Fatalf("Cinder volume %s: %v", id, err)
			}
			if vol.Name != pv.Name || vol.Size != 2 || vol.VolumeType != tc.params["type"] || vol.Status != "attaching" ||
				vol.Metadata[cinderprov.MetaClaim] != ns+"/"+pvc.Name {
				t.Errorf("Cinder volume = name %s, size %d, type %s, status %s, metadata %v", vol.Name, vol.Size, vol.VolumeType, vol.Status, vol.Metadata)
			}
			tc.check(t, pv, ns)

			deleteClaim(ctx, t, pvc, pv.Name)
			assertVolumeGone(ctx, t, id)
			if ref := pv.Annotations[cinderprov.AnnAuthSecret]; ref != "" {
				ns, name, _ := strings.Cut(ref, "/")
				if _, err := cp.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("CHAP secret %s not deleted with the volume: %v", ref, err)
				}
			}
		})
	}
}

// waitForEventContaining waits for an event with reason whose message holds
// want: failed claims are retried, and a transient failure (sqlite's
// "database is locked") may come first.
func waitForEventContaining(ctx context.Context, t *testing.T, obj runtime.Object, reason, want string) *corev1.Event {
	t.Helper()
	var found *corev1.Event
	var seen []string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		events, err := framework.ListEvents(ctx, cp.Client, obj)
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for i := range events {
			if events[i].Reason != reason {
				continue
			}
			if strings.Contains(events[i].Message, want) {
				found = &events[i]
				return true, nil
			}
			seen = append(seen, events[i].Message)
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event containing %q (%v); %s events seen: %q", reason, want, err, reason, seen)
	}
	return found
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestFailuresRollBack: a claim that cannot be served gets a Warning event
// naming the problem, and Cinder keeps nothing of the attempts.
func TestFailuresRollBack(t *testing.T) {
	cases := map[string]struct {
		params map[string]string
		want   []string
	}{
		// The backend answers nvmeof: no Kubernetes volume source.
		"unsupported connection type": {
			params: map[string]string{"type": "nvme"},
			want:   []string{`"nvmeof"`, "supported connection types are fc, fibre_channel, iscsi, rbd", "rolled back and deleted"},
		},
		// The backend fails the create: the volume goes to status error.
		"backend error": {
			params: map[string]string{"type": "broken"},
			want:   []string{"went to status error", "Driver failed to create the volume", "rolled back and deleted"},
		},
		// Cinder refuses the create at once.
		"unknown volume type": {
			params: map[string]string{"type": "gold"},
			want:   []string{"creating a 2 GiB Cinder volume", "cinder answered 404", "gold"},
		},
		"unknown parameter": {
			params: map[string]string{"type": "iscsi", "iopsPerGB": "10"},
			want:   []string{"unknown parameter(s) iopsPerGB"},
		},
		"rbd without cephx secret": {
			params: map[string]string{"type": "rbd"},
			want:   []string{`cephx user "cinder"`, "rbdSecretName", "rolled back and deleted"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := framework.TestContext(t, testTimeout)
			ns := cp.CreateTestNamespace(t, "cinder-fail")
			sc := createClass(t, ns, provisionerName, tc.params)
			pvc := createPVC(ctx, t, ns, sc.Name)

			ev := waitForEventContaining(ctx, t, pvc, "ProvisioningFailed", tc.want[0])
			if ev.Type != corev1.EventTypeWarning {
				t.Errorf("event type = %s", ev.Type)
			}
			for _, w := range tc.want {
				if !strings.Contains(ev.Message, w) {
					t.Errorf("event %q does not contain %q", ev.Message, w)
				}
			}
			// The claim is retried; stop that before counting.
			if err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := framework.WaitForPVCDeleted(ctx, cp.Client, ns, pvc.Name); err != nil {
				t.Fatal(err)
			}
			assertNoVolumesNamed(ctx, t, "pvc-"+string(pvc.UID))
		})
	}
}

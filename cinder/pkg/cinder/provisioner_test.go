// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeprov/external-storage/cinder/pkg/mapper"
	"github.com/kubeprov/external-storage/lib/controller"
)

const (
	testIdentity  = "kubeprov.io/standalone-cinder/test-cluster"
	testInitiator = "iqn.2026-01.io.kubeprov:test"
	testPV        = "pvc-0b6c9d6e-0000-4000-8000-000000000001"
	chapPassword  = "s3cret-chap-Passw0rd"
)

var iscsiConnection = map[string]any{
	"driver_volume_type": "iscsi",
	"data": map[string]any{
		"target_portal": "192.0.2.1:3260",
		"target_iqn":    "iqn.2010-10.org.openstack:volume-1",
		"target_lun":    float64(1),
		"auth_method":   "CHAP",
		"auth_username": "chapuser",
		"auth_password": chapPassword,
	},
}

type env struct {
	cinder *fakeCinder
	kube   *fake.Clientset
	p      *Provisioner
}

func newEnv(t *testing.T, opts ...Option) *env {
	t.Helper()
	f := newFakeCinder(t)
	f.connection = iscsiConnection
	kube := fake.NewClientset()
	opts = append([]Option{
		WithConnector(Connector{Initiator: testInitiator, Host: "kubernetes", Platform: "x86_64", OSType: DefaultOSType}),
		WithPollInterval(time.Millisecond),
	}, opts...)
	p, err := New(f.client(), kube, testIdentity, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return &env{cinder: f, kube: kube, p: p}
}

func provisionOptions(params map[string]string, size string, modes ...corev1.PersistentVolumeAccessMode) controller.ProvisionOptions {
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	return controller.ProvisionOptions{
		StorageClass: &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "cinder"}, Provisioner: "kubeprov.io/standalone-cinder", Parameters: params},
		PVName:       testPV,
		PVC: &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "data", UID: "0b6c9d6e-0000-4000-8000-000000000001"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: modes,
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			},
		},
	}
}

func ctx(t *testing.T) context.Context {
	_, c := ktesting.NewTestContext(t)
	return c
}

func assertCalls(t *testing.T, f *fakeCinder, want ...string) {
	t.Helper()
	if got := f.actions(); !slices.Equal(got, want) {
		t.Errorf("Cinder calls = %v, want %v", got, want)
	}
}

func TestProvisionISCSI(t *testing.T) {
	e := newEnv(t)
	pv, state, err := e.p.Provision(ctx(t), provisionOptions(map[string]string{"type": "iscsi", "fsType": "xfs"}, "1500Mi"))
	if err != nil {
		t.Fatalf("Provision: %v (state %s)", err, state)
	}
	assertCalls(t, e.cinder, "list", "create", "reserve", "initialize", "list")

	// The volume: named after the PV, size rounded up, zone left to Cinder.
	create := e.cinder.creates[0]
	if create["name"] != testPV || create["size"] != float64(2) || create["volume_type"] != "iscsi" {
		t.Errorf("create body = %v", create)
	}
	if _, ok := create["availability_zone"]; ok {
		t.Errorf("availability_zone sent without the parameter: %v", create)
	}
	id := pv.Annotations[AnnVolumeID]
	vol := e.cinder.volume(id)
	if vol == nil || vol.Status != statusAttaching || vol.Metadata[MetaIdentity] != testIdentity || vol.Metadata[MetaClaim] != "apps/data" {
		t.Fatalf("volume %s = %+v", id, vol)
	}

	// The connector.
	conn := e.cinder.connectors[0]
	for k, want := range map[string]any{"initiator": testInitiator, "host": "kubernetes", "multipath": false, "platform": "x86_64", "os_type": "linux2"} {
		if conn[k] != want {
			t.Errorf("connector %s = %v, want %v", k, conn[k], want)
		}
	}

	// The PV.
	if got := pv.Annotations[AnnIdentity]; got != testIdentity {
		t.Errorf("identity annotation = %q", got)
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("capacity = %s, want 2Gi", got.String())
	}
	src := pv.Spec.ISCSI
	if src == nil {
		t.Fatalf("no iSCSI source: %+v", pv.Spec.PersistentVolumeSource)
	}
	if src.TargetPortal != "192.0.2.1:3260" || src.IQN != "iqn.2010-10.org.openstack:volume-1" || src.Lun != 1 || src.FSType != "xfs" ||
		src.InitiatorName == nil || *src.InitiatorName != testInitiator || !src.SessionCHAPAuth {
		t.Errorf("iSCSI source = %+v", src)
	}
	if src.SecretRef == nil || src.SecretRef.Namespace != "apps" || src.SecretRef.Name != testPV+mapper.ChapSecretSuffix {
		t.Fatalf("secretRef = %+v", src.SecretRef)
	}
	if got := pv.Annotations[AnnAuthSecret]; got != "apps/"+testPV+mapper.ChapSecretSuffix {
		t.Errorf("auth secret annotation = %q", got)
	}
	s, err := e.kube.CoreV1().Secrets("apps").Get(ctx(t), src.SecretRef.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != "kubernetes.io/iscsi-chap" || string(s.Data[mapper.ChapSessionUsername]) != "chapuser" ||
		string(s.Data[mapper.ChapSessionPassword]) != chapPassword || s.Labels[LabelPV] != testPV {
		t.Errorf("secret = %+v", s)
	}
	for k, v := range pv.Annotations {
		if strings.Contains(v, chapPassword) {
			t.Errorf("annotation %s holds the CHAP password", k)
		}
	}
}

func TestProvisionOtherTypes(t *testing.T) {
	cases := map[string]struct {
		connection map[string]any
		params     map[string]string
		check      func(*testing.T, *corev1.PersistentVolume)
	}{
		"rbd": {
			connection: map[string]any{"driver_volume_type": "rbd", "data": map[string]any{
				"name": "volumes/volume-1", "hosts": []any{"192.0.2.10"}, "ports": []any{"6789"}, "auth_enabled": true, "auth_username": "cinder",
			}},
			params: map[string]string{"type": "ceph", "rbdSecretName": "ceph-cinder"},
			check: func(t *testing.T, pv *corev1.PersistentVolume) {
				src := pv.Spec.RBD
				if src == nil || src.RBDPool != "volumes" || src.RBDImage != "volume-1" || src.RadosUser != "cinder" ||
					!slices.Equal(src.CephMonitors, []string{"192.0.2.10:6789"}) || src.SecretRef == nil || *src.SecretRef != (corev1.SecretReference{Name: "ceph-cinder", Namespace: "apps"}) {
					t.Errorf("rbd source = %+v", src)
				}
			},
		},
		"fibre_channel": {
			connection: map[string]any{"driver_volume_type": "fibre_channel", "data": map[string]any{
				"target_wwn": []any{"500A0981891B8DC5"}, "target_lun": float64(3),
			}},
			check: func(t *testing.T, pv *corev1.PersistentVolume) {
				src := pv.Spec.FC
				if src == nil || !slices.Equal(src.TargetWWNs, []string{"500a0981891b8dc5"}) || src.Lun == nil || *src.Lun != 3 {
					t.Errorf("fc source = %+v", src)
				}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.cinder.connection = tc.connection
			pv, _, err := e.p.Provision(ctx(t), provisionOptions(tc.params, "1Gi"))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, pv)
			if _, ok := pv.Annotations[AnnAuthSecret]; ok {
				t.Errorf("%s volume recorded an auth secret", name)
			}
			secrets, _ := e.kube.CoreV1().Secrets("").List(ctx(t), metav1.ListOptions{})
			if len(secrets.Items) != 0 {
				t.Errorf("secrets created: %v", secrets.Items)
			}
		})
	}
}

func TestProvisionAvailabilityZone(t *testing.T) {
	e := newEnv(t)
	if _, _, err := e.p.Provision(ctx(t), provisionOptions(map[string]string{"availability": "zone-b"}, "1Gi")); err != nil {
		t.Fatal(err)
	}
	if got := e.cinder.creates[0]["availability_zone"]; got != "zone-b" {
		t.Errorf("availability_zone = %v", got)
	}
}

// TestProvisionRollback covers every step that can fail after the volume
// exists: each must undo what was done, in reverse order, and leave
// nothing in Cinder or Kubernetes.
func TestProvisionRollback(t *testing.T) {
	cases := map[string]struct {
		setup     func(*env)
		wantCalls []string
		wantErr   []string
	}{
		"create fails": {
			setup:     func(e *env) { e.cinder.fail["create"] = http.StatusBadRequest },
			wantCalls: []string{"list", "create"},
			wantErr:   []string{"creating a 1 GiB Cinder volume", "injected failure of create"},
		},
		"volume goes to error": {
			setup: func(e *env) {
				e.cinder.createdStatus = "error"
				e.cinder.creatingPolls = 2
				e.cinder.messages = []userMessage{
					{ResourceUUID: "vol-1", UserMessage: "schedule allocate volume:Could not find any available weighted backend.", CreatedAt: "2026-01-01T00:00:02"},
					{ResourceUUID: "vol-1", UserMessage: "create volume from backend storage:Driver failed to create the volume.", CreatedAt: "2026-01-01T00:00:01"},
					{ResourceUUID: "vol-9", UserMessage: "about another volume", CreatedAt: "2026-01-01T00:00:03"},
				}
			},
			wantCalls: []string{"list", "create", "delete"},
			wantErr: []string{"went to status error: create volume from backend storage:Driver failed to create the volume.; schedule allocate volume:Could not find any available weighted backend.",
				"rolled back"},
		},
		"reserve fails": {
			setup:     func(e *env) { e.cinder.fail["reserve"] = http.StatusBadRequest },
			wantCalls: []string{"list", "create", "reserve", "delete"},
			wantErr:   []string{"reserving Cinder volume vol-1: cinder answered 400: injected failure of reserve"},
		},
		"initialize refused": {
			setup:     func(e *env) { e.cinder.fail["initialize"] = http.StatusBadRequest },
			wantCalls: []string{"list", "create", "reserve", "initialize", "unreserve", "delete"},
			wantErr:   []string{"initializing a connection to Cinder volume vol-1", "injected failure of initialize"},
		},
		"initialize server error": {
			setup:     func(e *env) { e.cinder.fail["initialize"] = http.StatusInternalServerError },
			wantCalls: []string{"list", "create", "reserve", "initialize", "terminate", "unreserve", "delete"},
			wantErr:   []string{"initializing a connection to Cinder volume vol-1", "cinder answered 500"},
		},
		"initialize gets no answer": {
			setup:     func(e *env) { e.cinder.hangUp["initialize"] = true },
			wantCalls: []string{"list", "create", "reserve", "initialize", "terminate", "unreserve", "delete"},
			wantErr:   []string{"initializing a connection"},
		},
		"mapper fails": {
			setup: func(e *env) {
				e.cinder.connection = map[string]any{"driver_volume_type": "nvmeof", "data": map[string]any{"target_nqn": "nqn.x"}}
			},
			wantCalls: []string{"list", "create", "reserve", "initialize", "terminate", "unreserve", "delete"},
			wantErr:   []string{`"nvmeof"`, "supported connection types are fc, fibre_channel, iscsi, rbd"},
		},
		"secret create fails": {
			setup: func(e *env) {
				e.kube.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(corev1.Resource("secrets"), "x", errors.New("RBAC says no"))
				})
			},
			wantCalls: []string{"list", "create", "reserve", "initialize", "terminate", "unreserve", "delete"},
			wantErr:   []string{"creating Secret apps/" + testPV + "-iscsi-chap", "RBAC says no"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			tc.setup(e)
			pv, state, err := e.p.Provision(ctx(t), provisionOptions(map[string]string{"type": "iscsi"}, "1Gi"))
			if err == nil {
				t.Fatalf("Provision succeeded: %v", pv.Name)
			}
			if state != controller.ProvisioningFinished {
				t.Errorf("state = %s, want Finished", state)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), chapPassword) {
				t.Errorf("error holds the CHAP password: %v", err)
			}
			assertCalls(t, e.cinder, tc.wantCalls...)
			if n := e.cinder.count(); n != 0 {
				t.Errorf("%d volumes left in Cinder", n)
			}
			secrets, _ := e.kube.CoreV1().Secrets("").List(ctx(t), metav1.ListOptions{})
			if len(secrets.Items) != 0 {
				t.Errorf("secrets left: %d", len(secrets.Items))
			}
		})
	}
}

func TestProvisionRollbackFailsIsInBackground(t *testing.T) {
	e := newEnv(t)
	e.cinder.fail["initialize"] = http.StatusInternalServerError
	e.cinder.fail["delete"] = http.StatusInternalServerError
	_, state, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
	if state != controller.ProvisioningInBackground {
		t.Errorf("state = %s, want InBackground: the volume is still there", state)
	}
	if err == nil || !strings.Contains(err.Error(), "rolling back (delete volume) failed too") {
		t.Errorf("error = %v", err)
	}

	// The retry finds the volume by name and finishes the job.
	delete(e.cinder.fail, "initialize")
	delete(e.cinder.fail, "delete")
	pv, _, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
	if err != nil {
		t.Fatal(err)
	}
	if e.cinder.count() != 1 || e.cinder.volume(pv.Annotations[AnnVolumeID]) == nil {
		t.Errorf("want exactly the first volume, have %d", e.cinder.count())
	}
}

func TestProvisionRetryFindsVolume(t *testing.T) {
	e := newEnv(t)
	v := e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusAttaching, Metadata: map[string]string{MetaIdentity: testIdentity}})
	pv, _, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
	if err != nil {
		t.Fatal(err)
	}
	// Already reserved by the earlier attempt: no second create, no reserve.
	assertCalls(t, e.cinder, "list", "initialize", "list")
	if pv.Annotations[AnnVolumeID] != v.ID {
		t.Errorf("volume id = %s, want %s", pv.Annotations[AnnVolumeID], v.ID)
	}
}

// A create that got no answer, or a server error, may have made the
// volume: the controller must keep retrying, and the retry adopts it.
func TestProvisionCreateOutcomeUnknownIsInBackground(t *testing.T) {
	for name, setup := range map[string]func(*fakeCinder){
		"no answer":    func(f *fakeCinder) { f.hangUp["create"] = true },
		"server error": func(f *fakeCinder) { f.fail["create"] = http.StatusInternalServerError },
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			setup(e.cinder)
			_, state, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
			if err == nil || state != controller.ProvisioningInBackground {
				t.Errorf("state = %s, err = %v; want InBackground: the volume may exist", state, err)
			}
		})
	}
}

func TestProvisionStillCreatingIsInBackground(t *testing.T) {
	e := newEnv(t)
	e.cinder.creatingPolls = 1 << 30
	c, cancel := context.WithTimeout(ctx(t), 50*time.Millisecond)
	defer cancel()
	_, state, err := e.p.Provision(c, provisionOptions(nil, "1Gi"))
	if err == nil || state != controller.ProvisioningInBackground {
		t.Fatalf("state = %s, err = %v", state, err)
	}
	if !strings.Contains(err.Error(), "still creating") {
		t.Errorf("error = %v", err)
	}
	// A creating volume cannot be deleted: it is kept for the retry.
	assertCalls(t, e.cinder, "list", "create")
}

func TestProvisionForeignVolumeWithSameName(t *testing.T) {
	e := newEnv(t)
	e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusAvailable, Metadata: map[string]string{MetaIdentity: "someone-else"}})
	_, state, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
	if err == nil || state != controller.ProvisioningFinished || !strings.Contains(err.Error(), "not created by this provisioner") {
		t.Errorf("state = %s, err = %v", state, err)
	}
	assertCalls(t, e.cinder, "list")
}

func TestProvisionRejectsBeforeCallingCinder(t *testing.T) {
	cases := map[string]struct {
		opts controller.ProvisionOptions
		want []string
	}{
		"unknown parameters": {
			opts: provisionOptions(map[string]string{"type": "x", "zone": "a", "iops": "5"}, "1Gi"),
			want: []string{"StorageClass cinder", "unknown parameter(s) iops, zone", "kubeprov.io/standalone-cinder understands availability, fsType, rbdSecretName, rbdSecretNamespace, type"},
		},
		"bad secret namespace": {
			opts: provisionOptions(map[string]string{"rbdSecretName": "ceph", "rbdSecretNamespace": "Not_A_Namespace"}, "1Gi"),
			want: []string{`rbdSecretNamespace "Not_A_Namespace" is not a namespace name`},
		},
		"namespace without name": {
			opts: provisionOptions(map[string]string{"rbdSecretNamespace": "ceph"}, "1Gi"),
			want: []string{"rbdSecretNamespace is set without rbdSecretName"},
		},
		"ReadWriteMany": {
			opts: provisionOptions(nil, "1Gi", corev1.ReadWriteMany),
			want: []string{"access mode(s) ReadWriteMany not supported: use ReadWriteOnce, ReadWriteOncePod or ReadOnlyMany"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			_, state, err := e.p.Provision(ctx(t), tc.opts)
			if err == nil || state != controller.ProvisioningFinished {
				t.Fatalf("state = %s, err = %v", state, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			assertCalls(t, e.cinder)
		})
	}
}

func TestProvisionWithoutInitiatorName(t *testing.T) {
	e := newEnv(t, WithConnector(Connector{Host: "kubernetes"}))
	_, state, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
	if err == nil || state != controller.ProvisioningFinished || !strings.Contains(err.Error(), "--initiator-name") {
		t.Errorf("state = %s, err = %v", state, err)
	}
	if e.cinder.count() != 0 {
		t.Error("volume left behind")
	}
}

func TestProvisionSecretNamespaceOption(t *testing.T) {
	e := newEnv(t, WithSecretNamespace("storage-system"))
	pv, _, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
	if err != nil {
		t.Fatal(err)
	}
	if ref := pv.Spec.ISCSI.SecretRef; ref.Namespace != "storage-system" {
		t.Errorf("secretRef = %+v", ref)
	}
	if _, err := e.kube.CoreV1().Secrets("storage-system").Get(ctx(t), pv.Spec.ISCSI.SecretRef.Name, metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
}

func TestProvisionUpdatesOwnSecretKeepsForeignOne(t *testing.T) {
	name := testPV + mapper.ChapSecretSuffix
	t.Run("own secret from an earlier attempt is updated", func(t *testing.T) {
		e := newEnv(t)
		_, _ = e.kube.CoreV1().Secrets("apps").Create(ctx(t), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps", Labels: map[string]string{LabelPV: testPV}},
			Data:       map[string][]byte{mapper.ChapSessionPassword: []byte("old")},
		}, metav1.CreateOptions{})
		if _, _, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi")); err != nil {
			t.Fatal(err)
		}
		s, _ := e.kube.CoreV1().Secrets("apps").Get(ctx(t), name, metav1.GetOptions{})
		if string(s.Data[mapper.ChapSessionPassword]) != chapPassword {
			t.Error("secret not updated")
		}
	})
	t.Run("foreign secret is left alone", func(t *testing.T) {
		e := newEnv(t)
		_, _ = e.kube.CoreV1().Secrets("apps").Create(ctx(t), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps"},
			Data:       map[string][]byte{"mine": []byte("x")},
		}, metav1.CreateOptions{})
		_, _, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
		if err == nil || !strings.Contains(err.Error(), "does not belong to PV") {
			t.Fatalf("err = %v", err)
		}
		s, _ := e.kube.CoreV1().Secrets("apps").Get(ctx(t), name, metav1.GetOptions{})
		if string(s.Data["mine"]) != "x" {
			t.Error("foreign secret modified")
		}
		if e.cinder.count() != 0 {
			t.Error("volume left behind")
		}
	})
}

func TestDelete(t *testing.T) {
	e := newEnv(t)
	pv, _, err := e.p.Provision(ctx(t), provisionOptions(nil, "1Gi"))
	if err != nil {
		t.Fatal(err)
	}
	e.cinder.resetCalls()
	// Another initiator now: Delete must still terminate the connection
	// that was made.
	later, err := New(e.cinder.client(), e.kube, testIdentity, WithPollInterval(time.Millisecond),
		WithConnector(Connector{Initiator: "iqn.2026-01.io.kubeprov:changed"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := later.Delete(ctx(t), pv); err != nil {
		t.Fatal(err)
	}
	assertCalls(t, e.cinder, "list", "terminate", "unreserve", "delete")
	if got := e.cinder.connectors[len(e.cinder.connectors)-1]["initiator"]; got != testInitiator {
		t.Errorf("terminate connector initiator = %v, want %s", got, testInitiator)
	}
	if n := e.cinder.count(); n != 0 {
		t.Errorf("%d volumes left", n)
	}
	if _, err := e.kube.CoreV1().Secrets("apps").Get(ctx(t), testPV+mapper.ChapSecretSuffix, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("CHAP secret not deleted: %v", err)
	}

	// Idempotent: a second Delete finds nothing and succeeds.
	e.cinder.resetCalls()
	if err := later.Delete(ctx(t), pv); err != nil {
		t.Fatal(err)
	}
	assertCalls(t, e.cinder, "list")
}

func TestDeleteAvailableVolumeSkipsConnection(t *testing.T) {
	e := newEnv(t)
	v := e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusAvailable})
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: testPV, Annotations: map[string]string{AnnVolumeID: v.ID, AnnIdentity: testIdentity}}}
	if err := e.p.Delete(ctx(t), pv); err != nil {
		t.Fatal(err)
	}
	assertCalls(t, e.cinder, "list", "delete")
}

func TestDeleteFailureNamesStep(t *testing.T) {
	e := newEnv(t)
	v := e.cinder.addVolume(fakeVolume{Name: testPV, Size: 1, Status: statusAttaching})
	e.cinder.fail["terminate"] = http.StatusInternalServerError
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: testPV, Annotations: map[string]string{AnnVolumeID: v.ID, AnnIdentity: testIdentity}}}
	err := e.p.Delete(ctx(t), pv)
	if err == nil || !strings.Contains(err.Error(), "terminating the connection to Cinder volume "+v.ID) {
		t.Errorf("err = %v", err)
	}
	if e.cinder.count() != 1 {
		t.Error("volume deleted although its connection could not be terminated")
	}
}

func TestDeleteIgnoresOtherInstances(t *testing.T) {
	e := newEnv(t)
	for name, ann := range map[string]map[string]string{
		"other identity": {AnnVolumeID: "vol-1", AnnIdentity: "another-cluster"},
		"no volume id":   {AnnIdentity: testIdentity},
		"no annotations": nil,
	} {
		t.Run(name, func(t *testing.T) {
			err := e.p.Delete(ctx(t), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Annotations: ann}})
			if !controller.IsIgnored(err) {
				t.Errorf("err = %v, want an IgnoredError", err)
			}
		})
	}
	assertCalls(t, e.cinder)
}

func TestSizeGiB(t *testing.T) {
	for in, want := range map[string]int{"1": 1, "1Gi": 1, "1G": 1, "1025Mi": 2, "10Gi": 10, "0": 1} {
		got, err := sizeGiB(resource.MustParse(in))
		if err != nil || got != want {
			t.Errorf("sizeGiB(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
	// Beyond int64 a quantity's Value wraps or saturates: refused, never a
	// small volume.
	for _, in := range []string{"10Ei", "1e30", "9223372036854775808"} {
		if got, err := sizeGiB(resource.MustParse(in)); err == nil || !strings.Contains(err.Error(), "too large") {
			t.Errorf("sizeGiB(%s) = %d, %v; want a 'too large' error", in, got, err)
		}
	}
}

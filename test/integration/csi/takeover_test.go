// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	csispec "github.com/container-storage-interface/spec/lib/go/csi"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/csi/app"
	"github.com/kubeprov/external-storage/csi/pkg/connection"
	"github.com/kubeprov/external-storage/test/csidriver"
)

// What the CSI external-provisioner puts on the PVs it makes.
const (
	upstreamFinalizer      = "external-provisioner.volume.kubernetes.io/finalizer"
	annProvisionedBy       = "pv.kubernetes.io/provisioned-by"
	annDeletionSecretName  = "volume.kubernetes.io/provisioner-deletion-secret-name"      //nolint:gosec // an annotation key
	annDeletionSecretNS    = "volume.kubernetes.io/provisioner-deletion-secret-namespace" //nolint:gosec // an annotation key
	attrProvisionerID      = "storage.kubernetes.io/csiProvisionerIdentity"
	upstreamProvisionerID  = "1700000000000-1234-"
	upstreamLeaseHolder    = "csi-provisioner-upstream-0"
	upstreamLeaseSeconds   = 4
	upstreamRenewPeriod    = time.Second
	standbyObservationTime = 3 * upstreamLeaseSeconds * time.Second
)

// TestPVDeletedBeforeClaim: deleting a bound PV first, then its claim,
// still deletes the volume (the finalizer, as upstream's HonorPVReclaimPolicy
// does), and the PV does not stay Terminating.
func TestPVDeletedBeforeClaim(t *testing.T) {
	e := setup(t, anyDriver, csidriver.Options{})
	class := e.createClass(nil)
	claim, pv := e.bound(e.createClaim(class.Name, "1Gi"))

	if !slices.Contains(pv.Finalizers, upstreamFinalizer) {
		t.Fatalf("PV finalizers %v, want %s", pv.Finalizers, upstreamFinalizer)
	}
	if id := pv.Spec.CSI.VolumeAttributes[attrProvisionerID]; !regexpIdentity(e.name).MatchString(id) {
		t.Errorf("volume attribute %s = %q, want <milliseconds>-<number>-%s", attrProvisionerID, id, e.name)
	}
	if v, ok := pv.Annotations[annDeletionSecretName]; !ok || v != "" {
		t.Errorf("PV annotations %v: want %s empty, as upstream writes it for a class without a secret", pv.Annotations, annDeletionSecretName)
	}

	if err := cp.Client.CoreV1().PersistentVolumes().Delete(e.ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Bound, the PV waits for its claim; the volume stays.
	e.eventually("the PV to be Terminating", func() bool {
		got, err := cp.Client.CoreV1().PersistentVolumes().Get(e.ctx, pv.Name, metav1.GetOptions{})
		return err == nil && got.DeletionTimestamp != nil
	})
	if _, ok := e.driver.Volume(pv.Name); !ok {
		t.Fatal("the volume of a PV still bound was deleted")
	}
	e.deleteClaim(claim)
	e.pvGone(pv.Name)
	e.noVolumeLeft()
}

// TestUpstreamTakeover replaces the upstream sidecar by ours as a rolling
// update does: the state it leaves (its Lease, PVs with its annotations,
// finalizer and identity, for classes with and without a provisioner
// secret) is taken over. While the upstream replica holds the Lease ours
// stays standby; then it provisions, and deletes the upstream PVs' volumes
// with nothing left Terminating.
func TestUpstreamTakeover(t *testing.T) {
	e := newEnv(t, anyDriver, csidriver.Options{})
	secretNS := cp.CreateTestNamespace(t, "csi-upstream-secrets")
	secretValue := e.createSecret(secretNS, "prov")
	plain := e.createClass(nil)
	withSecret := e.createClass(map[string]string{prefix + "provisioner-secret-name": "prov", prefix + "provisioner-secret-namespace": secretNS})

	// What the upstream sidecar made: two bound claims.
	dial, err := connection.Dial(e.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dial.Close() })
	driver := csispec.NewControllerClient(dial)
	var upstreamPVs []*corev1.PersistentVolume
	var upstreamClaims []*corev1.PersistentVolumeClaim
	for _, c := range []struct {
		class                   string
		secretName, secretSpace string
	}{{class: plain.Name}, {class: withSecret.Name, secretName: "prov", secretSpace: secretNS}} {
		claim := e.createClaim(c.class, "1Gi")
		pv := e.upstreamVolume(driver, claim, c.secretName, c.secretSpace)
		upstreamClaims = append(upstreamClaims, claim)
		upstreamPVs = append(upstreamPVs, pv)
	}
	for _, claim := range upstreamClaims {
		e.bound(claim)
	}

	// The upstream replica holds the Lease, renewing it.
	leaseName := app.UpstreamLeaseName(e.name)
	stopRenewing := e.holdUpstreamLease(leaseName)
	ours := e.startProvisioner("--leader-election", "--leader-election-lease-duration=4s",
		"--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms")
	if err := ours.WaitReady(e.ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	waiting := e.createClaim(plain.Name, "1Gi")
	deadline := time.Now().Add(standbyObservationTime)
	for time.Now().Before(deadline) {
		got, err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, waiting.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.VolumeName != "" || e.volumeCount() != len(upstreamPVs) {
			t.Fatalf("ours provisioned while the upstream replica held Lease %s", leaseName)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The upstream replica goes; ours leads and provisions.
	stopRenewing()
	e.eventually("ours to hold Lease "+leaseName, func() bool {
		l, err := cp.Client.CoordinationV1().Leases(journalNamespace).Get(e.ctx, leaseName, metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != upstreamLeaseHolder
	})
	e.bound(waiting)

	// The upstream PVs are deleted with their volumes, with and without a
	// secret, and none stays Terminating.
	for i, claim := range upstreamClaims {
		e.deleteClaim(claim)
		e.pvGone(upstreamPVs[i].Name)
		if _, ok := e.driver.Volume(upstreamPVs[i].Name); ok {
			t.Errorf("the volume of upstream PV %s was not deleted", upstreamPVs[i].Name)
		}
	}
	var sawSecret bool
	for _, req := range e.driver.DeleteRequests() {
		if req.GetVolumeId() == upstreamPVs[1].Spec.CSI.VolumeHandle {
			sawSecret = req.GetSecrets()["password"] == secretValue
		}
	}
	if !sawSecret {
		t.Error("DeleteVolume of the upstream PV of the class with a secret did not get the secret")
	}
	e.deleteClaim(waiting)
	e.noVolumeLeft()
}

// upstreamVolume creates the volume of a claim through the driver and its
// PV as the upstream sidecar does.
func (e *env) upstreamVolume(driver csispec.ControllerClient, claim *corev1.PersistentVolumeClaim, secretName, secretNS string) *corev1.PersistentVolume {
	e.t.Helper()
	name := pvName(claim)
	vol, err := createGiBVolume(e.ctx, driver, name)
	if err != nil {
		e.t.Fatal(err)
	}
	attributes := map[string]string{attrProvisionerID: upstreamProvisionerID + e.name}
	for k, v := range vol.GetVolumeContext() {
		attributes[k] = v
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:       name,
			Finalizers: []string{upstreamFinalizer},
			Annotations: map[string]string{
				annProvisionedBy:      e.name,
				annDeletionSecretName: secretName,
				annDeletionSecretNS:   secretNS,
			},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   claim.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              *claim.Spec.StorageClassName,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: e.name, VolumeHandle: vol.GetVolumeId(), FSType: "ext4", VolumeAttributes: attributes,
			}},
		},
	}
	pv, err = cp.Client.CoreV1().PersistentVolumes().Create(e.ctx, pv, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return pv
}

// holdUpstreamLease creates the Lease the upstream sidecar holds and renews
// it until the returned function is called.
func (e *env) holdUpstreamLease(name string) (stop func()) {
	e.t.Helper()
	leases := cp.Client.CoordinationV1().Leases(journalNamespace)
	now := metav1.NewMicroTime(time.Now())
	_, err := leases.Create(e.ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(upstreamLeaseHolder),
			LeaseDurationSeconds: ptr.To[int32](upstreamLeaseSeconds),
			AcquireTime:          &now,
			RenewTime:            &now,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = leases.Delete(context.WithoutCancel(e.ctx), name, metav1.DeleteOptions{}) })
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(upstreamRenewPeriod)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			l, err := leases.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != upstreamLeaseHolder {
				e.t.Errorf("Lease %s taken from the upstream replica while it renewed it: holder %v", name, l.Spec.HolderIdentity)
				return
			}
			l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
			_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
	}()
	stop = func() { cancel(); <-done }
	e.t.Cleanup(stop)
	return stop
}

// regexpIdentity matches the identity the upstream sidecar, and ours,
// records on a driver's volumes.
func regexpIdentity(driver string) *regexp.Regexp {
	return regexp.MustCompile(`^[0-9]{13}-[0-9]{1,4}-` + regexp.QuoteMeta(driver) + `$`)
}

// TestAttachedVolumeNotDeleted: a volume still attached to a node (a
// VolumeAttachment names its PV) is not deleted; a Warning event on the PV
// says why, and it is deleted once detached.
func TestAttachedVolumeNotDeleted(t *testing.T) {
	e := setup(t, anyDriver, csidriver.Options{})
	class := e.createClass(nil)
	claim, pv := e.bound(e.createClaim(class.Name, "1Gi"))
	vas := cp.Client.StorageV1().VolumeAttachments()
	va, err := vas.Create(e.ctx, &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: uniqueName("csi-attachment")},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: e.name, NodeName: "node-1",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pv.Name)}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vas.Delete(context.WithoutCancel(e.ctx), va.Name, metav1.DeleteOptions{}) })

	e.deleteClaim(claim)
	e.event(pv, "VolumeFailedDelete", "still attached to node node-1", "VolumeAttachment "+va.Name)
	if _, ok := e.driver.Volume(pv.Name); !ok || len(e.driver.DeleteRequests()) != 0 {
		t.Fatal("DeleteVolume was called for a volume still attached")
	}
	if err := vas.Delete(e.ctx, va.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.pvGone(pv.Name)
	e.noVolumeLeft()
}

// TestVolumeAttributesClass: the parameters of the claim's
// VolumeAttributesClass reach CreateVolume as mutable parameters and the PV
// records the class; a missing class, or one of another driver, is a
// Warning event and nothing is created.
func TestVolumeAttributesClass(t *testing.T) {
	// The spec lets a CO send mutable parameters only to a driver with
	// MODIFY_VOLUME (csi-driver-host-path refuses them otherwise).
	e := setup(t, anyDriver, csidriver.Options{ControllerCapabilities: []csispec.ControllerServiceCapability_RPC_Type{
		csispec.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME, csispec.ControllerServiceCapability_RPC_MODIFY_VOLUME,
	}})
	class := e.createClass(nil)
	vacs := cp.Client.StorageV1().VolumeAttributesClasses()
	create := func(driver string) string {
		vac, err := vacs.Create(e.ctx, &storagev1.VolumeAttributesClass{
			ObjectMeta: metav1.ObjectMeta{Name: uniqueName("vac")},
			DriverName: driver,
			Parameters: map[string]string{"iops": "3000", "throughput": "125"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = vacs.Delete(context.WithoutCancel(e.ctx), vac.Name, metav1.DeleteOptions{}) })
		return vac.Name
	}
	withVAC := func(name string) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeAttributesClassName = ptr.To(name) }
	}

	fast := create(e.name)
	_, pv := e.bound(e.createClaim(class.Name, "1Gi", withVAC(fast)))
	if got := e.driver.LastCreateRequest(pv.Name).GetMutableParameters(); got["iops"] != "3000" || got["throughput"] != "125" || len(got) != 2 {
		t.Errorf("CreateVolume got mutable parameters %v, want the class's", got)
	}
	if ptr.Deref(pv.Spec.VolumeAttributesClassName, "") != fast {
		t.Errorf("PV volumeAttributesClassName %v, want %s", pv.Spec.VolumeAttributesClassName, fast)
	}

	missing := e.createClaim(class.Name, "1Gi", withVAC("no-such-class"))
	e.event(missing, "ProvisioningFailed", `VolumeAttributesClass "no-such-class" not found`)
	foreign := e.createClaim(class.Name, "1Gi", withVAC(create("other.example.com")))
	e.event(foreign, "ProvisioningFailed", "is for driver other.example.com")
	if n := e.volumeCount(); n != 1 {
		t.Errorf("the driver holds %d volumes, want 1: none for the failed claims", n)
	}
}

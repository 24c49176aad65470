// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/test/csidriver"
)

// TestDriverErrors: final errors are reported with the driver's message and
// retried; transient ones are retried until the volume exists, once.
func TestDriverErrors(t *testing.T) {
	e := setup(t, inProcessDriver, csidriver.Options{})
	class := e.createClass(nil)

	t.Run("InvalidArgument", func(t *testing.T) {
		e := e.on(t)
		e.inProcess.FailCreate(csidriver.Fault{Code: codes.InvalidArgument, Message: "parameter replicas must be 1 to 3"})
		claim := e.createClaim(class.Name, "1Gi")
		e.event(claim, "ProvisioningFailed", "CSI driver "+e.name, "InvalidArgument", "parameter replicas must be 1 to 3")
		// The fault was for one call: the retry succeeds.
		e.bound(claim)
	})
	t.Run("Unavailable", func(t *testing.T) {
		e := e.on(t)
		e.inProcess.FailCreate(csidriver.Fault{Code: codes.Unavailable, Message: "backend restarting"}, csidriver.Fault{Code: codes.Unavailable, Message: "backend restarting"})
		claim := e.createClaim(class.Name, "1Gi")
		e.event(claim, "ProvisioningFailed", "still in progress, will retry", "backend restarting")
		_, pv := e.bound(claim)
		if n := len(requestsFor(e.driver, pv.Name)); n != 3 {
			t.Errorf("%d CreateVolume calls, want 3", n)
		}
	})
	t.Run("slow answer within --timeout", func(t *testing.T) {
		e := e.on(t)
		e.inProcess.FailCreate(csidriver.Fault{Delay: 500 * time.Millisecond})
		_, pv := e.bound(e.createClaim(class.Name, "1Gi"))
		if n := len(requestsFor(e.driver, pv.Name)); n != 1 {
			t.Errorf("%d CreateVolume calls, want 1", n)
		}
	})
	t.Run("DeleteVolume NotFound is success", func(t *testing.T) {
		e := e.on(t)
		claim, pv := e.bound(e.createClaim(class.Name, "1Gi"))
		e.inProcess.FailDelete(csidriver.Fault{Code: codes.NotFound, Message: "no such volume"})
		e.deleteClaim(claim)
		e.pvGone(pv.Name)
	})
	t.Run("DeleteVolume failure is retried", func(t *testing.T) {
		e := e.on(t)
		claim, pv := e.bound(e.createClaim(class.Name, "1Gi"))
		e.inProcess.FailDelete(csidriver.Fault{Code: codes.Internal, Message: "volume is busy"})
		e.deleteClaim(claim)
		e.event(pv, "VolumeFailedDelete", "DeleteVolume", "volume is busy")
		e.pvGone(pv.Name)
		if _, ok := e.driver.Volume(pv.Name); ok {
			t.Error("the volume is still in the driver")
		}
	})
}

// slowCreate makes the next CreateVolume hang until the returned release is
// called (at the latest when the test ends), and returns a channel closed
// when the call arrives.
func (e *env) slowCreate() (started <-chan struct{}, release func()) {
	s, r := make(chan struct{}), make(chan struct{})
	e.inProcess.FailCreate(csidriver.Fault{Started: s, Release: r})
	var released bool
	release = func() {
		if !released {
			released = true
			close(r)
		}
	}
	e.t.Cleanup(release)
	return s, release
}

func (e *env) waitStarted(started <-chan struct{}) {
	e.t.Helper()
	select {
	case <-started:
	case <-e.ctx.Done():
		e.t.Fatal("CreateVolume was never called")
	}
}

// TestTimeoutInBackground: a CreateVolume that outlives --timeout is
// retried with the same name until it completes; one volume results.
func TestTimeoutInBackground(t *testing.T) {
	e := setup(t, inProcessDriver, csidriver.Options{}, "--timeout=1s")
	class := e.createClass(nil)
	started, release := e.slowCreate()
	claim := e.createClaim(class.Name, "1Gi")
	e.waitStarted(started)
	e.event(claim, "ProvisioningFailed", "still in progress, will retry", "DeadlineExceeded")
	// The driver is still busy with the name: retries are Aborted, still in progress.
	e.event(claim, "ProvisioningFailed", "still in progress, will retry", "Aborted")
	release()
	_, pv := e.bound(claim)
	if vols := e.driver.Volumes(); len(vols) != 1 || vols[0].Name != pv.Name {
		t.Errorf("driver volumes %v, want only %s", vols, pv.Name)
	}
}

// TestClaimDeletedInBackground: when the claim goes while CreateVolume is
// still running in the driver, the volume is deleted once it exists.
func TestClaimDeletedInBackground(t *testing.T) {
	e := setup(t, inProcessDriver, csidriver.Options{}, "--timeout=1s")
	class := e.createClass(nil)
	started, release := e.slowCreate()
	claim := e.createClaim(class.Name, "1Gi")
	e.waitStarted(started)
	e.event(claim, "ProvisioningFailed", "still in progress", "DeadlineExceeded")
	e.deleteClaim(claim)
	release()
	e.eventually("the volume to be created and deleted again", func() bool {
		return len(e.driver.DeleteRequests()) > 0 && e.volumeCount() == 0
	})
	if absent, err := pvAbsent(e.ctx, pvName(claim)); !absent || err != nil {
		t.Errorf("a PV was saved for the deleted claim (%v)", err)
	}
}

// TestNoLeakAcrossRestart: the provisioner is killed while CreateVolume is
// in flight, the claim is deleted, the driver completes the volume; the
// restarted provisioner finds the operation in its journal and deletes the
// volume.
func TestNoLeakAcrossRestart(t *testing.T) {
	e := setup(t, inProcessDriver, csidriver.Options{})
	class := e.createClass(nil)
	started, release := e.slowCreate()
	claim := e.createClaim(class.Name, "1Gi")
	e.waitStarted(started)
	if err := e.prov.Kill(); err != nil {
		t.Fatal(err)
	}
	e.deleteClaim(claim)
	release()
	e.eventually("the driver to complete the volume", func() bool { return e.volumeCount() == 1 })

	e.prov = e.startProvisioner()
	e.noVolumeLeft()
	if absent, err := pvAbsent(e.ctx, pvName(claim)); !absent || err != nil {
		t.Errorf("a PV was saved for the deleted claim (%v)", err)
	}
	// The journal forgets the operation (written lazily, within seconds).
	e.eventually("the journal entry to be removed", func() bool {
		cms, err := cp.Client.CoreV1().ConfigMaps(journalNamespace).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, cm := range cms.Items {
			if _, ok := cm.Data[pvName(claim)]; ok {
				return false
			}
		}
		return true
	})
}

// TestDriverRestart: the provisioner waits for a driver that is not there
// yet, reports not ready while the driver is down, retries what failed
// meanwhile and provisions once the driver is back.
func TestDriverRestart(t *testing.T) {
	e := newEnv(t, inProcessDriver, csidriver.Options{})
	e.inProcess.Stop()
	e.prov = e.startProvisioner()
	// It waits for the socket rather than failing.
	if code, _, err := readyz(e.ctx, e.prov); err == nil && code == http.StatusOK {
		t.Fatalf("ready without a driver")
	}
	if err := e.inProcess.Start(e.socket); err != nil {
		t.Fatal(err)
	}
	if err := e.prov.WaitReady(e.ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	class := e.createClass(nil)
	e.bound(e.createClaim(class.Name, "1Gi"))

	e.inProcess.Stop()
	if err := waitNotReady(e.ctx, e.prov); err != nil {
		t.Fatal(err)
	}
	if _, body, _ := readyz(e.ctx, e.prov); !strings.Contains(body, "[-]csi-driver failed") {
		t.Errorf("/readyz does not name the driver:\n%s", body)
	}
	claim := e.createClaim(class.Name, "1Gi")
	e.event(claim, "ProvisioningFailed", "still in progress", "Unavailable")
	if err := e.inProcess.Start(e.socket); err != nil {
		t.Fatal(err)
	}
	e.bound(claim)
	if err := e.prov.WaitReady(e.ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := e.volumeCount(); n != 2 {
		t.Errorf("driver holds %d volumes, want 2", n)
	}

	// A driver that says it is not ready makes the provisioner not ready.
	e.inProcess.SetReady(false)
	if err := waitNotReady(e.ctx, e.prov); err != nil {
		t.Fatal(err)
	}
}

// TestRefusesDriverThatCannotCreate: csi-provisioner exits with a clear
// message beside a driver without CREATE_DELETE_VOLUME.
func TestRefusesDriverThatCannotCreate(t *testing.T) {
	e := newEnv(t, anyDriver, csidriver.Options{ControllerCapabilities: []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
	}})
	e.prov = e.startProvisioner()
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	if err := exitError(ctx, e.prov); err == nil {
		t.Fatal("csi-provisioner exited successfully")
	}
	if logs := e.prov.Log(); !strings.Contains(logs, "CSI driver "+e.name+" does not support CREATE_DELETE_VOLUME") {
		t.Errorf("no clear message in the output:\n%s", e.prov.LogTail(20))
	}
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package backendtest checks that a backend.Backend does what the scale
// benchmark and the fault suite rely on, against the real control plane.
package backendtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/framework"
)

// claims is how many claims Check provisions before the outage.
const claims = 3

// Expect is what Run expects of a backend beyond what all do, and the
// flags it needs for a short test.
type Expect struct {
	// OutageEvent is part of the Warning event a claim gets during an outage.
	OutageEvent string
	// ExtraArgs go to the replica (backend.Config.ExtraArgs).
	ExtraArgs []string
}

// Require fails the test under CI=true, and skips it elsewhere, when the
// backend's tools are missing; installer is the script that installs them.
func Require(t *testing.T, missing []string, installer string) {
	t.Helper()
	if len(missing) == 0 {
		return
	}
	framework.Unavailable(t, "missing %s (run %s)", strings.Join(missing, ", "), installer)
}

// NewConfig returns a backend configuration for one test: a namespace of its
// own (also the claims'), a provisioner name made of it that is valid as a
// CSI driver name too, and a scratch directory.
func NewConfig(t *testing.T, cp *framework.ControlPlane, prefix string) backend.Config {
	t.Helper()
	ns := cp.CreateTestNamespace(t, prefix)
	return backend.Config{
		ControlPlane:    cp,
		Namespace:       ns,
		ProvisionerName: ns + ".test.kubeprov.io",
		Dir:             t.TempDir(),
		Log:             t.Logf,
	}
}

// Run makes a backend with newBackend (a backend package's New) and checks
// it as Check does.
func Run[B backend.Backend](t *testing.T, cp *framework.ControlPlane, newBackend func(context.Context, backend.Config) (B, error), exp Expect) {
	t.Helper()
	cfg := NewConfig(t, cp, "backend")
	cfg.ExtraArgs = exp.ExtraArgs
	b, err := newBackend(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	Check(t, cp, b, cfg.Namespace, exp)
}

// Check runs one replica of b and follows claims of a class of b's from
// creation to deletion in namespace ns: every claim binds, the assets match
// the PVs, none is left after deletion. If b has an outage, a claim created
// during it gets a Warning event (with exp.OutageEvent in it) and stays
// Pending, and binds once the storage is back. b is closed when the test
// ends.
func Check(t *testing.T, cp *framework.ControlPlane, b backend.Backend, ns string, exp Expect) {
	ctx := framework.TestContext(t, 2*time.Minute)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("closing the %s backend: %v", b.Name(), err)
		}
	})
	p, err := b.StartProvisioner(ctx, "a", false)
	if err != nil {
		t.Fatal(err)
	}
	framework.StopAtEnd(t, p)
	c := cp.Client
	class := cp.CreateTestStorageClass(t, framework.NewStorageClass(ns, b.ProvisionerName(), b.Parameters()))

	var names []string
	create := func() *corev1.PersistentVolumeClaim {
		t.Helper()
		name := fmt.Sprintf("claim-%d", len(names))
		pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, framework.NewPVC(ns, name, class.Name, "1Gi"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
		return pvc
	}
	bound := func(name string) *corev1.PersistentVolume {
		t.Helper()
		_, pv, err := framework.WaitForPVCBound(ctx, c, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		return pv
	}
	checkAssets := func(want int) {
		t.Helper()
		if err := backend.CheckAssets(ctx, b, c, class.Name); err != nil {
			t.Fatal(err)
		}
		assets, err := b.Assets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(assets) != want {
			t.Fatalf("%d %s assets, want %d: %v", len(assets), b.Name(), want, assets)
		}
	}

	for range claims {
		create()
	}
	var pvs []string
	for _, name := range names {
		pvs = append(pvs, bound(name).Name)
	}
	checkAssets(claims)

	restore, err := b.Outage(ctx)
	switch {
	case errors.Is(err, backend.ErrNoOutage):
		t.Logf("The %s backend has no outage", b.Name())
	case err != nil:
		t.Fatal(err)
	default:
		pvc := create()
		ev, err := framework.WaitForEvent(ctx, c, pvc, "ProvisioningFailed")
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, exp.OutageEvent) {
			t.Errorf("event %s: %q is of type %s, want a %s containing %q", ev.Reason, ev.Message, ev.Type, corev1.EventTypeWarning, exp.OutageEvent)
		}
		t.Logf("During the outage: %s", ev.Message)
		if got, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{}); err != nil || got.Status.Phase != corev1.ClaimPending {
			t.Fatalf("claim %s during the outage: %v, phase %s; want Pending", pvc.Name, err, got.Status.Phase)
		}
		if err := restore(ctx); err != nil {
			t.Fatal(err)
		}
		pvs = append(pvs, bound(pvc.Name).Name)
		checkAssets(len(pvs))
	}

	for _, name := range names {
		if err := c.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pv := range pvs {
		if err := framework.WaitForPVDeleted(ctx, c, pv); err != nil {
			t.Fatal(err)
		}
	}
	checkAssets(0)
}

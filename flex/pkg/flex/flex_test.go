// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeprov/external-storage/lib/controller"
)

// fakeLauncher answers with out/err and records its calls.
type fakeLauncher struct {
	out        *Output
	err        error
	state      controller.ProvisioningState
	provisions []*Call
	deletes    []*Call
	deleteErr  error
}

func (f *fakeLauncher) Name() string { return "fake" }

func (f *fakeLauncher) Provision(_ context.Context, call *Call) (*Result, controller.ProvisioningState, error) {
	f.provisions = append(f.provisions, call)
	if f.err != nil {
		return nil, f.state, f.err
	}
	return &Result{Output: f.out}, controller.ProvisioningFinished, nil
}

func (f *fakeLauncher) Delete(_ context.Context, call *Call) error {
	f.deletes = append(f.deletes, call)
	return f.deleteErr
}

func newTestProvisioner(t *testing.T, l Launcher, opts ...func(*Options)) *Provisioner {
	t.Helper()
	o := Options{Name: "kubeprov.io/flex", Identity: "me", Launcher: l, FlexDriver: "x~y"}
	for _, f := range opts {
		f(&o)
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewRequiresOptions(t *testing.T) {
	_, err := New(Options{})
	if err == nil || !strings.Contains(err.Error(), "provisioner name") || !strings.Contains(err.Error(), "identity") || !strings.Contains(err.Error(), "launcher") {
		t.Errorf("err = %v", err)
	}
}

func TestProvisionRecordsWhatDeleteNeeds(t *testing.T) {
	l := &fakeLauncher{out: &Output{Status: StatusSuccess, Volume: []byte(`{"flexVolume": {"options": {"id": "v-9"}}}`)}}
	p := newTestProvisioner(t, l)
	o := testOptions("1Gi", map[string]string{"pool": "a"})
	pv, _, err := p.Provision(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if pv.Name != o.PVName || pv.Spec.ClaimRef.UID != o.PVC.UID || pv.Spec.FlexVolume.Driver != "x~y" || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("PV = %+v", pv)
	}
	ann := pv.Annotations
	if ann[AnnIdentity] != "me" || ann[AnnLauncher] != "fake" || ann[controller.AnnProvisionedBy] != "kubeprov.io/flex" {
		t.Errorf("annotations = %v", ann)
	}
	in, err := ParseInput(ann[AnnInput])
	if err != nil || in["pool"] != "a" || in[KeyPVCName] != "data" {
		t.Errorf("recorded input %v, %v", in, err)
	}

	pv.Spec.FlexVolume.Options["pool"] = "from-options" // recorded keys win
	if err := p.Delete(t.Context(), pv); err != nil {
		t.Fatal(err)
	}
	got := l.deletes[0].Input
	if got["pool"] != "a" || got["id"] != "v-9" || got[KeyPVName] != o.PVName || l.deletes[0].Volume != pv {
		t.Errorf("delete input = %v", got)
	}
}

func TestDeleteChecksIdentityAndRecord(t *testing.T) {
	l := &fakeLauncher{}
	p := newTestProvisioner(t, l)
	pv := func(ann map[string]string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Annotations: ann}}
	}
	for _, tc := range []struct {
		name    string
		ann     map[string]string
		ignored bool
		wantErr string
	}{
		{name: "other identity", ann: map[string]string{AnnIdentity: "other", AnnLauncher: "fake", AnnInput: "{}"}, ignored: true},
		{name: "no identity", ann: map[string]string{AnnLauncher: "fake", AnnInput: "{}"}, ignored: true},
		{name: "other launcher", ann: map[string]string{AnnIdentity: "me", AnnLauncher: "exec", AnnInput: "{}"}, wantErr: "--launcher=exec"},
		{name: "no input", ann: map[string]string{AnnIdentity: "me", AnnLauncher: "fake"}, wantErr: "no valid annotation " + AnnInput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Delete(t.Context(), pv(tc.ann))
			if controller.IsIgnored(err) != tc.ignored || (tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr))) {
				t.Errorf("err = %v", err)
			}
		})
	}
	if len(l.deletes) != 0 {
		t.Errorf("the driver ran for a volume it must not touch: %d", len(l.deletes))
	}
}

// "Not supported" is a permanent answer: the controller reports it once and
// does not run the driver again until the claim changes (lib's
// TestPermanentFailureIsReportedOnceAndNotRetried proves that part).
func TestNotSupportedIsPermanent(t *testing.T) {
	l := &fakeLauncher{err: (&Output{Status: StatusNotSupported, Message: "no"}).Err(), state: controller.ProvisioningFinished}
	_, state, err := newTestProvisioner(t, l).Provision(t.Context(), testOptions("1Gi", nil))
	if !errors.Is(err, ErrNotSupported) || !controller.IsPermanent(err) || state != controller.ProvisioningFinished {
		t.Fatalf("state %s, err %v: want a permanent ErrNotSupported with nothing created", state, err)
	}
}

func TestProvisionPassesLauncherState(t *testing.T) {
	l := &fakeLauncher{err: errors.New("killed"), state: controller.ProvisioningInBackground}
	_, state, err := newTestProvisioner(t, l).Provision(t.Context(), testOptions("1Gi", nil))
	if err == nil || state != controller.ProvisioningInBackground || len(l.deletes) != 0 {
		t.Errorf("state %s, err %v, deletes %d", state, err, len(l.deletes))
	}
}

// An answer that cannot become a PV is undone with the driver's delete.
func TestProvisionUndoesUnusableAnswers(t *testing.T) {
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "PersistentVolume"}, "pv", field.ErrorList{field.Required(field.NewPath("spec", "hostPath", "path"), "")})
	for _, tc := range []struct {
		name      string
		launcher  *fakeLauncher
		dryRunErr error
		deleteErr error
		want      []string
	}{
		{name: "two sources", launcher: &fakeLauncher{out: &Output{Status: StatusSuccess, Volume: []byte(`{"nfs": {}, "hostPath": {}}`)}},
			want: []string{"2 sources"}},
		{name: "garbage", launcher: &fakeLauncher{err: unknownOutcome{errors.New("driver printed invalid JSON")}}, want: []string{"invalid JSON"}},
		{name: "rejected by the API server", launcher: &fakeLauncher{out: &Output{Status: StatusSuccess, Volume: []byte(`{"hostPath": {"path": ""}}`)}},
			dryRunErr: invalid, want: []string{"not a valid PersistentVolume", "spec.hostPath.path"}},
		{name: "undo fails", launcher: &fakeLauncher{out: &Output{Status: StatusSuccess, Volume: []byte(`{}`)}}, deleteErr: errors.New("busy"),
			want: []string{"0 sources", "deleted by hand", "busy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			client.PrependReactor("create", "persistentvolumes", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if len(a.(k8stesting.CreateActionImpl).CreateOptions.DryRun) == 0 {
					t.Error("a PV was created for real")
				}
				return true, nil, tc.dryRunErr
			})
			tc.launcher.deleteErr = tc.deleteErr
			p := newTestProvisioner(t, tc.launcher, func(o *Options) { o.Client = client })
			_, state, err := p.Provision(t.Context(), testOptions("1Gi", nil))
			if err == nil || state != controller.ProvisioningFinished {
				t.Fatalf("state %s, err %v", state, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if len(tc.launcher.deletes) != 1 || tc.launcher.deletes[0].Input[KeyPVName] != "pvc-123" {
				t.Errorf("undo: %d deletes", len(tc.launcher.deletes))
			}
		})
	}
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeprov/external-storage/lib/controller"
)

// deleteRecorder is a Launcher that records the delete calls it is given.
type deleteRecorder struct{ calls []*Call }

func (*deleteRecorder) Name() string { return "container" }
func (*deleteRecorder) Provision(context.Context, *Call) (*Result, controller.ProvisioningState, error) {
	return nil, controller.ProvisioningFinished, nil
}
func (r *deleteRecorder) Delete(_ context.Context, call *Call) error {
	r.calls = append(r.calls, call)
	return nil
}

// FuzzDelete gives Delete a PV whose annotations are anything someone who can
// edit PVs could write. Whatever they say, the driver is only ever asked to
// delete this PV's own volume, and a delete pod only ever runs with the pod
// configuration provision signed for this PV.
func FuzzDelete(f *testing.F) {
	signed := `{"configMap":"sys/gold","image":"img","namespace":"sys","activeDeadlineSeconds":60}`
	f.Add(`{"kubernetes.io/pvOrVolumeName":"pvc-1"}`, signed, signRecord(testRecordKey, "pvc-1", signed), "me")
	f.Add(`{"kubernetes.io/pvOrVolumeName":"pvc-other"}`, signed, signRecord(testRecordKey, "pvc-1", signed), "me")
	f.Add(`{"kubernetes.io/pvOrVolumeName":"pvc-1"}`, `{"image":"evil","namespace":"sys","activeDeadlineSeconds":1,"hostPath":"/etc"}`, "", "me")
	f.Add(`{}`, signed, signRecord(testRecordKey, "pvc-2", signed), "someone-else")
	f.Fuzz(func(t *testing.T, input, pod, signature, identity string) {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1", Annotations: map[string]string{
			AnnInput: input, AnnPod: pod, AnnPodSignature: signature, AnnIdentity: identity, AnnLauncher: "container",
		}}}
		rec := &deleteRecorder{}
		p, err := New(Options{Name: "kubeprov.io/flex", Identity: "me", Launcher: rec})
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Delete(t.Context(), pv)
		for _, c := range rec.calls {
			if c.PVName != pv.Name || c.Input[KeyPVName] != pv.Name {
				t.Fatalf("driver asked to delete %q (input %q) for PV %s", c.PVName, c.Input[KeyPVName], pv.Name)
			}
		}

		// The pod launcher, given what reached it, runs a pod only for the
		// record provision signed for this PV, and then exactly as recorded.
		c := newClient()
		l := &PodLauncher{Client: c, Namespace: provNS, RecordKey: testRecordKey, StartTimeout: 1}
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // the pod is never waited on: only its creation matters
		_ = l.Delete(ctx, &Call{PVName: pv.Name, Input: Input{KeyPVName: pv.Name}, Record: pv.Annotations, Volume: pv})
		for _, a := range c.Actions() {
			if a.GetVerb() != "create" {
				continue
			}
			if signature != signRecord(testRecordKey, pv.Name, pod) {
				t.Fatalf("a delete pod was created from a record not signed for this PV: %s", pod)
			}
			var cfg PodConfig
			created := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
			if json.Unmarshal([]byte(pod), &cfg) != nil || created.Spec.Containers[0].Image != cfg.Image || created.Namespace != cfg.Namespace {
				t.Fatalf("delete pod %s/%s (image %s) is not the recorded one: %s", created.Namespace, created.Name, created.Spec.Containers[0].Image, pod)
			}
		}
	})
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/test/csidriver"
)

const prefix = "csi.storage.k8s.io/"

// createSecret creates a secret whose only value is unique to it, and returns that value.
func (e *env) createSecret(ns, name string) string {
	e.t.Helper()
	value := "value-" + uniqueName("secret")
	_, err := cp.Client.CoreV1().Secrets(ns).Create(e.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       map[string][]byte{"password": []byte(value)},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return value
}

// TestSecrets checks every rule of the secret parameters, accepted and
// rejected, with the PV's secret references, the secrets the driver gets and
// the Warning events users see; no secret value ever shows in an event or a
// log line.
func TestSecrets(t *testing.T) {
	e := setup(t, anyDriver, csidriver.Options{})
	secretNS := cp.CreateTestNamespace(t, "csi-secrets")
	provValue := e.createSecret(secretNS, "prov")
	defaultValue := e.createSecret(secretNS, "shared")
	claimNSValue := e.createSecret(e.ns, "data-creds")
	values := []string{provValue, defaultValue, claimNSValue}

	ref := func(ns, name string) *corev1.SecretReference {
		return &corev1.SecretReference{Namespace: ns, Name: name}
	}
	type refs struct{ publish, stage, nodePublish, ctrlExpand, nodeExpand *corev1.SecretReference }
	every := func(r *corev1.SecretReference) refs { return refs{r, r, r, r, r} }
	tests := []struct {
		name        string
		params      map[string]string
		annotations map[string]string
		// accepted cases
		wantRefs     refs
		wantDeletion *corev1.SecretReference
		wantSecret   string // the value CreateVolume gets
		wantParams   map[string]string
		// rejected cases: parts of the Warning event
		wantEvent []string
	}{
		{
			name: "current keys of every kind",
			params: map[string]string{
				prefix + "provisioner-secret-name": "prov", prefix + "provisioner-secret-namespace": secretNS,
				prefix + "controller-publish-secret-name": "publish", prefix + "controller-publish-secret-namespace": secretNS,
				prefix + "node-stage-secret-name": "stage", prefix + "node-stage-secret-namespace": secretNS,
				prefix + "node-publish-secret-name": "node-publish", prefix + "node-publish-secret-namespace": secretNS,
				prefix + "controller-expand-secret-name": "ctrl-expand", prefix + "controller-expand-secret-namespace": secretNS,
				prefix + "node-expand-secret-name": "node-expand", prefix + "node-expand-secret-namespace": secretNS,
			},
			wantRefs: refs{ref(secretNS, "publish"), ref(secretNS, "stage"), ref(secretNS, "node-publish"),
				ref(secretNS, "ctrl-expand"), ref(secretNS, "node-expand")},
			wantDeletion: ref(secretNS, "prov"), wantSecret: provValue, wantParams: map[string]string{},
		},
		{
			name: "legacy keys are accepted and passed to the driver",
			params: map[string]string{
				"csiProvisionerSecretName": "prov", "csiProvisionerSecretNamespace": secretNS,
				"csiControllerPublishSecretName": "publish", "csiControllerPublishSecretNamespace": secretNS,
				"csiNodeStageSecretName": "stage", "csiNodeStageSecretNamespace": secretNS,
				"csiNodePublishSecretName": "node-publish", "csiNodePublishSecretNamespace": secretNS,
			},
			wantRefs:     refs{ref(secretNS, "publish"), ref(secretNS, "stage"), ref(secretNS, "node-publish"), nil, nil},
			wantDeletion: ref(secretNS, "prov"), wantSecret: provValue,
			wantParams: map[string]string{
				"csiProvisionerSecretName": "prov", "csiProvisionerSecretNamespace": secretNS,
				"csiControllerPublishSecretName": "publish", "csiControllerPublishSecretNamespace": secretNS,
				"csiNodeStageSecretName": "stage", "csiNodeStageSecretNamespace": secretNS,
				"csiNodePublishSecretName": "node-publish", "csiNodePublishSecretNamespace": secretNS,
			},
		},
		{
			name:         "default secret for every kind",
			params:       map[string]string{prefix + "secret-name": "shared", prefix + "secret-namespace": secretNS, "type": "fast"},
			wantRefs:     every(ref(secretNS, "shared")),
			wantDeletion: ref(secretNS, "shared"), wantSecret: defaultValue, wantParams: map[string]string{"type": "fast"},
		},
		{
			name: "templates",
			params: map[string]string{
				prefix + "provisioner-secret-name": "${pvc.annotations['example.com/creds']}", prefix + "provisioner-secret-namespace": "${pvc.namespace}",
				prefix + "node-stage-secret-name": "stage-${pvc.name}", prefix + "node-stage-secret-namespace": secretNS,
				prefix + "node-publish-secret-name": "${pv.name}", prefix + "node-publish-secret-namespace": "${pvc.namespace}",
			},
			annotations:  map[string]string{"example.com/creds": "data-creds"},
			wantDeletion: ref(e.ns, "data-creds"), wantSecret: claimNSValue, wantParams: map[string]string{},
			// stage and node-publish are checked below, as they depend on the claim
		},
		{
			name: "old and new key for the same secret",
			params: map[string]string{"csiNodeStageSecretName": "a", "csiNodeStageSecretNamespace": secretNS,
				prefix + "node-stage-secret-name": "a", prefix + "node-stage-secret-namespace": secretNS},
			wantEvent: []string{`"csiNodeStageSecretName"`, `"` + prefix + `node-stage-secret-name"`, "both set the node-stage secret"},
		},
		{
			name:      "name without namespace",
			params:    map[string]string{prefix + "controller-publish-secret-name": "publish"},
			wantEvent: []string{`"` + prefix + `controller-publish-secret-name" is set but "` + prefix + `controller-publish-secret-namespace" is not`},
		},
		{
			name:      "claim name in a namespace",
			params:    map[string]string{prefix + "provisioner-secret-name": "prov", prefix + "provisioner-secret-namespace": "${pvc.name}"},
			wantEvent: []string{`"` + prefix + `provisioner-secret-namespace": ${pvc.name} is not allowed in a secret namespace`},
		},
		{
			name:      "annotation in a namespace",
			params:    map[string]string{prefix + "node-expand-secret-name": "x", prefix + "node-expand-secret-namespace": "${pvc.annotations['ns']}"},
			wantEvent: []string{`"` + prefix + `node-expand-secret-namespace": ${pvc.annotations['ns']} is not allowed in a secret namespace`},
		},
		{
			name:      "unknown variable",
			params:    map[string]string{prefix + "secret-name": "${pvc.uid}", prefix + "secret-namespace": secretNS},
			wantEvent: []string{`"` + prefix + `secret-name": unknown variable ${pvc.uid}`},
		},
		{
			name:        "name that is not a DNS subdomain",
			params:      map[string]string{prefix + "provisioner-secret-name": "${pvc.annotations['example.com/creds']}", prefix + "provisioner-secret-namespace": secretNS},
			annotations: map[string]string{"example.com/creds": "Not_A_Name"},
			wantEvent:   []string{`"` + prefix + `provisioner-secret-name"`, `resolves to "Not_A_Name", which is not a valid secret name (DNS subdomain)`},
		},
		{
			name:      "namespace that is not a DNS label",
			params:    map[string]string{prefix + "provisioner-secret-name": "prov", prefix + "provisioner-secret-namespace": "${pvc.namespace}.x"},
			wantEvent: []string{`"` + prefix + `provisioner-secret-namespace"`, "which is not a valid namespace name (DNS label)"},
		},
		{
			name:      "missing annotation",
			params:    map[string]string{prefix + "provisioner-secret-name": "${pvc.annotations['example.com/creds']}", prefix + "provisioner-secret-namespace": secretNS},
			wantEvent: []string{`"` + prefix + `provisioner-secret-name"`, `has no annotation "example.com/creds"`},
		},
		{
			name:      "unknown reserved key",
			params:    map[string]string{prefix + "provisioner-secret": "prov"},
			wantEvent: []string{`"` + prefix + `provisioner-secret": unknown key with the reserved prefix`},
		},
		{
			name:      "provisioner secret that does not exist",
			params:    map[string]string{prefix + "provisioner-secret-name": "absent", prefix + "provisioner-secret-namespace": secretNS},
			wantEvent: []string{"secret " + secretNS + "/absent", `"` + prefix + `provisioner-secret-name"`, "does not exist: create it"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := e.on(t)
			class := e.createClass(tc.params)
			claim := e.createClaim(class.Name, "1Gi", func(c *corev1.PersistentVolumeClaim) {
				c.Name = "data-" + uniqueName("c")
				c.Annotations = tc.annotations
			})
			if tc.wantEvent != nil {
				e.event(claim, "ProvisioningFailed", tc.wantEvent...)
				if n := len(requestsFor(e.driver, pvName(claim))); n != 0 {
					t.Errorf("the driver got %d CreateVolume calls for a rejected class", n)
				}
				if absent, err := pvAbsent(e.ctx, pvName(claim)); !absent || err != nil {
					t.Errorf("a PV exists for a rejected class (%v)", err)
				}
				return
			}
			_, pv := e.bound(claim)
			src := pv.Spec.CSI
			if tc.name == "templates" {
				tc.wantRefs = refs{stage: ref(secretNS, "stage-"+claim.Name), nodePublish: ref(e.ns, pv.Name)}
			}
			got := refs{src.ControllerPublishSecretRef, src.NodeStageSecretRef, src.NodePublishSecretRef, src.ControllerExpandSecretRef, src.NodeExpandSecretRef}
			for i, pair := range [][2]*corev1.SecretReference{
				{got.publish, tc.wantRefs.publish}, {got.stage, tc.wantRefs.stage}, {got.nodePublish, tc.wantRefs.nodePublish},
				{got.ctrlExpand, tc.wantRefs.ctrlExpand}, {got.nodeExpand, tc.wantRefs.nodeExpand},
			} {
				if (pair[0] == nil) != (pair[1] == nil) || (pair[0] != nil && *pair[0] != *pair[1]) {
					t.Errorf("secret ref %d (publish, stage, node-publish, controller-expand, node-expand): %v, want %v", i, pair[0], pair[1])
				}
			}
			if pv.Annotations["volume.kubernetes.io/provisioner-deletion-secret-name"] != tc.wantDeletion.Name ||
				pv.Annotations["volume.kubernetes.io/provisioner-deletion-secret-namespace"] != tc.wantDeletion.Namespace {
				t.Errorf("deletion secret annotations %v, want %v", pv.Annotations, tc.wantDeletion)
			}
			req := e.driver.LastCreateRequest(pv.Name)
			if !maps.Equal(req.GetSecrets(), map[string]string{"password": tc.wantSecret}) {
				t.Errorf("CreateVolume did not get the provisioner secret")
			}
			if !maps.Equal(req.GetParameters(), tc.wantParams) {
				t.Errorf("parameters %v, want %v", req.GetParameters(), tc.wantParams)
			}
		})
	}

	t.Run("no secret value in events or logs", func(t *testing.T) {
		e := e.on(t)
		events, err := cp.Client.CoreV1().Events("").List(e.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events.Items {
			for _, v := range values {
				if strings.Contains(ev.Message, v) {
					t.Errorf("event %s/%s shows a secret: %s", ev.Namespace, ev.Name, ev.Message)
				}
			}
		}
		logs := e.prov.Log()
		for _, v := range values {
			if strings.Contains(logs, v) {
				t.Errorf("the provisioner logged a secret value")
			}
		}
		if n := strings.Count(logs, `parameter="csiProvisionerSecretName"`); n != 1 {
			t.Errorf("%d deprecation notices for csiProvisionerSecretName, want exactly 1", n)
		}
	})
}

func requestsFor(d driverView, name string) []string {
	var out []string
	for _, r := range d.CreateRequests() {
		if r.GetName() == name {
			out = append(out, r.GetName())
		}
	}
	return out
}

// TestDeleteSecretAfterClassGone: DeleteVolume gets the provisioner secret
// recorded on the PV although the StorageClass is gone, and a missing secret
// is a Warning event on the PV until it is back.
func TestDeleteSecretAfterClassGone(t *testing.T) {
	e := setup(t, anyDriver, csidriver.Options{})
	secretNS := cp.CreateTestNamespace(t, "csi-secrets")
	value := e.createSecret(secretNS, "creds")
	class := e.createClass(map[string]string{prefix + "provisioner-secret-name": "creds", prefix + "provisioner-secret-namespace": secretNS})
	claim, pv := e.bound(e.createClaim(class.Name, "1Gi"))
	second, pv2 := e.bound(e.createClaim(class.Name, "1Gi"))

	if err := cp.Client.StorageV1().StorageClasses().Delete(e.ctx, class.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.deleteClaim(claim)
	e.pvGone(pv.Name)
	deletes := e.driver.DeleteRequests()
	if len(deletes) != 1 || deletes[0].GetVolumeId() != pv.Spec.CSI.VolumeHandle || deletes[0].GetSecrets()["password"] != value {
		t.Fatalf("DeleteVolume calls %d; want one for %s with the provisioner secret", len(deletes), pv.Spec.CSI.VolumeHandle)
	}

	// Without the secret the volume cannot be deleted: the PV says why.
	if err := cp.Client.CoreV1().Secrets(secretNS).Delete(e.ctx, "creds", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.deleteClaim(second)
	e.event(pv2, "VolumeFailedDelete", "secret "+secretNS+"/creds", "volume.kubernetes.io/provisioner-deletion-secret-name", "does not exist")
	if _, ok := e.driver.Volume(pv2.Name); !ok {
		t.Fatal("the volume was deleted without its secret")
	}
	e.createSecret(secretNS, "creds")
	e.pvGone(pv2.Name)
	e.noVolumeLeft()
}

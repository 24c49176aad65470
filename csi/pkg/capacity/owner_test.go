// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

func meta(apiVersion, kind, name string, uid types.UID, owner *metav1.OwnerReference) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: uid},
	}
	if owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return m
}

func TestOwner(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	rsRef := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "ctrl-1", UID: "uid-rs", Controller: ptr.To(true)}
	deployRef := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "ctrl", UID: "uid-deploy", Controller: ptr.To(true)}
	scheme := metadatafake.NewTestScheme()
	_ = metav1.AddMetaToScheme(scheme)
	client := metadatafake.NewSimpleMetadataClient(scheme,
		meta("v1", "Pod", "ctrl-1-x", "uid-pod", rsRef),
		meta("apps/v1", "ReplicaSet", "ctrl-1", "uid-rs", deployRef),
		meta("apps/v1", "Deployment", "ctrl", "uid-deploy", nil),
		meta("v1", "Pod", "lonely", "uid-lonely", nil),
	)
	for _, tc := range []struct {
		pod     string
		level   int
		want    types.UID
		wantErr string
	}{
		{pod: "ctrl-1-x", level: -1},
		{pod: "ctrl-1-x", level: 0, want: "uid-pod"},
		{pod: "ctrl-1-x", level: 1, want: "uid-rs"},
		{pod: "ctrl-1-x", level: 2, want: "uid-deploy"},
		{pod: "ctrl-1-x", level: 3, wantErr: "Deployment " + namespace + "/ctrl (level 2) has no controller"},
		{pod: "lonely", level: 1, wantErr: "has no controller; use level 0"},
		{pod: "", level: 0, wantErr: "POD_NAME"},
		{pod: "missing", level: 0, wantErr: "reading Pod " + namespace + "/missing"},
	} {
		ref, err := Owner(ctx, client, namespace, tc.pod, tc.level)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("pod %q level %d: error %v, want one containing %q", tc.pod, tc.level, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("pod %q level %d: %v", tc.pod, tc.level, err)
		case tc.want == "" && ref != nil:
			t.Errorf("level %d: owner %v, want none", tc.level, ref)
		case tc.want != "" && (ref == nil || ref.UID != tc.want || ref.Controller == nil || !*ref.Controller):
			t.Errorf("pod %q level %d: owner %+v, want controller reference with uid %s", tc.pod, tc.level, ref, tc.want)
		}
	}
}

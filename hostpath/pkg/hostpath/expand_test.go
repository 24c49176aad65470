// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// otherDirs is a Dirs that is not LocalDirs (helper pods): the instance
// serves every node.
type otherDirs struct{ LocalDirs }

func TestOwnsVolume(t *testing.T) {
	dir := t.TempDir()
	hostPath := corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir + "/pv"}}
	local := corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir + "/pv"}}
	nfs := corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: dir + "/pv"}}
	pv := func(source corev1.PersistentVolumeSource, ann ...string) *corev1.PersistentVolume {
		a := map[string]string{}
		for i := 0; i+1 < len(ann); i += 2 {
			a[ann[i]] = ann[i+1]
		}
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Annotations: a}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: source}}
	}
	for _, tc := range []struct {
		name      string
		nodeLocal bool
		dirs      Dirs
		pv        *corev1.PersistentVolume
		want      bool
	}{
		{name: "own node, hostPath", pv: pv(hostPath, AnnNode, "node-a"), want: true},
		{name: "own node, local", pv: pv(local, AnnNode, "node-a"), want: true},
		{name: "other node", pv: pv(hostPath, AnnNode, "node-b")},
		{name: "no node annotation", pv: pv(hostPath)},
		{name: "not a directory", pv: pv(nfs, AnnNode, "node-a")},
		{name: "shared", pv: pv(hostPath, AnnNode, "node-b", AnnShared, "true"), want: true},
		{name: "shared, node-local", nodeLocal: true, pv: pv(hostPath, AnnNode, "node-b", AnnShared, "true")},
		{name: "node-local, own node", nodeLocal: true, pv: pv(local, AnnNode, "node-a"), want: true},
		{name: "helper pods, any node", dirs: otherDirs{}, pv: pv(hostPath, AnnNode, "node-b"), want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(Config{Dir: dir, Node: "node-a", NodeLocal: tc.nodeLocal, Dirs: tc.dirs})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.OwnsVolume(tc.pv); got != tc.want {
				t.Errorf("OwnsVolume = %v, want %v", got, tc.want)
			}
			err = p.ExpandVolume(context.Background(), tc.pv, 2<<30)
			if (err == nil) != tc.want {
				t.Errorf("ExpandVolume: %v; want success exactly for an owned volume", err)
			}
		})
	}
}

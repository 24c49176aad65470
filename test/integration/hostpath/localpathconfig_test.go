// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"path"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/hostpath/pkg/hostpath"
)

// TestManifestsLocalPathConfig applies deploy/local-path-config to the real
// API server (which validates it) and checks what a user relies on: its
// config.json is valid, --config names the file where the ConfigMap is
// mounted as a directory (so that changes reach the pod), --pv-dir is gone,
// and every path of the configuration is a hostPath volume mounted at the
// same path, since PVs carry the path the provisioner sees.
func TestManifestsLocalPathConfig(t *testing.T) {
	objs := render(t, "local-path-config")
	apply(t, objs)
	cm := find[corev1.ConfigMap](t, objs)
	paths, err := hostpath.ParseConfig([]byte(cm.Data["config.json"]))
	if err != nil {
		t.Fatalf("ConfigMap %s: %v", cm.Name, err)
	}
	pod := podTemplate(t, objs)
	c := pod.Spec.Containers[0]
	var config string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			config = v
		}
		if strings.HasPrefix(a, "--pv-dir") {
			t.Errorf("argument %s beside --config", a)
		}
	}
	mountOf := func(dir string) (corev1.VolumeMount, *corev1.Volume) {
		for _, m := range c.VolumeMounts {
			if m.MountPath == dir {
				i := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
				if i >= 0 {
					return m, &pod.Spec.Volumes[i]
				}
			}
		}
		return corev1.VolumeMount{}, nil
	}
	if m, v := mountOf(path.Dir(config)); config == "" || v == nil || v.ConfigMap == nil || v.ConfigMap.Name != cm.Name || m.SubPath != "" {
		t.Errorf("--config=%q is not a file of ConfigMap %s mounted as a directory (mount %+v, volume %+v)", config, cm.Name, m, v)
	}
	for _, p := range paths.AllPaths() {
		if _, v := mountOf(p); v == nil || v.HostPath == nil || v.HostPath.Path != p {
			t.Errorf("configured path %s is not a hostPath volume mounted at the same path (volume %+v)", p, v)
		}
	}
}

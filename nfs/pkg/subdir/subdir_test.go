// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package subdir

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeprov/external-storage/lib/controller"
)

func claim(ns, name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name),
			Labels:      map[string]string{"app": "db", "evil": "x"},
			Annotations: map[string]string{"dir": "../../etc", "team": "blue/green"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

func TestExpand(t *testing.T) {
	pvc := claim("ns1", "data")
	for pattern, want := range map[string]string{
		"":                                      "ns1-data-pvc-1",
		"${.PVC.namespace}/${.PVC.name}":        "ns1/data",
		"apps/${.PVC.labels.app}-${.PV.name}":   "apps/db-pvc-1",
		"${.PVC.annotations.team}/${.PVC.name}": "blue/green/data",
		"fixed":                                 "fixed",
	} {
		got, err := Expand(pattern, pvc, "pvc-1")
		if err != nil || got != want {
			t.Errorf("Expand(%q) = %q, %v; want %q", pattern, got, err, want)
		}
	}
	for _, pattern := range []string{
		"/abs/${.PVC.name}", "../${.PVC.name}", "a/../../b", "${.PVC.annotations.dir}", "a//b", "a/",
		"${.PVC.labels.missing}", "${.PVC.uid}", "${.PVC.name", ".", "x/./y",
	} {
		got, err := Expand(pattern, pvc, "pvc-1")
		if !errors.Is(err, ErrPathPattern) {
			t.Errorf("Expand(%q) = %q, %v; want ErrPathPattern", pattern, got, err)
		}
	}
}

// TestExpandMaliciousClaims: what a claim's author sets never leads outside
// the share, and the event says why the claim was refused.
func TestExpandMaliciousClaims(t *testing.T) {
	withAnnotation := func(v string) *corev1.PersistentVolumeClaim {
		pvc := claim("ns", "data")
		pvc.Annotations["k"] = v
		return pvc
	}
	const ann = "${.PVC.annotations.k}"
	for _, tc := range []struct {
		name, pattern string
		pvc           *corev1.PersistentVolumeClaim
		want, wantErr string
	}{
		{name: "variables in values are not expanded again", pattern: ann, pvc: withAnnotation("${.PVC.namespace}"), want: "${.PVC.namespace}"},
		{name: "default pattern with a traversing name", pvc: claim("ns", "../../../etc"),
			wantErr: `invalid pathPattern "${.PVC.namespace}-${.PVC.name}-${.PV.name}": it expands to "ns-../../../etc-pvc-1", which could leave the NFS share or is not a plain relative path (invalid path: "ns-../../../etc-pvc-1" has a ".." component)`},
		{name: "default pattern with the longest names", pvc: claim(strings.Repeat("n", 63), strings.Repeat("c", 253)),
			wantErr: "is longer than 255 bytes"},
		{name: "dot-dot annotation", pattern: "x/" + ann, pvc: withAnnotation(".."), wantErr: `it expands to "x/..", which could leave the NFS share`},
		{name: "absolute annotation", pattern: ann, pvc: withAnnotation("/etc/shadow"), wantErr: `"/etc/shadow" is absolute`},
		{name: "NUL in an annotation", pattern: ann, pvc: withAnnotation("a\x00/../b"), wantErr: "contains a NUL byte"},
		{name: "deep tree from an annotation", pattern: ann, pvc: withAnnotation(strings.Repeat("a/", 1<<19) + "a"),
			wantErr: `invalid pathPattern "${.PVC.annotations.k}": it expands to a path of 1048577 bytes, more than the 1024 an NFS client can mount`},
		{name: "nested variable", pattern: "${.PVC.annotations.${.PVC.name}}", pvc: claim("ns", "data"), wantErr: `the claim has no annotation "${.PVC.name"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Expand(tc.pattern, tc.pvc, "pvc-1")
			if tc.wantErr != "" {
				if !errors.Is(err, ErrPathPattern) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Expand(%q) = %q, %.300v; want an ErrPathPattern containing %q", tc.pattern, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Expand(%q) = %q, %v; want %q", tc.pattern, got, err, tc.want)
			}
		})
	}
}

func class(params map[string]string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "nfs"}, Provisioner: "kubeprov.io/nfs", Parameters: params}
}

func TestOnDelete(t *testing.T) {
	for _, c := range []struct {
		params map[string]string
		want   string
	}{
		{nil, OnDeleteArchive},
		{map[string]string{"onDelete": "delete"}, OnDeleteDelete},
		{map[string]string{"onDelete": "Retain"}, OnDeleteRetain},
		{map[string]string{"archiveOnDelete": "true"}, OnDeleteArchive},
		{map[string]string{"archiveOnDelete": "false"}, OnDeleteDelete},
		{map[string]string{"onDelete": "archive", "archiveOnDelete": "true"}, OnDeleteArchive},
		{map[string]string{"onDelete": "retain", "archiveOnDelete": "false"}, OnDeleteRetain},
		{map[string]string{"onDelete": "delete", "archiveOnDelete": "true"}, "error"},
		{map[string]string{"onDelete": "archive", "archiveOnDelete": "false"}, "error"},
		{map[string]string{"onDelete": "shred"}, "error"},
		{map[string]string{"archiveOnDelete": "maybe"}, "error"},
	} {
		got, err := onDelete(controller.ProvisionOptions{StorageClass: class(c.params)})
		if err != nil {
			got = "error"
		}
		if got != c.want {
			t.Errorf("onDelete(%v) = %q (%v), want %q", c.params, got, err, c.want)
		}
	}
}

type fixture struct {
	dir     string
	p       *Provisioner
	volumes cache.Indexer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	p, err := New(Config{Root: dir, Server: "nfs.example", Path: "/share", Volumes: corelisters.NewPersistentVolumeLister(idx)})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{dir: dir, p: p, volumes: idx}
}

func (f *fixture) provision(t *testing.T, params map[string]string, pvc *corev1.PersistentVolumeClaim, pvName string) (*corev1.PersistentVolume, error) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	pv, state, err := f.p.Provision(ctx, controller.ProvisionOptions{StorageClass: class(params), PVName: pvName, PVC: pvc})
	if err != nil && state != controller.ProvisioningFinished {
		t.Errorf("failed Provision returned state %s; nothing was created, want Finished", state)
	}
	return pv, err
}

func TestProvisionDeleteArchive(t *testing.T) {
	f := newFixture(t)
	params := map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.name}", "gid": "4242"}
	pv, err := f.provision(t, params, claim("ns1", "data"), "pvc-1")
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.NFS.Server != "nfs.example" || pv.Spec.NFS.Path != "/share/ns1/data" {
		t.Errorf("NFS source %+v", pv.Spec.NFS)
	}
	for k, want := range map[string]string{AnnPath: "ns1/data", AnnOnDelete: OnDeleteArchive, "pv.beta.kubernetes.io/gid": "4242"} {
		if pv.Annotations[k] != want {
			t.Errorf("annotation %s = %q, want %q", k, pv.Annotations[k], want)
		}
	}
	// Idempotent: a second call for the same PV (the directory is empty) succeeds.
	if _, err := f.provision(t, params, claim("ns1", "data"), "pvc-1"); err != nil {
		t.Errorf("second Provision: %v", err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "ns1/data/f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	if err := f.p.Delete(ctx, pv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "ns1/archived-data/f")); err != nil {
		t.Errorf("not archived in place: %v", err)
	}
	if err := f.p.Delete(ctx, pv); err != nil {
		t.Errorf("second Delete: %v", err)
	}
}

func TestExistingDirectories(t *testing.T) {
	f := newFixture(t)
	if err := os.MkdirAll(filepath.Join(f.dir, "taken"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "taken/f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := f.provision(t, map[string]string{"pathPattern": "taken"}, claim("ns", "a"), "pvc-a")
	if err == nil || !strings.Contains(err.Error(), "reuseExisting") {
		t.Fatalf("Provision into a non-empty directory: %v; want an error naming reuseExisting", err)
	}
	pv, err := f.provision(t, map[string]string{"pathPattern": "taken", "reuseExisting": "true"}, claim("ns", "a"), "pvc-a")
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(f.dir, "taken")); st.Mode().Perm() != 0o755 {
		t.Errorf("reused directory without gid got mode %s; it must be left alone", st.Mode())
	}
	// The same directory, or one inside it, for another PV: refused even with
	// reuseExisting, from memory before the PV reaches the cache...
	for _, pattern := range []string{"taken", "taken/sub"} {
		_, err := f.provision(t, map[string]string{"pathPattern": pattern, "reuseExisting": "true"}, claim("ns", "b"), "pvc-b")
		if err == nil || !strings.Contains(err.Error(), "pvc-a") {
			t.Errorf("pattern %q for a second PV: %v; want an error naming pvc-a", pattern, err)
		}
	}
	// ...and from the PV cache after a restart.
	if err := f.volumes.Add(pv); err != nil {
		t.Fatal(err)
	}
	g := newFixture(t)
	g.p.cfg.Root, g.p.cfg.Volumes = f.dir, corelisters.NewPersistentVolumeLister(f.volumes)
	if _, err := g.provision(t, map[string]string{"pathPattern": "taken", "reuseExisting": "true"}, claim("ns", "b"), "pvc-b"); err == nil {
		t.Error("a restarted provisioner handed a used directory to another PV")
	}
}

func TestRejectsBadParameters(t *testing.T) {
	f := newFixture(t)
	for name, params := range map[string]map[string]string{
		"unknown key": {"pathpattern": "x"},
		"rootSquash":  {"rootSquash": "true"},
		"gid":         {"gid": "-1"},
		"traversal":   {"pathPattern": "../x"},
		"reuse":       {"reuseExisting": "yes please"},
	} {
		if _, err := f.provision(t, params, claim("ns", "x"), "pvc-x"); err == nil {
			t.Errorf("%s: no error for %v", name, params)
		}
	}
	if entries, _ := os.ReadDir(f.dir); len(entries) != 0 {
		t.Errorf("rejected claims left directories: %v", entries)
	}
}

func TestDeletePolicies(t *testing.T) {
	f := newFixture(t)
	_, ctx := ktesting.NewTestContext(t)
	for _, c := range []struct {
		policy string
		stays  string
	}{{OnDeleteDelete, ""}, {OnDeleteRetain, "v-retain"}, {"", "archived-v-"}} {
		rel := "v-" + c.policy
		params := map[string]string{"pathPattern": rel}
		if c.policy != "" {
			params["onDelete"] = c.policy
		}
		pv, err := f.provision(t, params, claim("ns", rel), "pv-"+rel)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(f.dir, rel, "data"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if c.policy == "" {
			// A PV of the former provisioner has neither annotation: archived.
			delete(pv.Annotations, AnnOnDelete)
			delete(pv.Annotations, AnnPath)
		}
		if err := f.p.Delete(ctx, pv); err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(f.dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if got := strings.Join(names, ","); got != c.stays {
			t.Errorf("after Delete with policy %q: %q, want %q", c.policy, got, c.stays)
		}
		for _, n := range names {
			_ = os.RemoveAll(filepath.Join(f.dir, n))
		}
	}
	other := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "elsewhere", Path: "/share/x"}}}}
	if err := f.p.Delete(ctx, other); !controller.IsIgnored(err) {
		t.Errorf("Delete of a PV on another share = %v, want ignored", err)
	}
	bad := other.DeepCopy()
	bad.Spec.NFS.Server = "nfs.example"
	bad.Annotations = map[string]string{AnnPath: "../../etc"}
	if err := f.p.Delete(ctx, bad); err == nil {
		t.Error("Delete with an annotation that disagrees with the PV path succeeded")
	}
}

func TestReady(t *testing.T) {
	f := newFixture(t)
	if err := f.p.Ready(context.Background()); err != nil {
		t.Error(err)
	}
	f.p.cfg.Root = filepath.Join(f.dir, "missing")
	if err := f.p.Ready(context.Background()); err == nil {
		t.Error("Ready with a missing share")
	}
}

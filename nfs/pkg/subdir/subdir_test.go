// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package subdir

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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
	for _, c := range []struct {
		pattern, want string
		// strict: what ExpandStrict gives, "" when it is the same as want,
		// "error" when it refuses the pattern.
		strict string
	}{
		{pattern: "", want: "ns1-data-pvc-1"},
		{pattern: "${.PVC.namespace}/${.PVC.name}", want: "ns1/data"},
		{pattern: "apps/${.PVC.labels.app}-${.PV.name}", want: "apps/db-pvc-1"},
		{pattern: "${.PVC.annotations.team}/${.PVC.name}", want: "blue/green/data"},
		{pattern: "fixed", want: "fixed"},
		// Upstream: a missing label or annotation is "", and empty or "."
		// components collapse.
		{pattern: "${.PVC.namespace}/${.PVC.annotations.nfs.io/storage-path}", want: "ns1", strict: "error"},
		{pattern: "${.PVC.labels.missing}/${.PVC.name}", want: "data", strict: "error"},
		{pattern: "x-${.PVC.labels.missing}-y", want: "x--y", strict: "error"},
		{pattern: "a//b", want: "a/b", strict: "error"},
		{pattern: "a/", want: "a", strict: "error"},
		{pattern: "x/./y", want: "x/y", strict: "error"},
		// An empty result falls back to the default name, as upstream.
		{pattern: "${.PVC.labels.missing}", want: "ns1-data-pvc-1", strict: "error"},
		{pattern: "${.PVC.labels.missing}/${.PVC.annotations.missing}/", want: "ns1-data-pvc-1", strict: "error"},
		{pattern: ".", want: "ns1-data-pvc-1", strict: "error"},
	} {
		got, err := Expand(c.pattern, pvc, "pvc-1")
		if err != nil || got != c.want {
			t.Errorf("Expand(%q) = %q, %v; want %q", c.pattern, got, err, c.want)
		}
		wantStrict := c.strict
		if wantStrict == "" {
			wantStrict = c.want
		}
		got, err = ExpandStrict(c.pattern, pvc, "pvc-1")
		if err != nil {
			if !errors.Is(err, ErrPathPattern) {
				t.Errorf("ExpandStrict(%q): %v does not wrap ErrPathPattern", c.pattern, err)
			}
			got = "error"
		}
		if got != wantStrict {
			t.Errorf("ExpandStrict(%q) = %q (%v), want %q", c.pattern, got, err, wantStrict)
		}
	}
	// Refused in both modes: they could leave the share, or are mistakes of
	// the class's author.
	for _, pattern := range []string{
		"/abs/${.PVC.name}", "../${.PVC.name}", "a/../../b", "${.PVC.annotations.dir}", "x/${.PVC.annotations.dir}",
		"${.PVC.uid}", "${.PVC.name", "a/${.PVC.labels.missing}/..",
	} {
		for mode, expand := range map[string]func(string, *corev1.PersistentVolumeClaim, string) (string, error){"Expand": Expand, "ExpandStrict": ExpandStrict} {
			got, err := expand(pattern, pvc, "pvc-1")
			if !errors.Is(err, ErrPathPattern) {
				t.Errorf("%s(%q) = %q, %v; want ErrPathPattern", mode, pattern, got, err)
			}
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
		// Its empty first component collapses: inside the share (strict mode
		// refuses it, see TestExpandStrictMaliciousClaims).
		{name: "absolute annotation", pattern: ann, pvc: withAnnotation("/etc/shadow"), want: "etc/shadow"},
		{name: "dot-dot behind a missing value", pattern: "${.PVC.labels.missing}/" + ann, pvc: withAnnotation("../x"), wantErr: `has a ".." component`},
		{name: "NUL in an annotation", pattern: ann, pvc: withAnnotation("a\x00/../b"), wantErr: "contains a NUL byte"},
		{name: "deep tree from an annotation", pattern: ann, pvc: withAnnotation(strings.Repeat("a/", 1<<19) + "a"),
			wantErr: `invalid pathPattern "${.PVC.annotations.k}": it expands to a path of 1048577 bytes, more than the 1024 an NFS client can mount`},
		{name: "nested variable", pattern: "${.PVC.annotations.${.PVC.name}}", pvc: claim("ns", "data"), wantErr: "variables cannot be nested"},
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

func TestExpandStrictMaliciousClaims(t *testing.T) {
	pvc := claim("ns", "data")
	pvc.Annotations["k"] = "/etc/shadow"
	if got, err := ExpandStrict("${.PVC.annotations.k}", pvc, "pvc-1"); !errors.Is(err, ErrPathPattern) || !strings.Contains(err.Error(), `"/etc/shadow" is absolute`) {
		t.Errorf("ExpandStrict of an absolute annotation = %q, %v", got, err)
	}
	if got, err := ExpandStrict("${.PVC.labels.missing}", pvc, "pvc-1"); err == nil || !strings.Contains(err.Error(), `the claim has no label "missing"`) {
		t.Errorf("ExpandStrict of a missing label = %q, %v", got, err)
	}
}

func class(params map[string]string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "nfs"}, Provisioner: "kubeprov.io/nfs", Parameters: params}
}

func TestOnDelete(t *testing.T) {
	for _, c := range []struct {
		params map[string]string
		want   string
		// strict: what strict mode gives when it differs.
		strict string
	}{
		{params: nil, want: OnDeleteArchive},
		{params: map[string]string{"onDelete": "delete"}, want: OnDeleteDelete},
		{params: map[string]string{"onDelete": "Retain"}, want: OnDeleteRetain},
		{params: map[string]string{"archiveOnDelete": "true"}, want: OnDeleteArchive},
		{params: map[string]string{"archiveOnDelete": "false"}, want: OnDeleteDelete},
		{params: map[string]string{"onDelete": "archive", "archiveOnDelete": "true"}, want: OnDeleteArchive},
		{params: map[string]string{"onDelete": "retain", "archiveOnDelete": "false"}, want: OnDeleteRetain},
		// Contradictions: onDelete wins, as upstream; strict mode refuses.
		{params: map[string]string{"onDelete": "delete", "archiveOnDelete": "true"}, want: OnDeleteDelete, strict: "error"},
		{params: map[string]string{"onDelete": "archive", "archiveOnDelete": "false"}, want: OnDeleteArchive, strict: "error"},
		{params: map[string]string{"onDelete": "retain", "archiveOnDelete": "true"}, want: OnDeleteRetain, strict: "error"},
		// Typos are never a default, in either mode.
		{params: map[string]string{"onDelete": "shred"}, want: "error"},
		{params: map[string]string{"archiveOnDelete": "maybe"}, want: "error"},
		{params: map[string]string{"onDelete": "delete", "archiveOnDelete": "maybe"}, want: "error"},
	} {
		for _, strict := range []bool{false, true} {
			want := c.want
			if strict && c.strict != "" {
				want = c.strict
			}
			got, err := onDelete(controller.ProvisionOptions{StorageClass: class(c.params)}, strict)
			if err != nil {
				got = "error"
			}
			if got != want {
				t.Errorf("onDelete(%v, strict %v) = %q (%v), want %q", c.params, strict, got, err, want)
			}
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
	restarted, err := New(Config{Root: f.dir, Server: "nfs.example", Path: "/share", Volumes: corelisters.NewPersistentVolumeLister(f.volumes)})
	if err != nil {
		t.Fatal(err)
	}
	g.p = restarted
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
	f.p.shares[0].Root = filepath.Join(f.dir, "missing")
	if err := f.p.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "default NFS share nfs.example:/share") {
		t.Errorf("Ready with a missing share: %v; want an error naming it", err)
	}
}

// TestDirectoryOwnership: nfs-subdir-external-provisioner's NFS_DEFAULT_MODE,
// NFS_DEFAULT_UID, NFS_DEFAULT_GID and the claim annotations
// k8s-sigs.io/nfs-directory-mode, -uid, -gid, with upstream's precedence
// (claim, then instance defaults), and the class's gid between them.
func TestDirectoryOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("chown needs root; CI runs the tests as root")
		}
		t.Skip("chown needs root")
	}
	mode := func(m os.FileMode) *os.FileMode { return &m }
	id := func(n int) *int { return &n }
	for _, c := range []struct {
		name      string
		defaults  Ownership
		params    map[string]string
		ann       map[string]string
		mode      os.FileMode
		uid, gid  int
		wantPVGID string
	}{
		{name: "nothing set: 0777, the provisioner's owner", mode: 0o777},
		{name: "instance defaults", defaults: Ownership{Mode: mode(0o750), UID: id(1000), GID: id(2000)}, mode: 0o750, uid: 1000, gid: 2000},
		{name: "annotations win over the defaults", defaults: Ownership{Mode: mode(0o750), UID: id(1000), GID: id(2000)},
			ann: map[string]string{AnnDirectoryMode: "0700", AnnDirectoryUID: "1001", AnnDirectoryGID: "2001"}, mode: 0o700, uid: 1001, gid: 2001},
		{name: "mode without leading zero", ann: map[string]string{AnnDirectoryMode: "755"}, mode: 0o755},
		{name: "empty annotation is none", defaults: Ownership{Mode: mode(0o750)}, ann: map[string]string{AnnDirectoryMode: ""}, mode: 0o750},
		{name: "class gid wins over the default gid", defaults: Ownership{Mode: mode(0o750), GID: id(2000)},
			params: map[string]string{"gid": "3000"}, mode: os.ModeSetgid | 0o770, gid: 3000, wantPVGID: "3000"},
		{name: "claim gid wins over the class gid, and the PV says so", params: map[string]string{"gid": "3000"},
			ann: map[string]string{AnnDirectoryGID: "3001", AnnDirectoryMode: "2750"}, mode: os.ModeSetgid | 0o750, gid: 3001, wantPVGID: "3001"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p, err := New(Config{Root: dir, Server: "nfs.example", Path: "/share", Ownership: c.defaults})
			if err != nil {
				t.Fatal(err)
			}
			f := &fixture{dir: dir, p: p}
			pvc := claim("ns", "data")
			maps.Copy(pvc.Annotations, c.ann)
			params := map[string]string{"pathPattern": "d"}
			maps.Copy(params, c.params)
			pv, err := f.provision(t, params, pvc, "pvc-1")
			if err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(filepath.Join(dir, "d"))
			if err != nil {
				t.Fatal(err)
			}
			sys := st.Sys().(*syscall.Stat_t)
			if st.Mode()&(os.ModePerm|os.ModeSetgid|os.ModeSticky) != c.mode || int(sys.Uid) != c.uid || int(sys.Gid) != c.gid {
				t.Errorf("directory %s %d:%d, want %s %d:%d", st.Mode(), sys.Uid, sys.Gid, c.mode, c.uid, c.gid)
			}
			if got := pv.Annotations["pv.beta.kubernetes.io/gid"]; got != c.wantPVGID {
				t.Errorf("PV gid annotation %q, want %q", got, c.wantPVGID)
			}
		})
	}
}

// TestDirectoryOwnershipRejectsBadAnnotations: the annotations are the
// claim author's input: a bad one fails the claim with a message naming the
// annotation and its value (the ProvisioningFailed event), and creates
// nothing. Upstream used the default for a bad uid or gid.
func TestDirectoryOwnershipRejectsBadAnnotations(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct{ key, value string }{
		{AnnDirectoryMode, "999"},
		{AnnDirectoryMode, "4755"},
		{AnnDirectoryMode, "rwxr-x---"},
		{AnnDirectoryMode, "-1"},
		{AnnDirectoryUID, "alice"},
		{AnnDirectoryUID, "-5"},
		{AnnDirectoryGID, "4294967296"},
		{AnnDirectoryGID, "1.5"},
	} {
		pvc := claim("ns", "bad")
		pvc.Annotations[c.key] = c.value
		_, err := f.provision(t, map[string]string{"pathPattern": "bad"}, pvc, "pvc-bad")
		if err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), `"`+c.value+`"`) {
			t.Errorf("%s=%q: %v; want an error naming the annotation and the value", c.key, c.value, err)
		}
	}
	if entries, _ := os.ReadDir(f.dir); len(entries) != 0 {
		t.Errorf("refused claims left directories: %v", entries)
	}
}

// TestClaimMetadataKeysIncludeOwnership: the journal keeps the ownership
// annotations, so that a Provision repeated after a restart sets the same
// mode and owner.
func TestClaimMetadataKeysIncludeOwnership(t *testing.T) {
	f := newFixture(t)
	_, anns := f.p.ClaimMetadataKeys(class(map[string]string{"pathPattern": "${.PVC.annotations.team}"}))
	for _, k := range []string{"team", AnnDirectoryMode, AnnDirectoryUID, AnnDirectoryGID} {
		if !slices.Contains(anns, k) {
			t.Errorf("ClaimMetadataKeys annotations %v lack %s", anns, k)
		}
	}
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/lib/controller"
)

const node = "node-a"

func newProvisioner(t *testing.T, mutate ...func(*Config)) (*Provisioner, string) {
	t.Helper()
	cfg := Config{Dir: t.TempDir(), Node: node, DirMode: DefaultDirMode}
	for _, m := range mutate {
		m(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, cfg.Dir
}

func claim(modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", UID: "uid-1"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: modes,
			VolumeMode:  ptr.To(corev1.PersistentVolumeFilesystem),
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("3Gi")},
			},
		},
	}
}

func options(pvc *corev1.PersistentVolumeClaim) controller.ProvisionOptions {
	return controller.ProvisionOptions{
		StorageClass: &storagev1.StorageClass{
			ObjectMeta:    metav1.ObjectMeta{Name: "hostpath"},
			ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRetain),
		},
		PVName: "pvc-uid-1",
		PVC:    pvc,
	}
}

func provision(t *testing.T, p *Provisioner, o controller.ProvisionOptions) *corev1.PersistentVolume {
	t.Helper()
	pv, err := provisionEnded(t, p, o)
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	return pv
}

// provisionEnded is Provision called again while a helper pod runs, as the
// controller's retries call it.
func provisionEnded(t *testing.T, p *Provisioner, o controller.ProvisionOptions) (*corev1.PersistentVolume, error) {
	t.Helper()
	return untilEnded(t.Context(), t, func() (*corev1.PersistentVolume, error) {
		pv, _, err := p.Provision(t.Context(), o)
		return pv, err
	})
}

// withUmask runs the test under umask 077, which Mkdir alone would obey.
func withUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
}

func TestNew(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"relative dir":   {Config{Dir: "volumes", Node: node}, `volume directory "volumes" must be an absolute path`},
		"no node":        {Config{Dir: "/v"}, "node name is required"},
		"setuid in mode": {Config{Dir: "/v", Node: node, DirMode: fs.ModeSetuid | 0o755}, "bits other than permissions"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestShouldProvision(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nodeLocal bool
		selected  *string
		want      bool
	}{
		{"single: immediate claim", false, nil, true},
		{"single: own node", false, ptr.To(node), true},
		{"single: other node", false, ptr.To("node-b"), false},
		// Every node's instance would provision it: none may.
		{"node-local: immediate claim", true, nil, false},
		{"node-local: own node", true, ptr.To(node), true},
		{"node-local: other node", true, ptr.To("node-b"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newProvisioner(t, func(c *Config) { c.NodeLocal = tc.nodeLocal })
			pvc := claim(corev1.ReadWriteOnce)
			if tc.selected != nil {
				pvc.Annotations = map[string]string{controller.AnnSelectedNode: *tc.selected}
			}
			if got := p.ShouldProvision(t.Context(), pvc); got != tc.want {
				t.Errorf("ShouldProvision = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestProvision(t *testing.T) {
	withUmask(t)
	p, dir := newProvisioner(t)
	pv := provision(t, p, options(claim(corev1.ReadWriteOnce, corev1.ReadWriteOncePod)))

	path := filepath.Join(dir, "pvc-uid-1")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o777 {
		t.Errorf("volume directory mode = %v, want a directory with 0777 despite umask 077", fi.Mode())
	}
	hp := pv.Spec.HostPath
	if hp == nil || hp.Path != path || hp.Type == nil || *hp.Type != corev1.HostPathDirectory {
		t.Errorf("hostPath = %+v, want path %s and type Directory", hp, path)
	}
	if got := pv.Annotations[AnnNode]; got != node {
		t.Errorf("annotation %s = %q, want %q", AnnNode, got, node)
	}
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if req := terms[0].MatchExpressions[0]; req.Key != controller.LabelHostname || req.Values[0] != node {
		t.Errorf("node affinity = %+v, want %s in [%s]", req, controller.LabelHostname, node)
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.String() != "3Gi" {
		t.Errorf("capacity = %s, want the claim's request 3Gi", got.String())
	}
	if pv.Name != "pvc-uid-1" || pv.Spec.StorageClassName != "hostpath" ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || len(pv.Spec.AccessModes) != 2 {
		t.Errorf("PV not built from the claim and class: %+v", pv)
	}
}

func TestProvisionDirMode(t *testing.T) {
	withUmask(t)
	p, dir := newProvisioner(t, func(c *Config) { c.DirMode = 0o750 })
	provision(t, p, options(claim(corev1.ReadWriteOnce)))
	fi, err := os.Stat(filepath.Join(dir, "pvc-uid-1"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o750 {
		t.Errorf("mode = %v, want 0750", fi.Mode().Perm())
	}
}

// After a restart the controller calls Provision again for the same PV name;
// the directory, and what a pod wrote into it, must stay.
func TestProvisionIdempotent(t *testing.T) {
	p, dir := newProvisioner(t)
	o := options(claim(corev1.ReadWriteOnce))
	first := provision(t, p, o)
	data := filepath.Join(dir, "pvc-uid-1", "data")
	if err := os.WriteFile(data, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	second := provision(t, p, o)
	if first.Spec.HostPath.Path != second.Spec.HostPath.Path {
		t.Errorf("second Provision returned path %s, first %s", second.Spec.HostPath.Path, first.Spec.HostPath.Path)
	}
	if b, err := os.ReadFile(data); err != nil || string(b) != "keep" {
		t.Errorf("data written before the second Provision: %q, %v", b, err)
	}
}

func TestProvisionRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.PersistentVolumeClaim)
		class  func(*storagev1.StorageClass)
		want   string
	}{
		{name: "class parameter", class: func(c *storagev1.StorageClass) { c.Parameters = map[string]string{"path": "/data"} },
			want: "StorageClass hostpath: unknown parameter(s) path"},
		{name: "mount options", class: func(c *storagev1.StorageClass) { c.MountOptions = []string{"noatime"} },
			want: "StorageClass hostpath: mountOptions are not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, dir := newProvisioner(t)
			o := options(claim(corev1.ReadWriteOnce))
			if tc.mutate != nil {
				tc.mutate(o.PVC)
			}
			if tc.class != nil {
				tc.class(o.StorageClass)
			}
			_, state, err := p.Provision(t.Context(), o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if state != controller.ProvisioningFinished {
				t.Errorf("state = %s, want Finished: nothing was created", state)
			}
			assertEmpty(t, dir)
		})
	}
}

// TestSingleNodeAccessModes: an instance that puts every volume on its own
// node (deploy/single-node) honors every access mode, since every pod of
// the volume is pinned to that node; the original hostPath walkthrough's
// claim asks for ReadWriteMany.
func TestSingleNodeAccessModes(t *testing.T) {
	for _, mode := range []corev1.PersistentVolumeAccessMode{
		corev1.ReadWriteOnce, corev1.ReadWriteOncePod, corev1.ReadWriteMany, corev1.ReadOnlyMany,
	} {
		t.Run(string(mode), func(t *testing.T) {
			p, dir := newProvisioner(t)
			pv := provision(t, p, options(claim(mode)))
			if len(pv.Spec.AccessModes) != 1 || pv.Spec.AccessModes[0] != mode {
				t.Errorf("PV access modes %v, want [%s]", pv.Spec.AccessModes, mode)
			}
			if pv.Spec.NodeAffinity == nil {
				t.Error("PV has no node affinity: pods on other nodes could share it")
			}
			if _, err := os.Stat(filepath.Join(dir, pv.Name)); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestMultiNodeRefusesSharedAccessModes: an instance that serves several
// nodes refuses what pods on different nodes could not share, naming the
// mode of the provisioner that cannot honor it, and creates nothing.
func TestMultiNodeRefusesSharedAccessModes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		flag   string
	}{
		{"node-local", func(c *Config) { c.NodeLocal = true }, "--node-local"},
		{"helper pods", func(c *Config) { c.Dirs = newHelperDirs(t, fake.NewClientset(), time.Minute) }, "--helper-pods"},
	} {
		for _, modes := range [][]corev1.PersistentVolumeAccessMode{
			{corev1.ReadWriteOnce, corev1.ReadWriteMany},
			{corev1.ReadOnlyMany},
		} {
			t.Run(tc.name+"/"+string(modes[len(modes)-1]), func(t *testing.T) {
				p, dir := newProvisioner(t, tc.mutate)
				o := options(claim(modes...))
				o.SelectedNodeName = node
				_, state, err := p.Provision(t.Context(), o)
				want := "access mode(s) " + string(modes[len(modes)-1]) + " not supported: use ReadWriteOnce or ReadWriteOncePod"
				if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.flag) {
					t.Fatalf("got %v, want an error containing %q and naming %s", err, want, tc.flag)
				}
				if state != controller.ProvisioningFinished {
					t.Errorf("state = %s, want Finished: nothing was created", state)
				}
				assertEmpty(t, dir)
			})
		}
	}
}

func TestProvisionRefusesWhatIsNotADirectory(t *testing.T) {
	outside := t.TempDir()
	if err := os.Chmod(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, plant := range map[string]func(path string) error{
		"symlink": func(path string) error { return os.Symlink(outside, path) },
		"file":    func(path string) error { return os.WriteFile(path, nil, 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			p, dir := newProvisioner(t)
			if err := plant(filepath.Join(dir, "pvc-uid-1")); err != nil {
				t.Fatal(err)
			}
			_, _, err := p.Provision(t.Context(), options(claim(corev1.ReadWriteOnce)))
			if err == nil || !strings.Contains(err.Error(), "remove it from the node") {
				t.Fatalf("got %v, want a refusal", err)
			}
			if fi, err := os.Stat(outside); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("the symlink's target was changed: %v, %v", fi.Mode(), err)
			}
		})
	}
}

func TestProvisionOtherNodeIsIgnored(t *testing.T) {
	p, dir := newProvisioner(t)
	o := options(claim(corev1.ReadWriteOnce))
	o.SelectedNodeName = "node-b"
	_, _, err := p.Provision(t.Context(), o)
	if !controller.IsIgnored(err) {
		t.Fatalf("got %v, want an IgnoredError", err)
	}
	assertEmpty(t, dir)
}

func TestProvisionBadName(t *testing.T) {
	for _, name := range []string{"", ".", "..", "a/b", "../x"} {
		p, dir := newProvisioner(t)
		o := options(claim(corev1.ReadWriteOnce))
		o.PVName = name
		if _, _, err := p.Provision(t.Context(), o); err == nil || !strings.Contains(err.Error(), "not a plain file name") {
			t.Errorf("PV name %q: got %v, want a refusal", name, err)
		}
		assertEmpty(t, dir)
	}
}

func TestProvisionMissingDir(t *testing.T) {
	p, _ := newProvisioner(t, func(c *Config) { c.Dir = filepath.Join(c.Dir, "missing") })
	_, state, err := p.Provision(t.Context(), options(claim(corev1.ReadWriteOnce)))
	if err == nil || !strings.Contains(err.Error(), "check --pv-dir or the configuration") || state != controller.ProvisioningFinished {
		t.Fatalf("got %v (state %s), want an error naming --pv-dir", err, state)
	}
}

func TestDelete(t *testing.T) {
	p, dir := newProvisioner(t)
	pv := provision(t, p, options(claim(corev1.ReadWriteOnce)))
	if err := os.MkdirAll(filepath.Join(dir, pv.Name, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(t.Context(), pv); err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, dir)
	// Already gone is success.
	if err := p.Delete(t.Context(), pv); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
}

func TestDeleteOtherNodeIsIgnored(t *testing.T) {
	p, dir := newProvisioner(t)
	pv := provision(t, p, options(claim(corev1.ReadWriteOnce)))
	pv.Annotations[AnnNode] = "node-b"
	if err := p.Delete(t.Context(), pv); !controller.IsIgnored(err) {
		t.Fatalf("got %v, want an IgnoredError", err)
	}
	delete(pv.Annotations, AnnNode)
	if err := p.Delete(t.Context(), pv); !controller.IsIgnored(err) {
		t.Fatalf("without annotation: got %v, want an IgnoredError", err)
	}
	if _, err := os.Stat(filepath.Join(dir, pv.Name)); err != nil {
		t.Errorf("directory of an ignored volume: %v", err)
	}
}

func TestDeleteRefusesOtherPaths(t *testing.T) {
	outside := t.TempDir()
	for name, mutate := range map[string]func(pv *corev1.PersistentVolume, dir string){
		"outside":       func(pv *corev1.PersistentVolume, _ string) { pv.Spec.HostPath.Path = outside },
		"pv-dir itself": func(pv *corev1.PersistentVolume, dir string) { pv.Spec.HostPath.Path = dir },
		"dot-dot": func(pv *corev1.PersistentVolume, dir string) {
			pv.Spec.HostPath.Path = filepath.Join(dir, pv.Name) + "/.."
		},
		"another volume":  func(pv *corev1.PersistentVolume, dir string) { pv.Spec.HostPath.Path = filepath.Join(dir, "pvc-other") },
		"no hostPath":     func(pv *corev1.PersistentVolume, _ string) { pv.Spec.HostPath = nil },
		"name with slash": func(pv *corev1.PersistentVolume, _ string) { pv.Name = "../" + filepath.Base(outside) },
	} {
		t.Run(name, func(t *testing.T) {
			p, dir := newProvisioner(t)
			pv := provision(t, p, options(claim(corev1.ReadWriteOnce)))
			if err := os.Mkdir(filepath.Join(dir, "pvc-other"), 0o755); err != nil {
				t.Fatal(err)
			}
			mutate(pv, dir)
			if err := p.Delete(t.Context(), pv); err == nil || controller.IsIgnored(err) {
				t.Fatalf("got %v, want a refusal", err)
			}
			for _, path := range []string{outside, filepath.Join(dir, "pvc-uid-1"), filepath.Join(dir, "pvc-other")} {
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s was touched: %v", path, err)
				}
			}
		})
	}
}

func TestDeleteNeverFollowsSymlinks(t *testing.T) {
	outside := t.TempDir()
	precious := filepath.Join(outside, "precious")
	if err := os.WriteFile(precious, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, dir := newProvisioner(t)
	pv := provision(t, p, options(claim(corev1.ReadWriteOnce)))
	path := filepath.Join(dir, pv.Name)

	// A link inside the volume, as a pod could make.
	if err := os.Symlink(outside, filepath.Join(path, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(t.Context(), pv); err != nil {
		t.Fatal(err)
	}
	// The volume directory itself replaced by a link.
	if err := os.Symlink(outside, path); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(t.Context(), pv); err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, dir)
	if _, err := os.Stat(precious); err != nil {
		t.Errorf("the symlinks' target lost its content: %v", err)
	}
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("%s holds %d entries, want none", dir, len(entries))
	}
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/lib/controller"
)

func TestParseConfig(t *testing.T) {
	ok := map[string]func(t *testing.T, m *PathMap){
		`{"nodePathMap":[{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":["/opt/lp"]},{"node":"n1","paths":["/a/","/b"]},{"node":"n3","paths":[]}]}`: func(t *testing.T, m *PathMap) {
			if p, ok := m.PathsFor("n1"); !ok || strings.Join(p, ",") != "/a,/b" {
				t.Errorf("n1: %v %v", p, ok)
			}
			if p, ok := m.PathsFor("n2"); !ok || strings.Join(p, ",") != "/opt/lp" {
				t.Errorf("unlisted node: %v %v", p, ok)
			}
			if _, ok := m.PathsFor("n3"); ok {
				t.Error("node listed with no paths takes volumes")
			}
		},
		`{"nodePathMap":[{"node":"n1","paths":["/a"]}]}`: func(t *testing.T, m *PathMap) {
			if _, ok := m.PathsFor("n2"); ok {
				t.Error("unlisted node without a default takes volumes")
			}
		},
		`{"nodePathMap":[],"sharedFileSystemPath":"/mnt/shared"}`: func(t *testing.T, m *PathMap) {
			if p, ok := m.PathsFor("any"); !ok || m.Shared != "/mnt/shared" || p[0] != "/mnt/shared" {
				t.Errorf("shared: %v %v", p, m.Shared)
			}
		},
	}
	for in, check := range ok {
		m, err := ParseConfig([]byte(in))
		if err != nil {
			t.Errorf("ParseConfig(%s): %v", in, err)
			continue
		}
		check(t, m)
	}
	for in, want := range map[string]string{
		`{"nodePathMap":[{"node":"n1","paths":["opt"]}]}`:                             `node n1: path "opt" must be absolute`,
		`{"nodePathMap":[{"node":"n1","paths":["/"]}]}`:                               `"/" is the root directory`,
		`{"nodePathMap":[{"node":"n1","paths":["/a","/a/"]}]}`:                        "node n1: path /a is listed twice",
		`{"nodePathMap":[{"node":"n1","paths":["/a"]},{"node":"n1","paths":["/b"]}]}`: "node n1 is listed twice",
		`{"nodePathMap":[{"node":"n1","paths":["/a"]}],"sharedFileSystemPath":"/s"}`:  "nodePathMap and sharedFileSystemPath exclude each other",
		`{"nodePathMap":[],"sharedFileSystemPath":"s"}`:                               `sharedFileSystemPath "s" must be absolute`,
		`{}`:                                 "neither nodePathMap nor sharedFileSystemPath is set",
		`{"nodePathMap":[{"paths":["/a"]}]}`: "a nodePathMap entry has no node",
		`{"storageClassConfigs":{}}`:         "storageClassConfigs is empty",
		`{"nodePathMap":[{"node":"n1","path":["/a"]}]}`: `unknown key "path"`,
		`{"nodePathMap":[# comment]}`:                   "not valid JSON",
	} {
		_, err := ParseConfig([]byte(in))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseConfig(%s) = %v, want an ErrConfig containing %q", in, err, want)
		}
	}
}

// configProvisioner is a provisioner with a config.json of several paths
// and a fake free-space table.
func configProvisioner(t *testing.T, config string, free map[string]uint64, mutate ...func(*Config)) *Provisioner {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{ConfigFile: file, Node: node, DirMode: DefaultDirMode, Dirs: LocalDirs{FreeBytes: func(p string) (uint64, error) {
		if _, err := os.Stat(p); err != nil {
			return 0, err
		}
		return free[p], nil
	}}}
	for _, m := range mutate {
		m(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mkdirs(t *testing.T, n int) []string {
	var dirs []string
	for range n {
		dirs = append(dirs, t.TempDir())
	}
	return dirs
}

func nodeMap(node string, paths ...string) string {
	return `{"nodePathMap":[{"node":"` + node + `","paths":["` + strings.Join(paths, `","`) + `"]}]}`
}

func TestProvisionChoosesMostFreeSpace(t *testing.T) {
	d := mkdirs(t, 3)
	p := configProvisioner(t, nodeMap(node, d...), map[string]uint64{d[0]: 10 << 30, d[1]: 50 << 30, d[2]: 20 << 30})
	pv := provision(t, p, options(claim(corev1.ReadWriteOnce)))
	if want := filepath.Join(d[1], "pvc-uid-1"); pv.Spec.HostPath.Path != want {
		t.Errorf("path %s, want %s (the path with most free space)", pv.Spec.HostPath.Path, want)
	}
}

func TestProvisionNodePathParameter(t *testing.T) {
	d := mkdirs(t, 2)
	p := configProvisioner(t, nodeMap(node, d...), map[string]uint64{d[0]: 10 << 30, d[1]: 50 << 30})
	o := options(claim(corev1.ReadWriteOnce))
	o.StorageClass.Parameters = map[string]string{KeyNodePath: d[0]}
	if pv := provision(t, p, o); pv.Spec.HostPath.Path != filepath.Join(d[0], "pvc-uid-1") {
		t.Errorf("path %s, want under nodePath %s", pv.Spec.HostPath.Path, d[0])
	}
	o.StorageClass.Parameters = map[string]string{KeyNodePath: "/elsewhere"}
	if _, _, err := p.Provision(t.Context(), o); err == nil || !strings.Contains(err.Error(), "parameter nodePath /elsewhere is not a path of node node-a") {
		t.Errorf("got %v, want a refusal naming nodePath", err)
	}
}

func TestProvisionCapacity(t *testing.T) {
	d := mkdirs(t, 2)
	p := configProvisioner(t, nodeMap(node, d...), map[string]uint64{d[0]: 1 << 30, d[1]: 2 << 30})
	_, state, err := p.Provision(t.Context(), options(claim(corev1.ReadWriteOnce))) // 3Gi
	want := "not enough free space on node node-a: the claim requests 3221225472 bytes, " + d[1] + " has 2147483648 bytes free"
	if !errors.Is(err, ErrInsufficientSpace) || !strings.Contains(err.Error(), want) || state != controller.ProvisioningFinished {
		t.Fatalf("got %v (state %s), want an error containing %q", err, state, want)
	}
	assertEmpty(t, d[0])
	assertEmpty(t, d[1])
}

func TestProvisionNodeWithoutPaths(t *testing.T) {
	p := configProvisioner(t, `{"nodePathMap":[{"node":"`+node+`","paths":[]}]}`, nil)
	o := options(claim(corev1.ReadWriteOnce))
	o.SelectedNodeName = node
	_, state, err := p.Provision(t.Context(), o)
	if err == nil || state != controller.ProvisioningReschedule || !strings.Contains(err.Error(), "node node-a takes no volumes") {
		t.Fatalf("got %v (state %s), want Reschedule", err, state)
	}
}

func TestVolumeType(t *testing.T) {
	for _, tc := range []struct {
		name          string
		classAnn      string
		param, claim  string
		want, wantErr string
	}{
		{name: "default", want: VolumeTypeHostPath},
		{name: "class annotation", classAnn: "local", want: VolumeTypeLocal},
		{name: "class parameter over annotation", classAnn: "local", param: "hostPath", want: VolumeTypeHostPath},
		{name: "claim annotation over class", param: "hostPath", claim: "Local", want: VolumeTypeLocal},
		{name: "unknown", claim: "block", wantErr: `volumeType "block" (claim annotation volumeType, class parameter volumeType or class annotation defaultVolumeType) must be hostPath or local`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, dir := newProvisioner(t)
			o := options(claim(corev1.ReadWriteOnce))
			if tc.classAnn != "" {
				o.StorageClass.Annotations = map[string]string{AnnDefaultVolumeType: tc.classAnn}
			}
			if tc.param != "" {
				o.StorageClass.Parameters = map[string]string{KeyVolumeType: tc.param}
			}
			if tc.claim != "" {
				o.PVC.Annotations = map[string]string{KeyVolumeType: tc.claim}
			}
			pv, _, err := p.Provision(t.Context(), o)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want %q", err, tc.wantErr)
				}
				assertEmpty(t, dir)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "pvc-uid-1")
			switch tc.want {
			case VolumeTypeLocal:
				if pv.Spec.Local == nil || pv.Spec.Local.Path != path || pv.Spec.HostPath != nil {
					t.Errorf("source %+v, want local %s", pv.Spec.PersistentVolumeSource, path)
				}
			default:
				if pv.Spec.HostPath == nil || pv.Spec.Local != nil {
					t.Errorf("source %+v, want hostPath", pv.Spec.PersistentVolumeSource)
				}
			}
			if pv.Spec.NodeAffinity == nil {
				t.Error("no node affinity")
			}
		})
	}
}

func TestNodeLabelKey(t *testing.T) {
	p, _ := newProvisioner(t, func(c *Config) { c.NodeLabelKey = "topology.example.com/host" })
	if !p.ReadsSelectedNode() {
		t.Fatal("a custom label needs the selected Node")
	}
	o := options(claim(corev1.ReadWriteOnce))
	o.SelectedNodeName = node
	o.SelectedNode = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"topology.example.com/host": "host-7"}}}
	pv := provision(t, p, o)
	req := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]
	if req.Key != "topology.example.com/host" || req.Values[0] != "host-7" {
		t.Errorf("affinity %+v, want topology.example.com/host In [host-7]", req)
	}
	o.PVName = "pvc-uid-2"
	o.SelectedNode = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if _, _, err := p.Provision(t.Context(), o); err == nil || !strings.Contains(err.Error(), "node node-a has no label topology.example.com/host (--node-label-key)") {
		t.Errorf("got %v, want a refusal naming the label", err)
	}
	if d, _ := newProvisioner(t); d.ReadsSelectedNode() {
		t.Error("the default key needs no Node cache")
	}
}

func TestPathPattern(t *testing.T) {
	p, dir := newProvisioner(t)
	o := options(claim(corev1.ReadWriteOnce))
	o.StorageClass.Parameters = map[string]string{KeyPathPattern: "${.PVC.namespace}/${.PVC.name}"}
	pv := provision(t, p, o)
	if want := filepath.Join(dir, "ns", "data"); pv.Spec.HostPath.Path != want || pv.Annotations[AnnDir] != "ns/data" {
		t.Fatalf("path %s, annotation %q; want %s and ns/data", pv.Spec.HostPath.Path, pv.Annotations[AnnDir], want)
	}
	// Same pattern, another claim of the same name would share it: refused.
	if err := os.WriteFile(filepath.Join(dir, "ns", "data", "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	o2 := o
	o2.PVName = "pvc-uid-2"
	if _, _, err := p.Provision(t.Context(), o2); err == nil || !strings.Contains(err.Error(), "is already used by PersistentVolume pvc-uid-1") {
		t.Errorf("got %v, want a refusal to share a directory", err)
	}
	if err := p.Delete(t.Context(), pv); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, filepath.Join(dir, "ns")); len(got) != 0 {
		t.Errorf("left %v", got)
	}
	// Patterns that would leave the root.
	for _, pattern := range []string{"../x", "/etc", "${.PVC.annotations.dir}", "{{ .PVC.Namespace }}"} {
		o := options(claim(corev1.ReadWriteOnce))
		o.PVC.Annotations = map[string]string{"dir": "../../etc"}
		o.StorageClass.Parameters = map[string]string{KeyPathPattern: pattern}
		if _, _, err := p.Provision(t.Context(), o); err == nil || !strings.Contains(err.Error(), "parameter pathPattern: invalid pathPattern") {
			t.Errorf("pattern %q: got %v, want a refusal", pattern, err)
		}
	}
	if got := entries(t, dir); len(got) != 1 || got[0] != "ns" {
		t.Errorf("root holds %v, want only ns", got)
	}
}

// TestPathPatternSymlinkInRoot: a symlink planted under the root cannot lead
// the volume outside it.
func TestPathPatternSymlinkInRoot(t *testing.T) {
	p, dir := newProvisioner(t)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "ns")); err != nil {
		t.Fatal(err)
	}
	o := options(claim(corev1.ReadWriteOnce))
	o.StorageClass.Parameters = map[string]string{KeyPathPattern: "${.PVC.namespace}/${.PVC.name}"}
	if _, _, err := p.Provision(t.Context(), o); err == nil {
		t.Fatal("provisioned through a symlink that leaves the root")
	}
	assertEmpty(t, outside)
}

func TestPathPatternDeleteRefusesEditedAnnotation(t *testing.T) {
	p, dir := newProvisioner(t)
	o := options(claim(corev1.ReadWriteOnce))
	o.StorageClass.Parameters = map[string]string{KeyPathPattern: "${.PVC.namespace}/${.PVC.name}"}
	pv := provision(t, p, o)
	pv.Annotations[AnnDir] = "../.."
	if err := p.Delete(t.Context(), pv); err == nil || controller.IsIgnored(err) {
		t.Fatalf("got %v, want a refusal", err)
	}
	pv.Annotations[AnnDir] = "ns"
	if err := p.Delete(t.Context(), pv); err == nil || !strings.Contains(err.Error(), "refusing to delete") {
		t.Fatalf("got %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ns", "data")); err != nil {
		t.Error(err)
	}
}

func TestSharedFileSystem(t *testing.T) {
	shared := t.TempDir()
	p := configProvisioner(t, `{"nodePathMap":[],"sharedFileSystemPath":"`+shared+`"}`, map[string]uint64{shared: 100 << 30})
	pvc := claim(corev1.ReadWriteMany, corev1.ReadOnlyMany)
	pvc.Annotations = map[string]string{controller.AnnSelectedNode: "node-b"}
	if !p.ShouldProvision(t.Context(), pvc) {
		t.Fatal("a shared path serves claims of every node")
	}
	o := options(pvc)
	o.SelectedNodeName = "node-b"
	pv := provision(t, p, o)
	if pv.Spec.NodeAffinity != nil || pv.Spec.HostPath.Path != filepath.Join(shared, "pvc-uid-1") || pv.Annotations[AnnShared] != "true" {
		t.Errorf("PV %+v: want no node affinity, a path under %s, annotation %s", pv.Spec, shared, AnnShared)
	}
	// Any instance that is not node-local deletes it.
	if err := p.Delete(t.Context(), pv); err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, shared)

	o = options(claim(corev1.ReadWriteMany))
	o.PVC.Annotations = map[string]string{KeyVolumeType: "local"}
	if _, _, err := p.Provision(t.Context(), o); err == nil || !strings.Contains(err.Error(), "volumeType local needs a node") {
		t.Errorf("got %v, want local refused on a shared path", err)
	}
}

// Without a shared path, an instance serving several nodes refuses RWX.
func TestRWXRefusedWithoutSharedPath(t *testing.T) {
	p, dir := newProvisioner(t, func(c *Config) { c.NodeLocal = true })
	o := options(claim(corev1.ReadWriteMany))
	o.SelectedNodeName = node
	if _, _, err := p.Provision(t.Context(), o); err == nil || !strings.Contains(err.Error(), "ReadWriteMany") {
		t.Fatalf("got %v", err)
	}
	assertEmpty(t, dir)
}

func TestConfigReload(t *testing.T) {
	d := mkdirs(t, 2)
	p := configProvisioner(t, nodeMap(node, d[0]), nil, func(c *Config) { c.ReloadInterval = 10 * time.Millisecond })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go p.WatchConfig(ctx)
	// An invalid file keeps the last valid configuration.
	if err := os.WriteFile(p.cfg.ConfigFile, []byte(`{"nodePathMap":[{"node":"x","paths":["rel"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// Then a valid one replaces it (a ConfigMap update swaps the file).
	tmp := p.cfg.ConfigFile + ".new"
	if err := os.WriteFile(tmp, []byte(nodeMap(node, d[1])), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p.cfg.ConfigFile); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if paths, _ := p.Paths().PathsFor(node); len(paths) == 1 && paths[0] == d[1] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("configuration not reloaded: %v", p.Paths())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestClaimMetadataKeys(t *testing.T) {
	p, _ := newProvisioner(t)
	l, a := p.ClaimMetadataKeys(&storagev1.StorageClass{Parameters: map[string]string{KeyPathPattern: "${.PVC.labels.app}/${.PVC.annotations.team}"}})
	if strings.Join(l, ",") != "app" || strings.Join(a, ",") != "team,volumeType" {
		t.Errorf("keys %v %v", l, a)
	}
	// local-path's spelling: the keys a template reads are kept too.
	l, a = p.ClaimMetadataKeys(&storagev1.StorageClass{Parameters: map[string]string{
		KeyPathPattern: `{{ .PVC.Namespace }}/{{ .PVC.Name }}/{{ .PVC.Labels.app }}/{{ index .PVC.Annotations "example.com/team" }}`}})
	if strings.Join(l, ",") != "app" || strings.Join(a, ",") != "example.com/team,volumeType" {
		t.Errorf("template keys %v %v", l, a)
	}
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	list, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name())
	}
	return names
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package ports

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/framework"
)

const (
	// claims is the size of the burst. The ports run with client-go's
	// default budget of 5 writes per second, so a burst of this size is
	// in flight for several seconds: long enough to kill the process in it.
	claims = 20
	// deletedWhileDown claims without a PV are deleted while the provisioner
	// is dead: after the restart it must finish their operations from its
	// journal and leave no directory behind.
	deletedWhileDown = 2
	caseTimeout      = 4 * time.Minute
	annSelectedNode  = "volume.kubernetes.io/selected-node"
)

// portCase is one ported provisioner and how to drive it.
type portCase struct {
	// module is its directory under the repository root, binary its cmd/.
	module, binary string
	// setup creates what the case needs besides the class (nil: nothing).
	setup func(t *testing.T, e *env)
	// class sets the class's parameters and binding mode.
	class func(sc *storagev1.StorageClass)
	// claim sets what a user puts on claim i of the burst.
	claim func(i int, pvc *corev1.PersistentVolumeClaim)
	// start runs one process of the provisioner; n counts the processes.
	start func(t *testing.T, e *env, n int) *framework.Process
	// assets lists the provisioner's directories under e.root, as AssetOf
	// names the directory of a PV.
	assets func(e *env) backend.AssetLister
	// afterBurst checks more once the burst is Bound (nil: nothing).
	afterBurst func(t *testing.T, e *env)
	// checkVolume checks what the port writes on each PV.
	checkVolume func(t *testing.T, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume)
}

// env is one case's world.
type env struct {
	ctx         context.Context
	client      kubernetes.Interface
	ns, class   string
	provisioner string
	root        string // the directories the provisioner keeps volumes in
	logs        string // the provisioner's logs
	bin         string
}

func TestPorts(t *testing.T) {
	for name, pc := range map[string]portCase{
		"subdir-style":    subdirCase(),
		"localpath-style": localPathCase(),
	} {
		t.Run(name, func(t *testing.T) { runBurst(t, pc) })
	}
}

// runBurst creates a burst of claims, SIGKILLs the provisioner in the middle
// of it, deletes a few claims that have no PV yet while it is down, starts it
// again, and checks what a user and an administrator see: every live claim
// Bound, claims = PVs = directories; then, once the claims are deleted, no
// PV and no directory.
func runBurst(t *testing.T, pc portCase) {
	ctx := framework.TestContext(t, caseTimeout)
	cfg := cp.RestConfig()
	cfg.QPS, cfg.Burst = 200, 400
	e := &env{ctx: ctx, client: kubernetes.NewForConfigOrDie(cfg), root: t.TempDir(), logs: t.TempDir()}
	e.ns = cp.CreateTestNamespace(t, "ports")
	e.class, e.provisioner = e.ns, "ports.example.com/"+e.ns
	built := time.Now()
	bin, err := framework.BuildStandaloneBinary(framework.TestContext(t, 10*time.Minute), pc.module, pc.binary)
	if err != nil {
		t.Fatal(err)
	}
	e.bin = bin
	t.Logf("Built %s with GOWORK=off in %s", pc.module, time.Since(built).Round(time.Millisecond))

	if pc.setup != nil {
		pc.setup(t, e)
	}
	sc := framework.NewStorageClass(e.class, e.provisioner, nil)
	pc.class(sc)
	cp.CreateTestStorageClass(t, sc)
	p := pc.start(t, e, 1)

	uids := map[string]types.UID{}
	for i := range claims {
		pvc := framework.NewPVC(e.ns, fmt.Sprintf("claim-%03d", i), e.class, "1Mi")
		pc.claim(i, pvc)
		created, err := e.client.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, pvc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[created.Name] = created.UID
	}

	// Kill once a quarter of the burst has its PV, and not all of it.
	var pvs []corev1.PersistentVolume
	err = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		pvs = e.volumes(t)
		return len(pvs) >= claims/4, nil
	})
	if err != nil {
		t.Fatalf("waiting for %d of %d PVs: %v\nlog tail:\n%s", claims/4, claims, err, p.LogTail(30))
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	pvs = e.volumes(t)
	if len(pvs) >= claims {
		t.Fatalf("all %d PVs existed before the kill: the burst went too fast to catch in flight", claims)
	}
	t.Logf("Killed %s (pid %d) with %d of %d PVs saved", p.Name, p.Pid(), len(pvs), claims)

	// The victims: claims without a PV, those whose directory exists first
	// (the provisioner made it and died before saving the PV): a restarted
	// provisioner that cannot find it again leaks it.
	withPV := map[types.UID]bool{}
	for _, pv := range pvs {
		withPV[pv.Spec.ClaimRef.UID] = true
	}
	dirs, err := pc.assets(e).Assets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hasDir := func(claim string) bool {
		return slices.ContainsFunc(dirs, func(d string) bool { return strings.Contains(d, claim) })
	}
	var victims []string
	for _, name := range slices.Sorted(maps.Keys(uids)) {
		if !withPV[uids[name]] && hasDir(name) {
			victims = append(victims, name)
		}
	}
	withDir := len(victims)
	for _, name := range slices.Sorted(maps.Keys(uids)) {
		if !withPV[uids[name]] && !hasDir(name) {
			victims = append(victims, name)
		}
	}
	deleted := map[string]bool{}
	for _, name := range victims[:min(deletedWhileDown, len(victims))] {
		if err := e.client.CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted[name] = true
	}
	t.Logf("Deleted claims without a PV while the provisioner was down: %v (%d claims had a directory but no PV)",
		slices.Sorted(maps.Keys(deleted)), withDir)

	restarted := time.Now()
	p = pc.start(t, e, 2)
	for name := range uids {
		if deleted[name] {
			continue
		}
		pvc, pv, err := framework.WaitForPVCBound(ctx, e.client, e.ns, name)
		if err != nil {
			t.Fatal(err)
		}
		pc.checkVolume(t, pvc, pv)
	}
	t.Logf("Every live claim Bound %s after the restart", time.Since(restarted).Round(time.Millisecond))
	// The deleted claims' operations end with their assets gone: then PVs,
	// claims and directories agree one to one.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return len(e.volumes(t)) == claims-len(deleted), nil
	})
	if err != nil {
		t.Errorf("want %d PVs (one per live claim), have %d: %v", claims-len(deleted), len(e.volumes(t)), err)
	}
	for _, pv := range e.volumes(t) {
		if name := pv.Spec.ClaimRef.Name; deleted[name] || uids[name] != pv.Spec.ClaimRef.UID {
			t.Errorf("PV %s is for claim %s (uid %s), which is not a live claim of the burst", pv.Name, name, pv.Spec.ClaimRef.UID)
		}
	}
	assets := pc.assets(e)
	if err := waitForAssets(ctx, assets, e); err != nil {
		t.Errorf("after the burst: %v", err)
	}
	if p.HasLog("Resuming in-flight operation") {
		t.Logf("The restarted process resumed operations from its journal")
	}
	if pc.afterBurst != nil {
		pc.afterBurst(t, e)
	}

	for name := range uids {
		if err := e.client.CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	for _, pv := range e.volumes(t) {
		if err := framework.WaitForPVDeleted(ctx, e.client, pv.Name); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitForAssets(ctx, assets, e); err != nil {
		t.Errorf("after deleting every claim: %v", err)
	}
	if left, _ := assets.Assets(ctx); len(left) > 0 {
		t.Errorf("directories left after every claim and PV is gone: %v", left)
	}
}

// volumes lists the PVs of the case's class.
func (e *env) volumes(t *testing.T) []corev1.PersistentVolume {
	t.Helper()
	list, err := e.client.CoreV1().PersistentVolumes().List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pvs []corev1.PersistentVolume
	for _, pv := range list.Items {
		if pv.Spec.StorageClassName == e.class {
			pvs = append(pvs, pv)
		}
	}
	return pvs
}

// waitForAssets is backend.WaitForAssets bounded by half a minute: an asset
// and its PV are made and removed one after the other.
func waitForAssets(ctx context.Context, a backend.AssetLister, e *env) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return backend.WaitForAssets(ctx, a, e.client, e.class)
}

// dirAssets are the directories at depth under root, named by their path
// relative to root; assetOf names a PV's directory the same way.
type dirAssets struct {
	name    string
	root    string
	depth   int
	assetOf func(pv *corev1.PersistentVolume) string
}

func (d dirAssets) Name() string { return d.name }

func (d dirAssets) AssetOf(pv *corev1.PersistentVolume) string { return d.assetOf(pv) }

func (d dirAssets) Assets(context.Context) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(d.root, func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(d.root, path)
		depth := len(strings.Split(rel, string(filepath.Separator)))
		switch {
		case rel == ".":
			return nil
		case entry.IsDir() && depth == d.depth:
			dirs = append(dirs, rel)
			return fs.SkipDir
		}
		return nil
	})
	return dirs, err
}

// subdirCase: the nfs-subdir-like port, with its own main (flags and
// environment variables) and a pathPattern that reads a claim annotation.
func subdirCase() portCase {
	const exportPath = "/exports/k8s"
	return portCase{
		module: "test/ports/subdir-style",
		binary: "subdir-provisioner",
		class: func(sc *storagev1.StorageClass) {
			sc.Parameters = map[string]string{
				"pathPattern":     "${.PVC.namespace}/${.PVC.annotations.team}-${.PVC.name}",
				"archiveOnDelete": "false",
			}
		},
		claim: func(i int, pvc *corev1.PersistentVolumeClaim) {
			pvc.Annotations = map[string]string{"team": []string{"blue", "green"}[i%2]}
		},
		start: func(t *testing.T, e *env, n int) *framework.Process {
			p, err := framework.StartProcess(e.ctx, framework.ProcessOptions{
				Binary: e.bin,
				Args:   []string{"-kubeconfig=" + cp.KubeconfigPath, "-mount-root=" + e.root, "-v=2"},
				Env: []string{"PROVISIONER_NAME=" + e.provisioner, "NFS_SERVER=127.0.0.1", "NFS_PATH=" + exportPath,
					"POD_NAMESPACE=" + e.ns},
				LogPath:    filepath.Join(e.logs, fmt.Sprintf("subdir-provisioner-%d.log", n)),
				NoEndpoint: true, // like the original, it serves no HTTP
				NoWait:     true,
			})
			if err != nil {
				t.Fatal(err)
			}
			framework.StopAtEnd(t, p)
			if err := p.WaitForLog(e.ctx, "Workers started"); err != nil {
				t.Fatal(err)
			}
			return p
		},
		assets: func(e *env) backend.AssetLister {
			return dirAssets{name: "subdir", root: e.root, depth: 2, assetOf: func(pv *corev1.PersistentVolume) string {
				if pv.Spec.NFS == nil {
					return ""
				}
				rel, _ := filepath.Rel(exportPath, pv.Spec.NFS.Path)
				return rel
			}}
		},
		checkVolume: func(t *testing.T, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) {
			want := filepath.Join(exportPath, pvc.Namespace, pvc.Annotations["team"]+"-"+pvc.Name)
			if pv.Spec.NFS == nil || pv.Spec.NFS.Server != "127.0.0.1" || pv.Spec.NFS.Path != want {
				t.Errorf("PV %s of claim %s: NFS source %+v, want 127.0.0.1:%s", pv.Name, pvc.Name, pv.Spec.NFS, want)
			}
		},
	}
}

// localPathCase: the local-path-like port on lib/cli, WaitForFirstConsumer,
// the claims spread over two nodes (the test plays the scheduler).
func localPathCase() portCase {
	nodes := []string{"node-a", "node-b"}
	return portCase{
		module: "test/ports/localpath-style",
		binary: "localpath-provisioner",
		setup: func(t *testing.T, e *env) {
			// node-c is a node with no --node-path: volumes cannot go there.
			for _, name := range append(nodes, "node-c") {
				createNode(t, e, name)
			}
		},
		afterBurst: func(t *testing.T, e *env) {
			// The port asks for another node (ProvisioningReschedule) when
			// the node has no path; the library does when the node is gone.
			for claim, node := range map[string]string{"moved-nopath": "node-c", "moved-gone": "node-gone"} {
				pvc := framework.NewPVC(e.ns, claim, e.class, "1Mi")
				pvc.Annotations = map[string]string{annSelectedNode: node}
				if _, err := e.client.CoreV1().PersistentVolumeClaims(e.ns).Create(e.ctx, pvc, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				if _, err := framework.WaitForEvent(e.ctx, e.client, pvc, "ProvisioningFailed"); err != nil {
					t.Fatal(err)
				}
				err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
					got, err := e.client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, claim, metav1.GetOptions{})
					return err == nil && got.Annotations[annSelectedNode] == "", nil
				})
				if err != nil {
					t.Errorf("claim %s on node %s: the selected node was not given back to the scheduler: %v", claim, node, err)
				}
				if err := e.client.CoreV1().PersistentVolumeClaims(e.ns).Delete(e.ctx, claim, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		},
		class: func(sc *storagev1.StorageClass) {
			sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
		},
		claim: func(i int, pvc *corev1.PersistentVolumeClaim) {
			pvc.Annotations = map[string]string{annSelectedNode: nodes[i%len(nodes)]}
		},
		start: func(t *testing.T, e *env, n int) *framework.Process {
			var paths []string
			for _, node := range nodes {
				paths = append(paths, node+"="+filepath.Join(e.root, node))
			}
			p, err := framework.StartProcess(e.ctx, framework.ProcessOptions{
				Binary: e.bin,
				Args: []string{"--kubeconfig=" + cp.KubeconfigPath, "--provisioner=" + e.provisioner,
					"--node-path=" + strings.Join(paths, ","), "--leader-election-namespace=" + e.ns, "-v=2"},
				LogPath: filepath.Join(e.logs, fmt.Sprintf("localpath-provisioner-%d.log", n)),
			})
			if err != nil {
				t.Fatal(err)
			}
			framework.StopAtEnd(t, p)
			return p
		},
		assets: func(e *env) backend.AssetLister {
			return dirAssets{name: "local-path", root: e.root, depth: 2, assetOf: func(pv *corev1.PersistentVolume) string {
				if pv.Spec.HostPath == nil {
					return ""
				}
				rel, _ := filepath.Rel(e.root, pv.Spec.HostPath.Path)
				return rel
			}}
		},
		checkVolume: func(t *testing.T, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) {
			node := pvc.Annotations[annSelectedNode]
			if pv.Spec.HostPath == nil || filepath.Base(filepath.Dir(pv.Spec.HostPath.Path)) != node {
				t.Errorf("PV %s of claim %s on node %s: hostPath %+v is not in that node's directory", pv.Name, pvc.Name, node, pv.Spec.HostPath)
			}
			// The affinity names the node's hostname label, not its name:
			// the port read the Node (SelectedNodeReader).
			if got, want := hostnames(pv), []string{hostnameOf(node)}; !slices.Equal(got, want) {
				t.Errorf("PV %s of claim %s: node affinity to hostnames %v, want %v", pv.Name, pvc.Name, got, want)
			}
		},
	}
}

// hostnames lists the kubernetes.io/hostname values a PV's node affinity requires.
func hostnames(pv *corev1.PersistentVolume) []string {
	var values []string
	if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil {
		for _, term := range a.Required.NodeSelectorTerms {
			for _, expr := range term.MatchExpressions {
				if expr.Key == corev1.LabelHostname && expr.Operator == corev1.NodeSelectorOpIn {
					values = append(values, expr.Values...)
				}
			}
		}
	}
	return values
}

// hostnameOf is the kubernetes.io/hostname label of the test's nodes; it
// differs from their names, as it may in a cloud.
func hostnameOf(node string) string { return "host-" + node }

// createNode creates a Node object (no kubelet runs it: the provisioner only
// reads it) and deletes it when the test ends.
func createNode(t *testing.T, e *env, name string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: hostnameOf(name)}}}
	if _, err := e.client.CoreV1().Nodes().Create(e.ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		if err := e.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: %v", err)
		}
	})
}

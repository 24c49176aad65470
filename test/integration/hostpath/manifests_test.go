// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// hostpathProvisioner is the name the manifests give the provisioner.
const hostpathProvisioner = "kubeprov.io/hostpath"

// deployDir holds the manifests users apply, relative to this package.
const deployDir = "../../../hostpath/deploy"

// TestManifests installs each mode from deploy/ as a user would and runs
// the binary with its workload's own arguments and environment, as its
// ServiceAccount: the least-privilege RBAC must be enough for provisioning,
// expansion, events, the journal and leader election. Then it applies deploy/example
// and follows the claim from Bound to deleted.
func TestManifests(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dir      string
		journal  string
		lease    bool // leader election
		schedule bool // WaitForFirstConsumer: play the scheduler
	}{
		{name: "single-node", dir: "single-node", journal: controller.JournalName(hostpathProvisioner, ""), lease: true},
		{name: "node-local", dir: ".", journal: controller.JournalName(hostpathProvisioner, manifestNode), schedule: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := framework.TestContext(t, 2*time.Minute)
			objs := render(t, tc.dir)
			apply(t, objs)
			pod := podTemplate(t, objs)
			ns := pod.Namespace
			container := pod.Spec.Containers[0]
			for _, want := range []string{"NODE_NAME", "POD_NAMESPACE"} {
				if !slices.ContainsFunc(container.Env, func(e corev1.EnvVar) bool { return e.Name == want && e.ValueFrom != nil }) {
					t.Errorf("the workload does not set %s from the downward API", want)
				}
			}
			_, kubeconfig, err := cp.AddUser("system:serviceaccount:"+ns+":"+pod.Spec.ServiceAccountName,
				[]string{"system:serviceaccounts", "system:serviceaccounts:" + ns})
			if err != nil {
				t.Fatal(err)
			}
			pvDir := newPVDir(t)
			args := slices.Concat(container.Args, []string{"--kubeconfig=" + kubeconfig, "--pv-dir=" + pvDir})
			p := startProvisioner(t, []string{"NODE_NAME=" + manifestNode, "POD_NAMESPACE=" + ns}, args...)

			example := render(t, "example")
			apply(t, example)
			pvc := find[corev1.PersistentVolumeClaim](t, example)
			user := find[corev1.Pod](t, example)
			if tc.schedule {
				patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, annSelectedNode, manifestNode)
				if _, err := cp.Client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Patch(ctx, pvc.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			pv := bound(ctx, t, pvc.Namespace, pvc.Name)
			checkVolume(t, pv, pvDir, manifestNode)
			if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(pvc.Spec.Resources.Requests[corev1.ResourceStorage]) != 0 {
				t.Errorf("capacity %s, want the request", got.String())
			}
			if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Spec.StorageClassName != "hostpath" {
				t.Errorf("PV %s: reclaim policy %s, class %q; want Delete and hostpath", pv.Name, pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.StorageClassName)
			}
			if _, err := framework.WaitForEvent(ctx, cp.Client, pvc, "ProvisioningSucceeded"); err != nil {
				t.Error(err)
			}
			// Expansion, through the ServiceAccount's RBAC, once the class allows it.
			allowExpansion(ctx, t, *pvc.Spec.StorageClassName)
			expandClaim(ctx, t, pvc.Namespace, pvc.Name, "2Gi")
			// What the example pod does, as the user it runs as.
			writeAs(t, *user.Spec.Containers[0].SecurityContext.RunAsUser, filepath.Join(pv.Spec.HostPath.Path, "SUCCESS"))

			if _, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, tc.journal, metav1.GetOptions{}); err != nil {
				t.Errorf("in-flight journal: %v", err)
			}
			if tc.lease {
				if _, err := cp.Client.CoordinationV1().Leases(ns).Get(ctx, controller.LeaseName(hostpathProvisioner), metav1.GetOptions{}); err != nil {
					t.Errorf("leader election Lease: %v", err)
				}
			}

			if err := cp.Client.CoreV1().Pods(user.Namespace).Delete(ctx, user.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			deletePVC(t, pvc.Namespace, pvc.Name)
			if err := framework.WaitForPVDeleted(ctx, cp.Client, pv.Name); err != nil {
				t.Fatal(err)
			}
			if names := entries(t, pvDir); len(names) != 0 {
				t.Errorf("--pv-dir still holds %v after the PV was deleted", names)
			}
			if log := p.Log(); strings.Contains(log, "forbidden") {
				t.Errorf("the ServiceAccount's RBAC is not enough: %s", firstLineWith(log, "forbidden"))
			}

			// A graceful stop writes the journal's last removals: part of what
			// the RBAC must allow.
			account := "system:serviceaccount:" + ns + ":" + pod.Spec.ServiceAccountName
			restart := func() *framework.Process {
				return startProvisioner(t, []string{"NODE_NAME=" + manifestNode, "POD_NAMESPACE=" + ns}, args...)
			}
			createClaim := func(name string) *corev1.PersistentVolumeClaim {
				c := framework.NewPVC(pvc.Namespace, name, *pvc.Spec.StorageClassName, "1Mi")
				if tc.schedule {
					c.Annotations = map[string]string{annSelectedNode: manifestNode}
				}
				c, err := cp.Client.CoreV1().PersistentVolumeClaims(c.Namespace).Create(ctx, c, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			claims := cp.StopWithJournalFlush(ctx, t, p.Stop, func() func() error { return restart().Stop }, createClaim, ns, account)
			restart()
			for _, c := range claims {
				pv := bound(ctx, t, c.Namespace, c.Name)
				deletePVC(t, c.Namespace, c.Name)
				if err := framework.WaitForPVDeleted(ctx, cp.Client, pv.Name); err != nil {
					t.Fatal(err)
				}
			}
			cp.ExpectNoForbidden(t, account)
		})
	}
}

// manifestNode is the node the manifests' pod runs on in TestManifests.
const manifestNode = "test-node"

// podTemplate is the pod of the one workload of objs, with the workload's
// namespace.
func podTemplate(t *testing.T, objs []*unstructured.Unstructured) corev1.PodTemplateSpec {
	t.Helper()
	workloads, err := manifests.Workloads(objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(workloads) != 1 {
		t.Fatalf("want one workload in the manifests, found %v", workloads)
	}
	pod := workloads[0].Pod
	pod.Namespace = workloads[0].Namespace
	return pod
}

// render builds a kustomization under deploy/ as `kubectl apply -k` would.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.Render(filepath.Join(deployDir, dir))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// apply creates objs, validated by the real API server, and deletes them
// in reverse order when the test ends.
func apply(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	c, err := manifests.NewClient(cp)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		r, err := c.Resource(obj)
		if err == nil {
			_, err = r.Create(t.Context(), obj, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("creating %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		for _, obj := range slices.Backward(objs) {
			if err := c.Delete(ctx, obj); err != nil {
				t.Errorf("cleanup of %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		}
	})
}

// find returns the one object of kind T among objs.
func find[T any, PT interface {
	*T
	runtime.Object
}](t *testing.T, objs []*unstructured.Unstructured) PT {
	t.Helper()
	gvks, _, err := scheme.Scheme.ObjectKinds(PT(new(T)))
	if err != nil {
		t.Fatal(err)
	}
	var found []PT
	for _, obj := range objs {
		if obj.GroupVersionKind() != gvks[0] {
			continue
		}
		typed := PT(new(T))
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
			t.Fatal(err)
		}
		found = append(found, typed)
	}
	if len(found) != 1 {
		t.Fatalf("want one %s in the manifests, found %d", gvks[0].Kind, len(found))
	}
	return found[0]
}

// writeAs writes a file as the given user, as a pod running as that user
// would, to show that the volume's mode lets it.
func writeAs(t *testing.T, uid int64, path string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", `date > "$1"`, "sh", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("writing %s as uid %d: %v: %s", path, uid, err, out)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int64(st.Uid) != uid {
		t.Errorf("%s is not owned by uid %d", path, uid)
	}
}

func firstLineWith(s, part string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, part) {
			return line
		}
	}
	return ""
}

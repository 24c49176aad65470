// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubeprov/external-storage/flex/pkg/flex"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// binary builds flex-provisioner (a second time is a cache hit).
func binary(t *testing.T) string {
	t.Helper()
	return framework.BuildTestBinary(t, "flex", "flex-provisioner")
}

// deployServiceAccount is the ServiceAccount flex/deploy binds its RBAC to.
const deployServiceAccount = "flex-provisioner"

// The kustomizations users install each launcher with: flex/deploy
// (container launcher) and flex/examples/exec-image, which drops the
// container launcher's rules.
var (
	deployContainer = mustAbs("../../../flex/deploy")
	deployExec      = mustAbs("../../../flex/examples/exec-image")
)

// applyDeployRBAC creates the RBAC objects of the kustomization in dir for
// a provisioner in namespace ns and returns a kubeconfig of its service
// account's user name, which those objects bind.
func applyDeployRBAC(t *testing.T, dir, ns string) string {
	t.Helper()
	const sa = deployServiceAccount
	subjects := func(s []rbacv1.Subject) {
		for i := range s {
			s[i].Namespace = ns
		}
	}
	manifests.CreateTestRBAC(t, cp, dir, func(obj runtime.Object) {
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			o.Name = ns + "-" + o.Name
		case *rbacv1.ClusterRoleBinding:
			o.Name = ns + "-" + o.Name
			o.RoleRef.Name = ns + "-" + o.RoleRef.Name
			subjects(o.Subjects)
		case *rbacv1.Role:
			o.Namespace = ns
		case *rbacv1.RoleBinding:
			o.Namespace = ns
			subjects(o.Subjects)
		}
	})
	_, kubeconfig, err := cp.AddUser("system:serviceaccount:"+ns+":"+sa, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns})
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// runBinary runs flex-provisioner as the deployment does (POD_NAMESPACE,
// leader election) until the test ends.
func runBinary(t *testing.T, kubeconfig, ns string, env []string, args ...string) *framework.Process {
	t.Helper()
	p, err := framework.StartProcess(framework.TestContext(t, time.Minute), framework.ProcessOptions{
		Binary: binary(t),
		Args: append([]string{
			"--kubeconfig", kubeconfig, "--leader-election", "--retry-interval-start=100ms", "--retry-interval-max=2s", "-v=2",
		}, args...),
		Env:     append([]string{"POD_NAMESPACE=" + ns}, env...),
		LogPath: filepath.Join(t.TempDir(), "flex-provisioner.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	framework.StopAtEnd(t, p)
	return p
}

// The binary with the exec launcher and the permissions of
// flex/examples/exec-image (flex/deploy without the pods and record key
// rules): flags and environment overrides, the default identity, provision
// and delete.
func TestBinaryExecLauncherWithDeployRBAC(t *testing.T) {
	requireTools(t, "sh", "jq", "go")
	ctx := framework.TestContext(t, 3*time.Minute)
	ns := cp.CreateTestNamespace(t, "flex-sys")
	claims := cp.CreateTestNamespace(t, "flex")
	root := t.TempDir()
	name := "test.kubeprov.io/" + uniqueName(t, "flex")
	kubeconfig := applyDeployRBAC(t, deployExec, ns)

	out, err := exec.Command(binary(t), "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "flex-provisioner ") {
		t.Errorf("--version: %q, %v", out, err)
	}
	// DRIVER_TIMEOUT sets --driver-timeout, as every flag can be set.
	start := func() *framework.Process {
		return runBinary(t, kubeconfig, ns, []string{"DRIVER_TIMEOUT=45s"}, "--launcher=exec", "--driver", hostdirDriver, "--provisioner", name)
	}
	p := start()
	class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), name, map[string]string{"root": root}))
	pvc := createPVC(t, ctx, claims, "data", class.Name, "1Gi")
	_, pv, err := framework.WaitForPVCBound(ctx, client(t), claims, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	expectAnnotations(t, pv, name, name+"/"+ns, "exec")
	deleteAndWaitGone(t, ctx, pvc, pv.Name)
	if dirs := volumeDirs(t, root); len(dirs) != 0 {
		t.Errorf("directories left after delete: %v", dirs)
	}
	gracefulStopAsDeploy(t, ctx, p, start, claims, class.Name, ns)
}

// gracefulStopAsDeploy ends a test of the binary running with the deploy
// RBAC: a graceful stop right after a provisioning, so that the journal's
// final flush runs too (the claims it takes are then deleted by the binary
// started again), and then nothing in the whole test may have been refused
// to its ServiceAccount (the API server's audit log).
func gracefulStopAsDeploy(t *testing.T, ctx context.Context, p *framework.Process, start func() *framework.Process, claimsNS, class, ns string) {
	t.Helper()
	account := "system:serviceaccount:" + ns + ":" + deployServiceAccount
	claims := cp.StopWithJournalFlush(ctx, t, p.Stop, func() func() error { return start().Stop }, func(name string) *corev1.PersistentVolumeClaim {
		return createPVC(t, ctx, claimsNS, name, class, "1Gi")
	}, ns, account)
	p = start()
	for _, c := range claims {
		_, pv, err := framework.WaitForPVCBound(ctx, client(t), c.Namespace, c.Name)
		if err != nil {
			t.Fatal(err)
		}
		deleteAndWaitGone(t, ctx, c, pv.Name)
	}
	if err := p.Stop(); err != nil {
		t.Error(err)
	}
	cp.ExpectNoForbidden(t, account)
}

// The binary with the container launcher and the permissions of flex/deploy
// (pods and ConfigMaps in its namespace only).
func TestBinaryContainerLauncherWithDeployRBAC(t *testing.T) {
	requireTools(t, "sh", "jq", "go")
	ctx := framework.TestContext(t, 3*time.Minute)
	e := &podEnv{ns: cp.CreateTestNamespace(t, "flex"), work: cp.CreateTestNamespace(t, "flex-sys"), root: t.TempDir()}
	e.name = "test.kubeprov.io/" + uniqueName(t, "flex")
	kubeconfig := applyDeployRBAC(t, deployContainer, e.work)
	sim := startSim(t, ctx, map[string]map[string]string{e.work + "-node": nil})
	e.sim = sim

	start := func() *framework.Process {
		return runBinary(t, kubeconfig, e.work, nil, "--launcher=container", "--provisioner", e.name, "--pod-start-timeout=30s")
	}
	p := start()
	class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), e.name, map[string]string{"root": e.root}))
	e.configMap(t, ctx, e.work, "hostdir", map[string]string{flex.LabelStorageClass: class.Name, flex.LabelType: flex.TypeProvisionerConfig},
		map[string]string{flex.ConfigImage: imageHostdir, flex.ConfigHostPath: e.root})
	pvc := createPVC(t, ctx, e.ns, "data", class.Name, "1Gi")
	_, pv, err := framework.WaitForPVCBound(ctx, client(t), e.ns, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	expectAnnotations(t, pv, e.name, e.name+"/"+e.work, "container")
	deleteAndWaitGone(t, ctx, pvc, pv.Name)
	if dirs := volumeDirs(t, e.root); len(dirs) != 0 {
		t.Errorf("directories left after delete: %v", dirs)
	}
	if n := len(e.runs(flex.ActionProvision)) + len(e.runs(flex.ActionDelete)); n != 2 {
		t.Errorf("%d pods ran, want a provision and a delete pod", n)
	}
	expectNoPods(t, ctx, e.work)
	gracefulStopAsDeploy(t, ctx, p, start, e.ns, class.Name, e.work)
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cinderprov "github.com/kubeprov/external-storage/cinder/pkg/cinder"
	cinderbackend "github.com/kubeprov/external-storage/test/backend/cinder"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// TestBinaryConfigError: a bad cloud config stops the binary at once with
// the key named, before it talks to anything.
func TestBinaryConfigError(t *testing.T) {
	bin := framework.BuildTestBinary(t, "cinder", "cinder-provisioner")
	conf := filepath.Join(t.TempDir(), "cloud.conf")
	if err := os.WriteFile(conf, []byte("[Global]\ncinder-endpoint=http://127.0.0.1:1/v3\ntenant-name=admin\nregion-name=RegionOne\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := framework.TestContext(t, time.Minute)
	out, err := exec.CommandContext(ctx, bin, "--cloud-config", conf, "--kubeconfig", cp.KubeconfigPath).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "unknown key(s) region-name in [Global]") {
		t.Errorf("err = %v, output:\n%s", err, out)
	}
}

const deployNamespace = "cinder-provisioner"

// applyDeployRBAC creates the namespace and the RBAC objects of
// cinder/deploy and returns a kubeconfig for its ServiceAccount, so that
// the binary runs with exactly the rights the deployment grants.
func applyDeployRBAC(ctx context.Context, t *testing.T) string {
	t.Helper()
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deployNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		if err := framework.DeleteNamespace(ctx, cp.Client, deployNamespace); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	manifests.CreateTestRBAC(t, cp, filepath.Join("..", "..", "..", "cinder", "deploy"), nil)
	_, kubeconfig, err := cp.AddUser("system:serviceaccount:"+deployNamespace+":cinder-provisioner", []string{"system:serviceaccounts"})
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// startBinary runs cinder-provisioner with args and env, returns once its
// /readyz answers (which needs Cinder), and kills it when the test ends,
// printing its output if the test failed.
func startBinary(ctx context.Context, t *testing.T, args, env []string) *framework.Process {
	t.Helper()
	p, err := framework.StartProcess(ctx, framework.ProcessOptions{
		Binary:  framework.BuildTestBinary(t, "cinder", "cinder-provisioner"),
		Args:    args,
		Env:     env,
		LogPath: filepath.Join(t.TempDir(), "cinder-provisioner.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Kill()
		if t.Failed() {
			t.Logf("cinder-provisioner output:\n%s", p.Log())
		}
	})
	return p
}

// TestBinary runs cinder-provisioner as users do: with the deployment's
// RBAC rules and nothing more, configured by OS_* variables (the noauth
// environment form of the documentation) and by a flag given as an
// environment variable, with the default identity. It serves /readyz only
// when Cinder answers, provisions an iSCSI claim (CHAP Secret included),
// deletes it, and stops cleanly on SIGTERM.
func TestBinary(t *testing.T) {
	const name = "kubeprov.io/cinder-binary-it"
	ctx := framework.TestContext(t, 3*time.Minute)
	kubeconfig := applyDeployRBAC(ctx, t)
	p := startBinary(ctx, t, []string{"--kubeconfig", kubeconfig, "--provisioner", name,
		"--retry-interval-start", "200ms", "--retry-interval-max", "2s", "-v", "2"},
		[]string{"OS_CINDER_ENDPOINT=" + cinderAPI.Endpoint, "OS_USERNAME=admin", "OS_TENANT_NAME=" + cinderbackend.Project,
			"INITIATOR_NAME=" + initiatorName, "POD_NAMESPACE=" + deployNamespace})

	ns := cp.CreateTestNamespace(t, "cinder-binary")
	sc := createClass(t, ns, name, map[string]string{"type": "iscsi"})
	pvc := createPVC(ctx, t, ns, sc.Name)
	_, pv, err := framework.WaitForPVCBound(ctx, cp.Client, ns, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	kubeSystem, err := cp.Client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pv.Annotations[cinderprov.AnnIdentity], name+"/"+string(kubeSystem.UID); got != want {
		t.Errorf("identity = %q, want %q (provisioner name and cluster id)", got, want)
	}
	if src := pv.Spec.ISCSI; src == nil || src.InitiatorName == nil || *src.InitiatorName != initiatorName || src.SecretRef == nil {
		t.Errorf("iSCSI source = %+v", src)
	}
	id := pv.Annotations[cinderprov.AnnVolumeID]
	deleteClaim(ctx, t, pvc, pv.Name)
	assertVolumeGone(ctx, t, id)

	// Stop sends SIGTERM and fails unless the process exits cleanly in time.
	if err := p.Stop(); err != nil {
		t.Errorf("stopping with SIGTERM: %v", err)
	}
	// Nothing in the whole run was refused to the ServiceAccount.
	cp.ExpectNoForbidden(t, "system:serviceaccount:"+deployNamespace+":cinder-provisioner")
}

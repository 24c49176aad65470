// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cinderprov "github.com/kubeprov/external-storage/cinder/pkg/cinder"
	"github.com/kubeprov/external-storage/cinder/pkg/mapper"
	cinderbackend "github.com/kubeprov/external-storage/test/backend/cinder"
	"github.com/kubeprov/external-storage/test/framework"
)

const (
	cinderImage = "ghcr.io/kubeprov/cinder-provisioner"
	// The names of cinder/deploy.
	cinderNS          = "cinder-provisioner"
	cinderDeployment  = "cinder-provisioner"
	cinderCloudConfig = "cinder-cloud-config"
	// The claim of cinder/examples: 1500Mi, a 2 GiB volume, which the test
	// driver backs with a 2 MiB LUN.
	cinderExampleClaim = "data"
	cinderLUNSize      = "Total size:2097152"
)

// TestCinderProvisionAndISCSILogin follows cinder/README.md with a real
// Cinder (API, scheduler, volume service, RabbitMQ; its test volume driver
// exports iSCSI volumes on a real userspace target, tgtd) on the host,
// listening on the cluster's bridge: make push of cinder-provisioner,
// cinder/deploy with only its image overridden and the cloud config Secret
// pointing at that Cinder (noauth), then the class and claim of
// cinder/examples. The claim binds; a node logs in to the PV's iSCSI target
// with the PV's initiator name and CHAP Secret, as the kubelet would (the
// kernel has no iSCSI initiator here, so the example's pod cannot mount it:
// libiscsi's iscsi-readcapacity16 logs in from the node's network
// namespace instead). Deleting the claim deletes the PV, the CHAP Secret
// and the Cinder volume (404), and the target refuses the login.
func TestCinderProvisionAndISCSILogin(t *testing.T) {
	ctx := framework.TestContext(t, 10*time.Minute)
	stack, ref := startCinder(t, ctx)

	// What a user writes in cinder/deploy/cloud-config.yaml for a Cinder
	// without Keystone.
	objs, err := Render("cinder/deploy", ImageOverride{cinderImage, ref})
	if err != nil {
		t.Fatal(err)
	}
	if err := setSecretData(objs, cinderNS, cinderCloudConfig, "cloud.conf", cinderNoauthConfig(stack)); err != nil {
		t.Fatal(err)
	}
	initiator, err := deploymentArg(objs, cinderNS, cinderDeployment, "--initiator-name=")
	if err != nil {
		t.Fatal(err)
	}
	installObjects(t, "cinder/deploy", objs)
	if err := c.WaitDeploymentAvailable(ctx, cinderNS, cinderDeployment); err != nil {
		t.Fatal(err)
	}
	// The provisioner runs under the strictest Pod Security level.
	nsObj, err := c.Client.CoreV1().Namespaces().Get(ctx, cinderNS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if level := nsObj.Labels["pod-security.kubernetes.io/enforce"]; level != "restricted" {
		t.Errorf("namespace %s enforces Pod Security level %q, want restricted", cinderNS, level)
	}

	// cinder/examples without its pod (see above), in a namespace of the
	// test's: the claim, its CHAP Secret.
	ns := c.CreateTestNamespace(t, "cinder")
	example, err := Render("cinder/examples")
	if err != nil {
		t.Fatal(err)
	}
	example = slices.DeleteFunc(example, func(obj *unstructured.Unstructured) bool { return obj.GetKind() == "Pod" })
	for _, obj := range example {
		if obj.GetKind() == "PersistentVolumeClaim" {
			obj.SetNamespace(ns)
		}
	}
	installObjects(t, "cinder/examples", example)
	checkCinderClaim(t, ctx, stack, ns, cinderExampleClaim, initiator)
}

// startCinder starts a real Cinder (see TestCinderProvisionAndISCSILogin)
// on the host, listening on the cluster's bridge, while make push builds and
// pushes cinder-provisioner; it returns the stack, stopped when the test
// ends, and the image's reference.
func startCinder(t *testing.T, ctx context.Context) (*cinderbackend.Stack, string) {
	t.Helper()
	if missing := cinderbackend.Missing(); len(missing) > 0 {
		framework.Unavailable(t, "not installed: %s (hack/deps/cinder.sh installs them)", strings.Join(missing, ", "))
	}
	for _, tool := range []string{"tgtd", "tgtadm", "iscsi-readcapacity16"} {
		if _, err := exec.LookPath(tool); err != nil {
			framework.Unavailable(t, "%s is not installed (hack/deps/cinder.sh installs tgt and libiscsi-bin)", tool)
		}
	}
	// Cinder starts (~50 s) while the image is built and pushed.
	type started struct {
		stack *cinderbackend.Stack
		err   error
	}
	stackDone := make(chan started, 1)
	go func() {
		s, err := cinderbackend.StartStack(ctx, cinderbackend.StackOptions{ISCSITarget: true, ListenAddress: c.HostIP, Log: t.Logf})
		stackDone <- started{s, err}
	}()
	ref, pushErr := PushImage(ctx, c, "cinder")
	got := <-stackDone
	if got.stack != nil {
		t.Cleanup(func() {
			if err := got.stack.Stop(); err != nil {
				t.Errorf("stopping Cinder: %v", err)
			}
		})
	}
	if got.err != nil {
		t.Fatalf("starting Cinder: %v", got.err)
	}
	if pushErr != nil {
		t.Fatal(pushErr)
	}
	if got.stack.TGTPortal == "" {
		t.Fatal("Cinder runs without its iSCSI target (tgtd)")
	}
	return got.stack, ref
}

// cinderNoauthConfig is the cloud config of a Cinder without Keystone, the
// stack's: what a user writes into cinder/deploy/cloud-config.yaml or gives
// the chart as cloudConfig.config.
func cinderNoauthConfig(stack *cinderbackend.Stack) string {
	return fmt.Sprintf("[Global]\ncinder-endpoint = %s\ntenant-id = %s\n", stack.Endpoint, cinderbackend.Project)
}

// checkCinderClaim waits until the claim ns/name (1500Mi, of an iscsi class)
// is bound, and proves what a node observes (see
// TestCinderProvisionAndISCSILogin): the PV is an iSCSI volume of Cinder's
// target with CHAP and the provisioner's initiator name, the Cinder volume
// exists, and a node logs in with the PV's CHAP Secret (not with a wrong
// password). Then it deletes the claim: the PV, the CHAP Secret and the
// Cinder volume (404) go, and the target refuses the login.
func checkCinderClaim(t *testing.T, ctx context.Context, stack *cinderbackend.Stack, ns, name, initiator string) {
	t.Helper()
	volClient, err := stack.Client()
	if err != nil {
		t.Fatal(err)
	}
	_, pv, err := framework.WaitForPVCBound(ctx, c.Client, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	src := pv.Spec.ISCSI
	if src == nil || src.SecretRef == nil || src.InitiatorName == nil || !src.SessionCHAPAuth {
		t.Fatalf("PV %s has source %+v, want an iSCSI source with CHAP and an initiator name", pv.Name, pv.Spec.PersistentVolumeSource)
	}
	if src.TargetPortal != stack.TGTPortal || *src.InitiatorName != initiator {
		t.Errorf("PV %s: portal %s, initiator %s; want Cinder's target %s and the deployment's --initiator-name %s",
			pv.Name, src.TargetPortal, *src.InitiatorName, stack.TGTPortal, initiator)
	}
	id := pv.Annotations[cinderprov.AnnVolumeID]
	vol, err := volumes.Get(ctx, volClient, id).Extract()
	if err != nil {
		t.Fatalf("Cinder volume %q of PV %s: %v", id, pv.Name, err)
	}
	if vol.Name != pv.Name || vol.Status != "attaching" || vol.VolumeType != "iscsi" {
		t.Errorf("Cinder volume %s: name %s, status %s, type %s; want %s, attaching, iscsi", id, vol.Name, vol.Status, vol.VolumeType, pv.Name)
	}
	secret, err := c.Client.CoreV1().Secrets(src.SecretRef.Namespace).Get(ctx, src.SecretRef.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	user, pass := string(secret.Data[mapper.ChapSessionUsername]), string(secret.Data[mapper.ChapSessionPassword])

	// From a node, as its kubelet would log in.
	node := c.Nodes[0]
	login := func(password string) (string, error) {
		url := fmt.Sprintf("iscsi://%s%%%s@%s/%s/%d", user, password, src.TargetPortal, src.IQN, src.Lun)
		out, err := node.Exec(ctx, "iscsi-readcapacity16", "-i", *src.InitiatorName, url)
		return string(out), err
	}
	if out, err := login(pass); err != nil || !strings.Contains(out, cinderLUNSize) {
		t.Fatalf("on %s, login to %s with the PV's initiator and CHAP Secret: %v\n%s", node.Name, src.TargetPortal, err, out)
	}
	if out, err := login(pass + "x"); err == nil || !strings.Contains(out, "Authentication failure") {
		t.Errorf("a wrong CHAP password was not refused (err %v):\n%s", err, out)
	}

	if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := volumes.Get(ctx, volClient, id).Extract(); !gophercloud.ResponseCodeIs(err, 404) {
		t.Errorf("after PV %s was deleted, Cinder volume %s is still there (err %v), want 404", pv.Name, id, err)
	}
	if _, err := c.Client.CoreV1().Secrets(src.SecretRef.Namespace).Get(ctx, src.SecretRef.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after PV %s was deleted, its CHAP Secret %s/%s is still there (err %v)", pv.Name, src.SecretRef.Namespace, src.SecretRef.Name, err)
	}
	if out, err := login(pass); err == nil {
		t.Errorf("login still works after the volume was deleted:\n%s", out)
	}
}

// setSecretData sets key of the Secret ns/name among objs, as a user edits
// it before applying.
func setSecretData(objs []*unstructured.Unstructured, ns, name, key, value string) error {
	for _, obj := range objs {
		if obj.GetKind() == "Secret" && obj.GetNamespace() == ns && obj.GetName() == name {
			return unstructured.SetNestedField(obj.Object, value, "stringData", key)
		}
	}
	return fmt.Errorf("no Secret %s/%s in the rendering", ns, name)
}

// deploymentArg is the value of the argument starting with prefix of the
// first container of the Deployment ns/name among objs.
func deploymentArg(objs []*unstructured.Unstructured, ns, name, prefix string) (string, error) {
	for _, obj := range objs {
		if obj.GetKind() != "Deployment" || obj.GetNamespace() != ns || obj.GetName() != name {
			continue
		}
		// Read without copying: kustomize's maps hold plain ints, which
		// unstructured's copying helpers refuse.
		field, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "template", "spec", "containers")
		containers, _ := field.([]any)
		if len(containers) == 0 {
			break
		}
		first, _ := containers[0].(map[string]any)
		args, _ := first["args"].([]any)
		for _, a := range args {
			if v, ok := strings.CutPrefix(fmt.Sprint(a), prefix); ok {
				return v, nil
			}
		}
		return "", fmt.Errorf("the Deployment %s/%s has no argument %s", ns, name, prefix)
	}
	return "", fmt.Errorf("no Deployment %s/%s (with containers) in the rendering", ns, name)
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/flex/pkg/flex"
	"github.com/kubeprov/external-storage/hostpath/pkg/hostpath"
	"github.com/kubeprov/external-storage/lib/podrun"
	"github.com/kubeprov/external-storage/test/framework"
)

// waitForWarningOrPV waits for a Warning event about pvc containing want,
// and fails at once if PV pvName appears first.
func waitForWarningOrPV(t *testing.T, ctx context.Context, pvc *corev1.PersistentVolumeClaim, pvName, want string) string {
	t.Helper()
	c := client(t)
	var msg string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if _, err := c.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{}); err == nil {
			t.Fatalf("PV %s was made, where a Warning event containing %q was expected", pvName, want)
		}
		events, err := framework.ListEvents(ctx, c, pvc)
		if err != nil {
			return false, nil
		}
		for _, ev := range events {
			if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, want) {
				msg = ev.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Warning event about %s/%s containing %q: %v", pvc.Namespace, pvc.Name, want, err)
	}
	return msg
}

// A provisioning pod whose image is edited while it runs is not the pod the
// provisioner created: its answer does not become a PV, the claim gets a
// Warning event that names the changed field, the driver's delete undoes
// whatever it may have done, and the pod is removed. (kubeletsim does not
// restart a container on an image edit as a kubelet does: the answer here
// is the original driver's, and it is refused all the same, since what ran
// can no longer be told from the pod.)
func TestContainerPodChangedWhileRunning(t *testing.T) {
	ctx := framework.TestContext(t, testTimeout)
	e := containerSetup(t, time.Minute, 30*time.Second, map[string]map[string]string{"node": nil})
	e.configMap(t, ctx, e.work, "cfg", nil, map[string]string{flex.ConfigImage: imageTest})
	class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), e.name, map[string]string{flex.ParamProvisionerConfig: "cfg", "root": e.root, "mode": "flex"}))
	hang := filepath.Join(e.root, "hang")
	if err := os.WriteFile(hang, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	pvc := createPVC(t, ctx, e.ns, "data", class.Name, "1Gi")
	pvName := pvNameOf(pvc)
	podName := flex.PodName(flex.ActionProvision, pvName)
	pods := client(t).CoreV1().Pods(e.work)
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pod, err := pods.Get(ctx, podName, metav1.GetOptions{})
		return err == nil && pod.Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		t.Fatalf("provision pod %s/%s is not running: %v", e.work, podName, err)
	}
	// A tenant who may edit pods there swaps the image, and the ConfigMap
	// goes, so that no later attempt can provision the claim either: any
	// PV would be the changed pod's.
	patch := `{"spec":{"containers":[{"name":"` + flex.ContainerName + `","image":"` + imageCreatePV + `"}]}}`
	if _, err := pods.Patch(ctx, podName, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client(t).CoreV1().ConfigMaps(e.work).Delete(ctx, "cfg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(hang); err != nil {
		t.Fatal(err)
	}

	msg := waitForWarningOrPV(t, ctx, pvc, pvName, "was changed after it was created (its spec.containers[0].image differs")
	t.Logf("event: %s", msg)
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return len(e.runs(flex.ActionDelete)) == 1, nil
	}); err != nil {
		t.Errorf("the driver's delete did not undo the changed pod's provision: runs %+v", e.sim.Runs())
	}
	if dirs := volumeDirs(t, e.root); len(dirs) != 0 {
		t.Errorf("directories left after the undo: %v", dirs)
	}
	expectNoPods(t, ctx, e.work)
	if _, err := client(t).CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("PV %s: %v, want none", pvName, err)
	}
}

// A StorageClass naming a provisioner ConfigMap in another namespace (here
// the claims' own, where a tenant writes ConfigMaps) is refused with a
// Warning event that says how to allow it; no pod runs and no PV is made.
func TestContainerConfigMapInAnotherNamespace(t *testing.T) {
	ctx := framework.TestContext(t, testTimeout)
	e := containerSetup(t, time.Minute, 30*time.Second, map[string]map[string]string{"node": nil})
	e.configMap(t, ctx, e.ns, "cfg", nil, map[string]string{flex.ConfigImage: imageTest})
	class := cp.CreateTestStorageClass(t, framework.NewStorageClass(uniqueName(t, "sc"), e.name, map[string]string{
		flex.ParamProvisionerConfig: e.ns + "/cfg", "root": e.root, "mode": "flex",
	}))
	pvc := createPVC(t, ctx, e.ns, "data", class.Name, "1Gi")
	msg := waitForWarningOrPV(t, ctx, pvc, pvNameOf(pvc),
		"parameter provisionerConfig names ConfigMap "+e.ns+"/cfg outside the provisioner's namespace "+e.work)
	if !strings.Contains(msg, "--allow-config-namespaces="+e.ns) {
		t.Errorf("the event does not say how to allow it: %s", msg)
	}
	for _, ns := range []string{e.work, e.ns} {
		if list, err := client(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
			t.Errorf("pods in %s: %v, %v", ns, list, err)
		}
	}
	if r := e.sim.Runs(); len(r) != 0 {
		t.Errorf("pods ran: %+v", r)
	}
}

// Pods as the provisioners build them, stored by the real API server with
// what every cluster adds (defaults; the ServiceAccount admission's account,
// pull secrets and token volume; default tolerations; priority; LimitRange
// resources) and read back, are still recognized as the pods they built:
// a provisioner restarted while its pod runs takes that pod instead of
// calling it foreign. TestContainerProvisionerReplacedWhilePodRuns does the
// same through a restart.
func TestPodAdoptedAfterReadBack(t *testing.T) {
	ctx := framework.TestContext(t, testTimeout)
	c := client(t)
	ns := cp.CreateTestNamespace(t, "podrun")
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta:       metav1.ObjectMeta{Name: "driver"},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().LimitRanges(ns).Create(ctx, &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Default:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceEphemeralStorage: resource.MustParse("100Mi")},
		}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: uniqueName(t, "pc")}, Value: 1000}
	if _, err := c.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.SchedulingV1().PriorityClasses().Delete(context.Background(), pc.Name, metav1.DeleteOptions{})
	})
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "PersistentVolume", Name: "pv-1", UID: "8b3f6c0e-1d2a-4c5b-9e7f-0a1b2c3d4e5f"}

	// A driver pod as a flex pod template shapes it: a service account whose
	// token it mounts, limits without requests, tolerations, affinity,
	// priority, both securityContexts, a secret volume without a mode.
	driver := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "driver", Namespace: ns, Labels: map[string]string{"app": "driver"},
			Annotations: map[string]string{"example.com/signature": "0a1b"}, OwnerReferences: []metav1.OwnerReference{owner}},
		Spec: corev1.PodSpec{
			NodeName:              "nowhere", // never runs: only what is stored matters
			RestartPolicy:         corev1.RestartPolicyNever,
			ActiveDeadlineSeconds: ptr.To[int64](60),
			ServiceAccountName:    "driver",
			NodeSelector:          map[string]string{"disk": "ssd"},
			PriorityClassName:     pc.Name,
			Tolerations:           []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "storage", Effect: corev1.TaintEffectNoSchedule}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 10, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "tier", Operator: corev1.NodeSelectorOpIn, Values: []string{"storage"}}}},
			}}}},
			SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000)},
			Volumes: []corev1.Volume{
				{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "backend"}}},
				{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/volumes"}}},
			},
			Containers: []corev1.Container{{
				Name: "driver", Image: "registry.example.com/driver", Args: []string{"provision"},
				Env:          []corev1.EnvVar{{Name: "FLEX_ACTION", Value: "provision"}, {Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "secret", MountPath: "/etc/secret", ReadOnly: true}, {Name: "host", MountPath: "/srv/volumes"}},
				Resources:    corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
			}},
		},
	}
	helpers, err := hostpath.NewHelperDirs(hostpath.HelperConfig{Client: c, Namespace: ns, Image: "registry.example.com/hostpath:v1"})
	if err != nil {
		t.Fatal(err)
	}
	helper := helpers.Pod(hostpath.HelperOp{Node: "nowhere", PV: "pv-1", ClaimNamespace: ns, Request: hostpath.HelperRequest{Action: hostpath.HelperCreate, Roots: []string{"/srv/a"}, Rel: "pv-1", Mode: 0o777}, Owner: &owner})

	// The Priority admission reads PriorityClasses from an informer, which
	// may not have seen the one just created.
	if err := framework.WaitUntilPodAdmitted(ctx, c, driver); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		want *corev1.Pod
		same func(existing, want *corev1.Pod) bool
	}{
		{"driver", driver, podrun.SameIntent},
		{"hostpath helper", helper, podrun.SameIntent},
	} {
		created, err := c.CoreV1().Pods(ns).Create(ctx, tc.want.DeepCopy(), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		stored, err := c.CoreV1().Pods(ns).Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d := podrun.Mismatch(stored, tc.want); d != "" || !tc.same(stored, tc.want) {
			t.Errorf("%s: the stored pod is not recognized: its %s differs", tc.name, d)
		}
		// The test proves something only if the cluster added what it allows.
		t.Logf("%s: stored with priority %v, tolerations %d, volumes %d, requests %v", tc.name,
			ptr.Deref(stored.Spec.Priority, -1), len(stored.Spec.Tolerations), len(stored.Spec.Volumes), stored.Spec.Containers[0].Resources.Requests)
	}
	stored, err := c.CoreV1().Pods(ns).Get(ctx, driver.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := stored.Spec
	if len(s.Volumes) != 3 || len(s.ImagePullSecrets) != 1 || ptr.Deref(s.Priority, 0) != pc.Value || len(s.Tolerations) != 3 ||
		s.Containers[0].Resources.Requests.Cpu().IsZero() || s.Containers[0].Resources.Requests.Memory().IsZero() || s.DeprecatedServiceAccount != "driver" {
		t.Errorf("the API server did not add what the test expects it to (token volume, pull secret, priority, default tolerations, requests): %+v", s)
	}
	// And one planted field still makes the same stored pod foreign.
	stored.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh"}}}}
	if podrun.SameIntent(stored, driver) {
		t.Error("a stored pod with a postStart hook is taken")
	}
}

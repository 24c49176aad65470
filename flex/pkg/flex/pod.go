// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/podrun"
)

// What provisioning pods look like.
const (
	// ContainerName is the name of the pod's only container.
	ContainerName = "driver"
	// TerminationMessagePath is where the container writes its Output.
	TerminationMessagePath = "/dev/termination-log"
	// SecretMountPath is where the class's secret (ParamSecretName) is mounted.
	SecretMountPath = "/etc/flex/secret" //nolint:gosec // G101: a path, not a credential
	// LabelManagedBy, LabelAction and LabelPV label every pod.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelAction    = "flex.kubeprov.io/action"
	LabelPV        = "flex.kubeprov.io/pv"
	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "flex-provisioner"
	// DefaultPodStartTimeout is how long a pod may take to be scheduled and
	// to start (image pull) before it is given up.
	DefaultPodStartTimeout = 2 * time.Minute
)

// Environment variables of a provisioning pod besides the input's (EnvName).
const (
	EnvAction              = "FLEX_ACTION"
	EnvInput               = "FLEX_INPUT"
	EnvTerminationLog      = "FLEX_TERMINATION_LOG"
	EnvSecretDir           = "FLEX_SECRET_DIR" //nolint:gosec // G101: a variable name, not a credential
	reasonDeadlineExceeded = "DeadlineExceeded"
)

// PodLauncher runs each operation as a pod from the image a provisioner
// ConfigMap names (the container launcher). A pod answers either by writing
// an Output to its termination message, or, for provision, by creating the
// PV itself with its service account.
type PodLauncher struct {
	// Client talks to the API server.
	Client kubernetes.Interface
	// Namespace is the provisioner's namespace: where ConfigMaps are found by
	// label and named without a namespace, and where pods run by default.
	Namespace string
	// Deadline is the pods' default activeDeadlineSeconds; 0 means DefaultDriverTimeout.
	Deadline time.Duration
	// StartTimeout is how long a pod may take to be scheduled and started;
	// 0 means DefaultPodStartTimeout.
	StartTimeout time.Duration
	// RecordKey signs the pod configuration recorded on each PV, which its
	// delete pod runs with, and each pod (AnnPodIntent) (LoadRecordKey);
	// required.
	RecordKey []byte
	// AllowConfigNamespaces are the namespaces besides Namespace whose
	// ConfigMaps a StorageClass may name (ParamProvisionerConfig), as an
	// administrator allowed them (--allow-config-namespaces). None by
	// default: whoever writes a provisioner ConfigMap chooses the image
	// whose answer becomes a PV.
	AllowConfigNamespaces []string
}

var _ Launcher = &PodLauncher{}

// Name implements Launcher.
func (l *PodLauncher) Name() string { return "container" }

// Provision implements Launcher.
func (l *PodLauncher) Provision(ctx context.Context, call *Call) (*Result, controller.ProvisioningState, error) {
	class := call.Options.StorageClass
	if class == nil {
		return nil, controller.ProvisioningFinished, errors.New("the container launcher needs a StorageClass naming its provisioner ConfigMap")
	}
	cfg, err := l.provisionConfig(ctx, call, class)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}

	var owner *metav1.OwnerReference
	// An owner must live in the dependent's namespace, or the garbage
	// collector deletes the dependent at once: only own pods in the claim's.
	if claim := call.Options.PVC; claim.Namespace == cfg.Namespace {
		owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: claim.Name, UID: claim.UID}
	}
	pod, state, err := l.run(ctx, ActionProvision, call, cfg, owner)
	if err != nil {
		return nil, state, err
	}
	desc := describePod(pod)
	if pod.Status.Phase == corev1.PodFailed {
		return nil, failedState(pod), podFailure(desc, pod)
	}
	// Success: the pod created the PV itself, or wrote its Output.
	pv, err := l.Client.CoreV1().PersistentVolumes().Get(ctx, call.PVName, metav1.GetOptions{})
	switch {
	case err == nil:
		adopted, err := l.adopt(ctx, call, class, pv, desc)
		if err != nil {
			return nil, controller.ProvisioningFinished, err
		}
		return &Result{Volume: adopted}, controller.ProvisioningFinished, nil
	case !apierrors.IsNotFound(err):
		// The pod is gone and has done its work; provisioning again is safe.
		return nil, controller.ProvisioningInBackground, fmt.Errorf("looking for PersistentVolume %s after %s succeeded: %w", call.PVName, desc, err)
	}
	out, err := provisionOutput(pod, desc, call.PVName, cfg.HostPath)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	return &Result{Output: out}, controller.ProvisioningFinished, nil
}

// provisionConfig reads the class's provisioner ConfigMap into how the pods
// run, with the class's secret; passes the ConfigMap's properties in the
// input under the class's parameters; and records the configuration on the
// PV, signed, for its delete pod.
func (l *PodLauncher) provisionConfig(ctx context.Context, call *Call, class *storagev1.StorageClass) (*PodConfig, error) {
	cm, err := l.findConfigMap(ctx, class)
	if err != nil {
		return nil, err
	}
	cfg, props, err := ParseConfigMap(cm, l.Namespace, int64(l.deadline().Seconds()))
	if err != nil {
		return nil, err
	}
	if s := class.Parameters[ParamSecretName]; s != "" {
		if msgs := validation.IsDNS1123Subdomain(s); len(msgs) > 0 {
			return nil, fmt.Errorf("StorageClass %q: parameter %s %q is not a valid Secret name: %s", class.Name, ParamSecretName, s, strings.Join(msgs, "; "))
		}
		cfg.SecretName = s
	}
	// ConfigMap properties first: the class's parameters override them.
	for k, v := range props {
		if _, ok := call.Input[k]; !ok {
			call.Input[k] = v
		}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	call.Record[AnnPod] = string(b)
	call.Record[AnnPodSignature] = signRecord(l.RecordKey, call.PVName, string(b))
	return cfg, nil
}

// provisionOutput reads the Output a provisioning pod that succeeded
// without creating the PV wrote to its termination message. Since the pod
// ran to the end, a missing or unusable answer is an unknownOutcome:
// something may exist.
func provisionOutput(pod *corev1.Pod, desc, pvName, hostPath string) (*Output, error) {
	msg := terminationMessage(pod)
	if strings.TrimSpace(msg) == "" {
		// It ran to the end, so it may have made something.
		return nil, unknownOutcome{fmt.Errorf("%s succeeded but neither created PersistentVolume %s nor wrote a volume to %s",
			desc, pvName, TerminationMessagePath)}
	}
	out, err := ParseOutput([]byte(msg))
	if err != nil {
		return nil, unknownOutcome{fmt.Errorf("%s: %w", desc, err)}
	}
	if err := out.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", desc, err)
	}
	if err := nodePathWithin(out, hostPath); err != nil {
		// It succeeded, so something may exist: undo it.
		return nil, unknownOutcome{fmt.Errorf("%s: %w", desc, err)}
	}
	return out, nil
}

// nodePathWithin refuses a hostPath or local volume outside root, the node
// directory the ConfigMap lets the pods use (ConfigHostPath): a pod's answer
// must not hand a claim any other directory of a node, such as /.
func nodePathWithin(out *Output, root string) error {
	var v struct {
		HostPath *struct{ Path string } `json:"hostPath"`
		Local    *struct{ Path string } `json:"local"`
	}
	if len(out.Volume) == 0 || json.Unmarshal(out.Volume, &v) != nil {
		return nil // not a node path; VolumeSpec reports malformed answers
	}
	var p string
	switch {
	case v.HostPath != nil:
		p = v.HostPath.Path
	case v.Local != nil:
		p = v.Local.Path
	default:
		return nil
	}
	if root == "" {
		return fmt.Errorf("answered a node path volume (%q) but its ConfigMap sets no %q: node paths are allowed only inside that directory", Truncate(p), ConfigHostPath)
	}
	if !path.IsAbs(p) || path.Clean(p) != p || !strings.HasPrefix(p, root+"/") {
		return fmt.Errorf("answered node path %q, which is not inside %q (its ConfigMap's %q)", Truncate(p), root, ConfigHostPath)
	}
	return nil
}

// Delete implements Launcher: the same image, with FLEX_ACTION=delete.
func (l *PodLauncher) Delete(ctx context.Context, call *Call) error {
	if err := verifyRecord(l.RecordKey, call.PVName, call.Record); err != nil {
		return fmt.Errorf("not running a delete pod for PV %s: %w; check the PV, delete the asset by hand, then the PV", call.PVName, err)
	}
	cfg, err := podConfigFrom(call.Record)
	if err != nil {
		return fmt.Errorf("PV %s does not say how to run its delete pod (%w): delete the asset by hand, then the PV", call.PVName, err)
	}
	var owner *metav1.OwnerReference
	if pv := call.Volume; pv != nil && pv.UID != "" {
		owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "PersistentVolume", Name: pv.Name, UID: pv.UID}
	}
	pod, _, err := l.run(ctx, ActionDelete, call, cfg, owner)
	if err != nil {
		return err
	}
	desc := describePod(pod)
	if pod.Status.Phase == corev1.PodFailed {
		return podFailure(desc, pod)
	}
	if msg := strings.TrimSpace(terminationMessage(pod)); msg != "" {
		out, err := ParseOutput([]byte(msg))
		if err == nil {
			err = out.Err()
		}
		if err != nil {
			return fmt.Errorf("%s exited 0 but its termination message says: %w", desc, err)
		}
	}
	return nil
}

func (l *PodLauncher) deadline() time.Duration {
	if l.Deadline > 0 {
		return l.Deadline
	}
	return DefaultDriverTimeout
}

func (l *PodLauncher) startTimeout() time.Duration {
	if l.StartTimeout > 0 {
		return l.StartTimeout
	}
	return DefaultPodStartTimeout
}

// findConfigMap finds the class's provisioner ConfigMap: by parameter, or by
// the labels storage-class=<class>,type=provisioner-config.
func (l *PodLauncher) findConfigMap(ctx context.Context, class *storagev1.StorageClass) (*corev1.ConfigMap, error) {
	if ref := class.Parameters[ParamProvisionerConfig]; ref != "" {
		ns, name, ok := strings.Cut(ref, "/")
		if !ok {
			ns, name = l.Namespace, ref
		}
		if ns != l.Namespace && !slices.Contains(l.AllowConfigNamespaces, ns) {
			return nil, fmt.Errorf("StorageClass %q: parameter %s names ConfigMap %s/%s outside the provisioner's namespace %s: not reading it, since whoever can write ConfigMaps there would choose the image whose answer becomes the PV; move it to namespace %s, or start the provisioner with --allow-config-namespaces=%s",
				class.Name, ParamProvisionerConfig, ns, name, l.Namespace, l.Namespace, ns)
		}
		cm, err := l.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("StorageClass %q: provisioner ConfigMap %s/%s (parameter %s) not found: create it", class.Name, ns, name, ParamProvisionerConfig)
		}
		if err != nil {
			return nil, fmt.Errorf("StorageClass %q: reading provisioner ConfigMap %s/%s: %w", class.Name, ns, name, err)
		}
		return cm, nil
	}
	sel := labels.Set{LabelStorageClass: class.Name, LabelType: TypeProvisionerConfig}
	list, err := l.Client.CoreV1().ConfigMaps(l.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("StorageClass %q: listing provisioner ConfigMaps in namespace %s: %w", class.Name, l.Namespace, err)
	}
	switch len(list.Items) {
	case 0:
		return nil, fmt.Errorf("StorageClass %q has no provisioner ConfigMap: set parameter %s to <namespace>/<name>, or label a ConfigMap in namespace %s with %s",
			class.Name, ParamProvisionerConfig, l.Namespace, sel.String())
	case 1:
		return &list.Items[0], nil
	}
	names := make([]string, 0, len(list.Items))
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	return nil, fmt.Errorf("StorageClass %q has %d provisioner ConfigMaps in namespace %s (%s): keep one, or set parameter %s",
		class.Name, len(names), l.Namespace, strings.Join(names, ", "), ParamProvisionerConfig)
}

// adopt accepts a PV the provisioning pod created itself, if it is for this
// claim and class, and annotates it like a PV the provisioner made.
func (l *PodLauncher) adopt(ctx context.Context, call *Call, class *storagev1.StorageClass, pv *corev1.PersistentVolume, desc string) (*corev1.PersistentVolume, error) {
	claim := call.Options.PVC
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != claim.UID || ref.Namespace != claim.Namespace || ref.Name != claim.Name {
		return nil, fmt.Errorf("%s created PersistentVolume %s without a claimRef to this claim (namespace %s, name %s, uid %s from FLEX_PVC_*): fix the image",
			desc, pv.Name, claim.Namespace, claim.Name, claim.UID)
	}
	if pv.Spec.StorageClassName != class.Name {
		return nil, fmt.Errorf("%s created PersistentVolume %s with storageClassName %q instead of %q (FLEX_STORAGE_CLASS): fix the image",
			desc, pv.Name, pv.Spec.StorageClassName, class.Name)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": call.Annotations()}})
	if err != nil {
		return nil, err
	}
	adopted, err := l.Client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("annotating PersistentVolume %s created by %s: %w", pv.Name, desc, err)
	}
	klog.FromContext(ctx).V(2).Info("Adopted the PV the provisioning pod created", "pv", pv.Name)
	// The controller saves what Provision returns with a create, which counts
	// an existing PV of the same claim as saved; a create must not carry the
	// server-set fields.
	adopted = adopted.DeepCopy()
	adopted.ResourceVersion, adopted.UID, adopted.CreationTimestamp, adopted.ManagedFields = "", "", metav1.Time{}, nil
	adopted.Status = corev1.PersistentVolumeStatus{}
	return adopted, nil
}

// run gets the operation's pod (an existing one is waited on, never
// duplicated) or creates it, waits until it ends, and deletes it once its
// result is read. A pod still running when ctx ends is left to finish; the
// next attempt waits on it. The error is for a pod that did not end.
func (l *PodLauncher) run(ctx context.Context, action string, call *Call, cfg *PodConfig, owner *metav1.OwnerReference) (*corev1.Pod, controller.ProvisioningState, error) {
	logger := klog.FromContext(ctx)
	want, err := l.pod(action, call, cfg, owner)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	runner := podrun.Runner{Client: l.Client}
	pod, err := runner.Start(ctx, want, podrun.SameIntent)
	if errors.Is(err, podrun.ErrForeignPod) {
		// Its termination message would decide the PV.
		why := "its labels or spec differ"
		if existing, gerr := l.Client.CoreV1().Pods(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{}); gerr == nil {
			why = "its " + podrun.Mismatch(existing, want) + " differs"
		}
		return nil, controller.ProvisioningFinished, fmt.Errorf("pod %s/%s exists but is not the %s pod this provisioner creates (%s): not using it; delete or rename it", want.Namespace, want.Name, action, why)
	}
	if err != nil {
		// Whatever an earlier attempt left running still runs.
		return nil, controller.ProvisioningNoChange, fmt.Errorf("creating %s pod %s/%s from ConfigMap %s: %w", action, want.Namespace, want.Name, cfg.ConfigMap, err)
	}
	desc := describePod(pod)
	logger.V(2).Info("Waiting for pod", "pod", klog.KObj(pod), "action", action)
	bound := pod.CreationTimestamp.Add(l.startTimeout() + time.Duration(cfg.ActiveDeadlineSeconds)*time.Second)
	final, err := runner.Wait(ctx, pod, bound)
	switch {
	case err == nil:
		defer runner.Delete(ctx, final)
		return final, controller.ProvisioningFinished, unchanged(final, want)
	case errors.Is(err, podrun.ErrPodGone):
		return nil, controller.ProvisioningInBackground, fmt.Errorf("%s was deleted before it finished; it will run again, so the image must be idempotent", desc)
	case ctx.Err() != nil:
		return nil, controller.ProvisioningInBackground, fmt.Errorf("%s is still running when the operation ended (--timeout); waiting for it again later", desc)
	}
	// Our own bound passed: a pod that never started is given up.
	current, gerr := l.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if gerr != nil {
		return nil, controller.ProvisioningInBackground, fmt.Errorf("%s did not finish in time and cannot be read: %w", desc, gerr)
	}
	if current.UID == pod.UID && podrun.Terminal(current) {
		defer runner.Delete(ctx, current)
		return current, controller.ProvisioningFinished, unchanged(current, want)
	}
	if podrun.NeverRan(current) {
		defer runner.Delete(ctx, current)
		return nil, controller.ProvisioningFinished, fmt.Errorf("%s did not start within %v (--pod-start-timeout): %s", desc, l.startTimeout(), podrun.WhyNotStarted(current))
	}
	return nil, controller.ProvisioningInBackground, fmt.Errorf("%s is still running past its deadline of %ds; waiting for it again later", desc, cfg.ActiveDeadlineSeconds)
}

// unchanged refuses the result of a pod that is no longer the one this
// provisioner created: it was edited while it ran (a new image, command or
// environment), so its answer is not the driver's. It ran, so something may
// exist: the outcome is unknown, and Provision undoes it. The pod itself is
// deleted, by its UID, as any pod whose result is read; a new attempt runs
// a new one.
func unchanged(final, want *corev1.Pod) error {
	if d := podrun.Mismatch(final, want); d != "" {
		return unknownOutcome{fmt.Errorf("%s was changed after it was created (its %s differs from what this provisioner created): not using its answer; check who can edit pods in namespace %s",
			describePod(want), d, want.Namespace)}
	}
	return nil
}

// pod builds the operation's pod.
func (l *PodLauncher) pod(action string, call *Call, cfg *PodConfig, owner *metav1.OwnerReference) (*corev1.Pod, error) {
	env, err := inputEnv(call.Input)
	if err != nil {
		return nil, err
	}
	env = append([]corev1.EnvVar{
		{Name: EnvAction, Value: action},
		{Name: EnvInput, Value: call.Input.JSON()},
		{Name: EnvTerminationLog, Value: TerminationMessagePath},
	}, env...)
	container := corev1.Container{
		Name:                     ContainerName,
		Image:                    cfg.Image,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Env:                      env,
		TerminationMessagePath:   TerminationMessagePath,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          cfg.SecurityContext,
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      PodName(action, call.PVName),
			Namespace: cfg.Namespace,
			Labels: map[string]string{
				LabelManagedBy: ManagedBy,
				LabelAction:    action,
				LabelPV:        podrun.LabelValue(call.PVName),
			},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:        ptr.To(cfg.ActiveDeadlineSeconds),
			NodeSelector:                 cfg.NodeSelector,
			ServiceAccountName:           cfg.ServiceAccountName,
			AutomountServiceAccountToken: ptr.To(cfg.ServiceAccountName != ""),
		},
	}
	mountVolumes(cfg, &pod.Spec, &container)
	pod.Spec.Containers = []corev1.Container{container}
	cfg.Template.apply(pod)
	if owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	intent, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	pod.Annotations = map[string]string{AnnPodIntent: signPod(l.RecordKey, pod.Namespace, pod.Name, intent)}
	return pod, nil
}

// mountVolumes adds the node directory (ConfigHostPath) and the class's
// secret, when cfg has them, to the pod spec and mounts them in container.
func mountVolumes(cfg *PodConfig, spec *corev1.PodSpec, container *corev1.Container) {
	if cfg.HostPath != "" {
		spec.Volumes = append(spec.Volumes, corev1.Volume{
			Name: "host",
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: cfg.HostPath, Type: ptr.To(corev1.HostPathDirectoryOrCreate),
			}},
		})
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "host", MountPath: cfg.HostPath})
	}
	if cfg.SecretName != "" {
		// Secrets are files, never environment variables: env leaks into
		// process listings, crash dumps and child processes.
		spec.Volumes = append(spec.Volumes, corev1.Volume{
			Name: "secret",
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: cfg.SecretName, DefaultMode: ptr.To[int32](0o400),
			}},
		})
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "secret", MountPath: SecretMountPath, ReadOnly: true})
		container.Env = append(container.Env, corev1.EnvVar{Name: EnvSecretDir, Value: SecretMountPath})
	}
}

// PodName is the deterministic name of an operation's pod, at most 63
// characters: one PV never has two pods of the same action at once.
func PodName(action, pvName string) string {
	return podrun.ShortName("flex-" + action + "-" + pvName)
}

func describePod(pod *corev1.Pod) string {
	return fmt.Sprintf("%s pod %s/%s", pod.Labels[LabelAction], pod.Namespace, pod.Name)
}

func terminationMessage(pod *corev1.Pod) string {
	if t := podrun.Terminated(pod, ContainerName); t != nil {
		return t.Message
	}
	return ""
}

// failedState: a pod killed at its deadline may have created something,
// unless its container never started.
func failedState(pod *corev1.Pod) controller.ProvisioningState {
	if pod.Status.Reason == reasonDeadlineExceeded && !podrun.NeverStarted(pod) {
		return controller.ProvisioningInBackground
	}
	return controller.ProvisioningFinished
}

// podFailure describes a failed pod with its exit code and termination
// message (the log tail when the container wrote none).
func podFailure(desc string, pod *corev1.Pod) error {
	t := podrun.Terminated(pod, ContainerName)
	if pod.Status.Reason == reasonDeadlineExceeded && podrun.NeverStarted(pod) {
		// The deadline counts from the pod's start on its node, image
		// pull included: a kubelet fails a pod whose image cannot be
		// pulled at its deadline, with the container still waiting.
		return fmt.Errorf("%s did not start within its deadline of %ds (active-deadline-seconds, which includes pulling the image): %s",
			desc, ptr.Deref(pod.Spec.ActiveDeadlineSeconds, 0), podrun.WhyNotStarted(pod))
	}
	if pod.Status.Reason == reasonDeadlineExceeded {
		msg := ""
		if t != nil && strings.TrimSpace(t.Message) != "" {
			msg = ": " + Truncate(t.Message)
		}
		return fmt.Errorf("%s exceeded its deadline of %ds (active-deadline-seconds) and was killed; it will run again, so the image must be idempotent%s",
			desc, ptr.Deref(pod.Spec.ActiveDeadlineSeconds, 0), msg)
	}
	if t == nil {
		return fmt.Errorf("%s failed: %s %s", desc, pod.Status.Reason, Truncate(pod.Status.Message))
	}
	if out, err := ParseOutput([]byte(t.Message)); err == nil {
		if err := out.Err(); err != nil {
			return fmt.Errorf("%s failed with exit code %d: %w", desc, t.ExitCode, err)
		}
	}
	msg := Truncate(t.Message)
	if msg == "" {
		msg = "no termination message or log"
	}
	return fmt.Errorf("%s failed with exit code %d: %s", desc, t.ExitCode, msg)
}

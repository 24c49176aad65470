// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/lib/pathpattern"
	"github.com/kubeprov/external-storage/lib/podrun"
)

// What helper pods look like.
const (
	// HelperContainerName is the name of a helper pod's only container.
	HelperContainerName = "helper"
	// HelperSubcommand is the provisioner binary's subcommand a helper pod
	// runs (the image is the provisioner's own).
	HelperSubcommand = "helper"
	// HelperTerminationLog is where the helper writes its HelperResult.
	HelperTerminationLog = "/dev/termination-log"
	// EnvHelperTerminationLog tells the helper where HelperTerminationLog is.
	EnvHelperTerminationLog = "HELPER_TERMINATION_LOG"
	// LabelManagedBy, LabelHelperAction and LabelHelperPV label every helper pod.
	LabelManagedBy    = "app.kubernetes.io/managed-by"
	LabelHelperAction = "hostpath.kubeprov.io/helper"
	LabelHelperPV     = "hostpath.kubeprov.io/pv"
	// LabelHelperClaimNamespace is the namespace of the claim a helper pod
	// works for: helper pods are counted per namespace by it.
	LabelHelperClaimNamespace = "hostpath.kubeprov.io/claim-namespace"
	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "hostpath-provisioner"
	// DefaultHelperTimeout bounds one helper pod, from its creation to its
	// end: scheduling, image pull and the mkdir or rm itself.
	DefaultHelperTimeout = 2 * time.Minute
	// DefaultHelperPodsPerNamespace bounds the helper pods that exist at
	// once for the claims (and volumes) of one namespace: a few volumes of
	// a StatefulSet are made in parallel, and no namespace takes every
	// node's helper capacity.
	DefaultHelperPodsPerNamespace = 4
)

// Helper actions.
const (
	HelperCreate = "create"
	HelperRemove = "remove"
	// HelperCheck checks that the path has no link in it, before a setup
	// or teardown script works on it (scripts.go).
	HelperCheck = "check"
)

// ErrOutcomeUnknown: a helper pod ran, or may have, but its result was lost
// (deleted, killed at its deadline): the directory may exist.
var ErrOutcomeUnknown = errors.New("outcome unknown")

// ErrInProgress: the operation's helper pod runs; no worker waits for it,
// the operation is looked at again later and finds the pod by its name.
var ErrInProgress = errors.New("in progress")

// ErrNodeUnusable: the node does not exist, is cordoned, is not Ready, or
// the helper pods' placement policy does not allow it, so no helper pod is
// created there (it would wait until --helper-timeout, or run where the
// administrator does not want it).
var ErrNodeUnusable = errors.New("no helper pod")

// ErrNamespaceBusy: the claim's namespace already has as many helper pods
// as it may (HelperConfig.PodsPerNamespace); nothing was created.
var ErrNamespaceBusy = errors.New("too many helper pods for the namespace")

// HelperConfig configures helper pods.
type HelperConfig struct {
	// Client talks to the API server.
	Client kubernetes.Interface
	// Namespace is where helper pods run: the provisioner's own, which must
	// allow the privileged Pod Security level (hostPath volumes).
	Namespace string
	// Image is the provisioner's own image: helper pods run its binary's
	// helper subcommand.
	Image string
	// ImagePullPolicy of the helper container; empty means IfNotPresent.
	ImagePullPolicy corev1.PullPolicy
	// Timeout bounds one helper pod; 0 means DefaultHelperTimeout.
	Timeout time.Duration
	// PodsPerNamespace bounds the helper pods that exist at once for one
	// claim namespace; 0 means DefaultHelperPodsPerNamespace.
	PodsPerNamespace int
	// NodeSelector is the helper pods' nodeSelector: a node without these
	// labels is refused before any pod is made.
	NodeSelector map[string]string
	// Tolerations are the helper pods' tolerations: a node with a
	// NoSchedule or NoExecute taint they do not tolerate is refused. None
	// by default, so that tenants cannot send helper pods to nodes the
	// administrator keeps apart (control-plane nodes).
	Tolerations []corev1.Toleration
}

// HelperDirs makes and removes directories through short-lived pods on the
// target node, so that one provisioner (a Deployment) serves every node.
// It never waits for a pod: it creates it, and returns ErrInProgress until
// a later call finds it ended.
type HelperDirs struct {
	cfg HelperConfig
	now func() time.Time
	// admitting makes counting a namespace's helper pods and creating one
	// a single step, so that parallel workers cannot exceed the bound.
	admitting sync.Mutex
}

var _ Dirs = (*HelperDirs)(nil)

// NewHelperDirs checks cfg and returns HelperDirs.
func NewHelperDirs(cfg HelperConfig) (*HelperDirs, error) {
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, errors.New("helper pods need a client"))
	}
	if msgs := validation.IsDNS1123Label(cfg.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("helper namespace %q: %s", cfg.Namespace, strings.Join(msgs, "; ")))
	}
	if cfg.Image == "" {
		errs = append(errs, errors.New("helper pods need an image (the provisioner's own)"))
	}
	if cfg.Timeout < 0 {
		errs = append(errs, fmt.Errorf("helper timeout %s is negative", cfg.Timeout))
	}
	if cfg.PodsPerNamespace < 0 {
		errs = append(errs, fmt.Errorf("helper pods per namespace %d is negative", cfg.PodsPerNamespace))
	}
	errs = append(errs, ValidateHelperPlacement(cfg.NodeSelector, cfg.Tolerations))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultHelperTimeout
	}
	if cfg.ImagePullPolicy == "" {
		cfg.ImagePullPolicy = corev1.PullIfNotPresent
	}
	if cfg.PodsPerNamespace == 0 {
		cfg.PodsPerNamespace = DefaultHelperPodsPerNamespace
	}
	return &HelperDirs{cfg: cfg, now: time.Now}, nil
}

// HelperRequest is what one helper pod does: the arguments of the helper
// subcommand.
type HelperRequest struct {
	Action      string
	Roots       []string
	Rel         string
	Mode        fs.FileMode
	SizeBytes   int64
	MustBeEmpty bool
}

// Args are the helper subcommand's arguments for r.
func (r HelperRequest) Args() []string {
	args := []string{HelperSubcommand, r.Action}
	for _, root := range r.Roots {
		args = append(args, "--root="+root)
	}
	args = append(args, "--rel="+r.Rel)
	if r.Action == HelperCreate {
		args = append(args, fmt.Sprintf("--mode=%#o", uint32(r.Mode)), "--size-bytes="+strconv.FormatInt(r.SizeBytes, 10))
	}
	if r.MustBeEmpty && (r.Action == HelperCreate || r.Action == HelperCheck) {
		args = append(args, "--must-be-empty")
	}
	return args
}

// Validate re-checks a request where it is carried out, inside the helper
// pod: absolute, clean roots; one plain relative path below them.
func (r HelperRequest) Validate() error {
	var errs []error
	switch r.Action {
	case HelperCreate:
		if len(r.Roots) == 0 {
			errs = append(errs, errors.New("no --root"))
		}
	case HelperRemove, HelperCheck:
		if len(r.Roots) != 1 {
			errs = append(errs, fmt.Errorf("%s takes exactly one --root, got %d", r.Action, len(r.Roots)))
		}
	default:
		errs = append(errs, fmt.Errorf("action %q must be %s, %s or %s", r.Action, HelperCreate, HelperRemove, HelperCheck))
	}
	for _, root := range r.Roots {
		if !filepath.IsAbs(root) || filepath.Clean(root) != root || root == "/" {
			errs = append(errs, fmt.Errorf("root %q must be a clean absolute path other than /", root))
		}
	}
	if err := pathpattern.ValidateRelative(r.Rel); err != nil {
		errs = append(errs, fmt.Errorf("--rel: %w", err))
	}
	if r.Mode&^fs.ModePerm != 0 {
		errs = append(errs, fmt.Errorf("mode %#o has bits other than permissions", uint32(r.Mode)))
	}
	return errors.Join(errs...)
}

// HelperResult is what a helper writes to its termination message.
type HelperResult struct {
	// Root is the root the directory was made under (create).
	Root string `json:"root,omitempty"`
	// Error says why the helper failed.
	Error string `json:"error,omitempty"`
	// SetupFailure is why the setup script failed, for the teardown pod
	// that runs after it (read from its annotation, not written by it).
	SetupFailure string `json:"-"`
}

// RunHelper carries out r on this filesystem exactly as LocalDirs does on
// the provisioner's own node: no "..", no symbolic link followed in any
// component (lib/nofollow), no directory made inside one others may write.
func RunHelper(ctx context.Context, r HelperRequest) HelperResult {
	if err := r.Validate(); err != nil {
		return HelperResult{Error: err.Error()}
	}
	switch r.Action {
	case HelperCreate:
		root, err := LocalDirs{}.Create(ctx, CreateRequest{
			Node: "this node", Roots: r.Roots, Rel: r.Rel, Mode: r.Mode, SizeBytes: r.SizeBytes, MustBeEmpty: r.MustBeEmpty,
		})
		if err != nil {
			return HelperResult{Error: err.Error()}
		}
		return HelperResult{Root: root}
	case HelperCheck:
		if err := checkDir(r.Roots[0], r.Rel, r.MustBeEmpty); err != nil {
			return HelperResult{Error: err.Error()}
		}
		return HelperResult{Root: r.Roots[0]}
	default:
		if err := removeDir(r.Roots[0], r.Rel); err != nil {
			return HelperResult{Error: err.Error()}
		}
		return HelperResult{}
	}
}

// Create implements Dirs.
func (h *HelperDirs) Create(ctx context.Context, r CreateRequest) (string, error) {
	req := HelperRequest{Action: HelperCreate, Roots: r.Roots, Rel: r.Rel, Mode: r.Mode, SizeBytes: r.SizeBytes, MustBeEmpty: r.MustBeEmpty}
	op := HelperOp{Node: r.Node, PV: r.PV, ClaimNamespace: r.Namespace, Request: req}
	if r.Scripts != nil {
		return h.createWithScripts(ctx, op, r.Scripts)
	}
	res, err := h.run(ctx, op)
	if err != nil {
		return "", err
	}
	if !slices.Contains(r.Roots, res.Root) {
		return "", fmt.Errorf("%w: the helper pod on node %s answered root %q, not one of %v", ErrOutcomeUnknown, r.Node, res.Root, r.Roots)
	}
	return res.Root, nil
}

// Remove implements Dirs.
func (h *HelperDirs) Remove(ctx context.Context, r RemoveRequest) error {
	req := HelperRequest{Action: HelperRemove, Roots: []string{r.Root}, Rel: r.Rel}
	op := HelperOp{Node: r.Node, Request: req, Scripts: r.Scripts, Root: r.Root}
	if r.Scripts != nil {
		if err := scriptWord(r.Rel); err != nil {
			return fmt.Errorf("refusing to run the teardown script on %q: %w; remove the data yourself, then delete the PersistentVolume", r.Rel, err)
		}
	}
	if r.PV != nil {
		op.PV = r.PV.Name
		if r.PV.UID != "" {
			op.Owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "PersistentVolume", Name: r.PV.Name, UID: r.PV.UID}
		}
		if ref := r.PV.Spec.ClaimRef; ref != nil {
			op.ClaimNamespace = ref.Namespace
		}
	}
	_, err := h.run(ctx, op)
	return err
}

// HelperOp is one helper pod's work: Request on Node for volume PV.
type HelperOp struct {
	Node string
	// PV names the pod; empty for a volume without a name.
	PV string
	// ClaimNamespace is the namespace of the volume's claim, which the pod
	// is counted against.
	ClaimNamespace string
	Request        HelperRequest
	// Owner, if set, owns the pod (a remove pod is owned by its PV).
	Owner *metav1.OwnerReference
	// Scripts, if set, are local-path's setup and teardown: the pod runs
	// one of them under Root (scripts.go) instead of the helper.
	Scripts *Scripts
	Root    string
	// SetupFailure, on the teardown after a failed setup, says why setup
	// failed (an annotation of the pod: the next attempt reports it).
	SetupFailure string
}

// Pod is the helper pod that carries out op.
func (h *HelperDirs) Pod(op HelperOp) *corev1.Pod {
	req := op.Request
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      HelperPodName(req.Action, op.PV, op.Node, req.Rel),
			Namespace: h.cfg.Namespace,
			Labels: map[string]string{
				LabelManagedBy:            ManagedBy,
				LabelHelperAction:         req.Action,
				LabelHelperPV:             podrun.LabelValue(op.PV),
				LabelHelperClaimNamespace: op.ClaimNamespace,
			},
		},
		Spec: corev1.PodSpec{
			// Pinned to the node, past the scheduler, like a DaemonSet's
			// pod: the directory must be made there and nowhere else.
			// checkNode has refused nodes the selector and tolerations do
			// not allow; the kubelet checks the selector again.
			NodeName:                     op.Node,
			NodeSelector:                 maps.Clone(h.cfg.NodeSelector),
			Tolerations:                  slices.Clone(h.cfg.Tolerations),
			RestartPolicy:                corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:        ptr.To(int64(h.cfg.Timeout.Seconds())),
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
		},
	}
	if owner := op.Owner; owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	c := corev1.Container{
		Name:                     HelperContainerName,
		Image:                    h.cfg.Image,
		ImagePullPolicy:          h.cfg.ImagePullPolicy,
		Args:                     req.Args(),
		Env:                      []corev1.EnvVar{{Name: EnvHelperTerminationLog, Value: HelperTerminationLog}},
		TerminationMessagePath:   HelperTerminationLog,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		SecurityContext: HelperSecurityContext(),
	}
	// Only the configured paths the request names, each at the same path
	// as on the node. DirectoryOrCreate, as the DaemonSet modes mount
	// theirs: a configured path a fresh node lacks is made there (it is
	// the administrator's, absolute and never "/"), instead of a helper
	// pod the kubelet cannot start.
	for i, root := range req.Roots {
		vol := "root-" + strconv.Itoa(i)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
			Name:         vol,
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: root, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}},
		})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: root})
	}
	pod.Spec.Containers = []corev1.Container{c}
	if op.Scripts != nil {
		op.Scripts.scriptPod(pod, op, op.Root)
	}
	if op.SetupFailure != "" {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[AnnSetupFailure] = op.SetupFailure
	}
	return pod
}

// HelperSecurityContext is the helper container's: root, because the volume
// directories belong to the pods' users of any uid, with only the two
// powers of root the work needs, DAC_OVERRIDE (remove what they wrote, look
// into a directory they made private) and FOWNER (set the mode of a
// directory they chowned), as the provisioner itself in DaemonSet mode.
func HelperSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsUser:                ptr.To[int64](0),
		RunAsGroup:               ptr.To[int64](0),
		RunAsNonRoot:             ptr.To(false),
		Privileged:               ptr.To(false),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities: &corev1.Capabilities{
			Drop: []corev1.Capability{"ALL"},
			Add:  []corev1.Capability{"DAC_OVERRIDE", "FOWNER"},
		},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// run looks for the operation's helper pod. Without one it checks the node
// and the claim namespace's bound and creates the pod; an existing pod is
// used only if it is exactly the pod this provisioner would create. A pod
// that has not ended yet is ErrInProgress (nobody waits for it: a later
// call comes back to it), or, past the timeout, deleted and given up. An
// ended pod's result is read and the pod deleted.
func (h *HelperDirs) run(ctx context.Context, op HelperOp) (*HelperResult, error) {
	req := op.Request
	want := h.Pod(op)
	// The pod is deleted at once, past its grace period: whatever it was
	// doing is given up.
	runner := podrun.Runner{Client: h.cfg.Client, DeleteGracePeriod: ptr.To[int64](0)}
	pod, err := h.getOrStart(ctx, runner, want, op)
	if err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("helper pod %s/%s (%s %s on node %s)", pod.Namespace, pod.Name, req.Action, req.Rel, op.Node)
	bound := h.bound(op)
	if !podrun.Terminal(pod) {
		return nil, h.unfinished(ctx, runner, pod, desc, bound)
	}
	defer runner.Delete(ctx, pod)
	if err := checkFailed(pod, desc); err != nil {
		return nil, err
	}
	t := podrun.Terminated(pod, HelperContainerName)
	if err := checkRan(pod, t, desc, bound); err != nil {
		return nil, err
	}
	if op.Scripts != nil {
		return scriptResult(pod, t, desc, op, bound)
	}
	return helperResult(ctx, pod, t, desc, req.Action)
}

// getOrStart is the operation's helper pod: the one there is, if it is
// exactly want, or else want, started.
func (h *HelperDirs) getOrStart(ctx context.Context, runner podrun.Runner, want *corev1.Pod, op HelperOp) (*corev1.Pod, error) {
	pod, err := h.cfg.Client.CoreV1().Pods(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		pod, err = h.start(ctx, runner, want, op)
	case err == nil && !podrun.SameIntent(pod, want):
		err = fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, podrun.ErrForeignPod)
	}
	if errors.Is(err, podrun.ErrForeignPod) {
		return nil, fmt.Errorf("helper pod %s/%s exists but is not the %s pod this provisioner creates (its labels or spec differ): not using it; delete it",
			want.Namespace, want.Name, op.Request.Action)
	}
	if err != nil {
		return nil, err
	}
	return pod, nil
}

// checkRan refuses an ended pod whose container t, the helper's, never ran
// to its end, so that it has no result to read.
func checkRan(pod *corev1.Pod, t *corev1.ContainerStateTerminated, desc string, bound helperBound) error {
	if t == nil {
		// Failed before its container ran: rejected by the kubelet
		// (resources, node affinity) or killed at its deadline while the
		// image was still pulled.
		if podrun.NeverStarted(pod) {
			return fmt.Errorf("%s failed before it started: %s %s", desc, pod.Status.Reason, podrun.Truncate(pod.Status.Message))
		}
		return fmt.Errorf("%w: %s failed: %s %s", ErrOutcomeUnknown, desc, pod.Status.Reason, podrun.Truncate(pod.Status.Message))
	}
	if t.StartedAt.IsZero() && t.ContainerID == "" {
		// Ended at its activeDeadlineSeconds before its container ever
		// started (a volume the kubelet could not mount, an image it
		// could not pull): nothing ran, and the pod's events say why.
		return fmt.Errorf("%s did not start within %s (%s): see the pod's events", desc, bound, t.Reason)
	}
	return nil
}

// helperResult reads the built-in helper's result from the termination
// message of its container t.
func helperResult(ctx context.Context, pod *corev1.Pod, t *corev1.ContainerStateTerminated, desc, action string) (*HelperResult, error) {
	var res HelperResult
	if jerr := json.Unmarshal([]byte(strings.TrimSpace(t.Message)), &res); jerr != nil {
		msg := podrun.Truncate(t.Message)
		if msg == "" {
			msg = "no termination message or log"
		}
		return nil, fmt.Errorf("%w: %s ended with exit code %d (%s) without a result: %s", ErrOutcomeUnknown, desc, t.ExitCode, t.Reason, msg)
	}
	if res.Error != "" || pod.Status.Phase == corev1.PodFailed {
		return nil, fmt.Errorf("%s failed with exit code %d: %s", desc, t.ExitCode, podrun.Truncate(res.Error))
	}
	klog.FromContext(ctx).V(2).Info("Helper pod succeeded", "pod", klog.KObj(pod), "action", action, "root", res.Root)
	return &res, nil
}

// start creates want once the node may run it and the claim's namespace
// is within its bound. Counting and creating are one step: parallel
// workers cannot both take the last place.
func (h *HelperDirs) start(ctx context.Context, runner podrun.Runner, want *corev1.Pod, op HelperOp) (*corev1.Pod, error) {
	if err := h.checkNode(ctx, op.Node, want.Spec.NodeSelector, want.Spec.Tolerations); err != nil {
		return nil, err
	}
	h.admitting.Lock()
	defer h.admitting.Unlock()
	// A fresh list, not a cache: it must count the pod created a moment ago.
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy, LabelHelperClaimNamespace: op.ClaimNamespace})
	list, err := h.cfg.Client.CoreV1().Pods(h.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("counting the helper pods of namespace %s: %w", op.ClaimNamespace, err)
	}
	if n := len(list.Items); n >= h.cfg.PodsPerNamespace {
		return nil, fmt.Errorf("%w: namespace %s already has %d helper pods (--helper-pods-per-namespace %d); this %s waits until they end",
			ErrNamespaceBusy, op.ClaimNamespace, n, h.cfg.PodsPerNamespace, op.Request.Action)
	}
	pod, err := runner.Start(ctx, want, podrun.SameIntent)
	if err != nil && !errors.Is(err, podrun.ErrForeignPod) {
		return nil, fmt.Errorf("creating helper pod %s/%s on node %s: %w", want.Namespace, want.Name, op.Node, err)
	}
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Created helper pod", "pod", klog.KObj(pod), "action", op.Request.Action, "node", op.Node)
	}
	return pod, err
}

// unfinished is the answer for a pod that has not ended: in progress until
// its timeout (the kubelet counts activeDeadlineSeconds from the pod's
// start on the node; a little more from its creation covers the way
// there), then deleted and given up.
func (h *HelperDirs) unfinished(ctx context.Context, runner podrun.Runner, pod *corev1.Pod, desc string, bound helperBound) error {
	created := pod.CreationTimestamp.Time
	if created.IsZero() {
		// Not from an API server (which always sets it): count from now.
		created = h.now()
	}
	if h.now().Before(created.Add(bound.d + min(bound.d/10, 10*time.Second))) {
		klog.FromContext(ctx).V(4).Info("Helper pod still running", "pod", klog.KObj(pod), "phase", pod.Status.Phase)
		return fmt.Errorf("%w: %s has not ended yet (phase %q); looking again later", ErrInProgress, desc, pod.Status.Phase)
	}
	runner.Delete(ctx, pod)
	if podrun.NeverStarted(pod) {
		return fmt.Errorf("%s did not start within %s: %s", desc, bound, podrun.WhyNotStarted(pod))
	}
	return fmt.Errorf("%w: %s did not finish within %s", ErrOutcomeUnknown, desc, bound)
}

// HelperPodName is the deterministic name of a helper pod, at most 63
// characters: one volume never has two helper pods of one action at once.
// Without a PV name, a hash of the node and directory names it.
func HelperPodName(action, pv, node, rel string) string {
	if pv == "" {
		sum := sha256.Sum256([]byte(node + "\x00" + rel))
		pv = hex.EncodeToString(sum[:])[:16]
	}
	return podrun.ShortName("hostpath-" + action + "-" + pv)
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubeprov/external-storage/lib/podrun"
)

// Local-path's setup and teardown: scripts (the ConfigMap keys setup and
// teardown, files beside config.json) or commands of the helper image
// (setupCommand, teardownCommand), run in a pod built from the ConfigMap's
// helperPod.yaml on the volume's node, with local-path's inputs: the
// environment VOL_DIR, VOL_MODE, VOL_SIZE_BYTES and the arguments
// -p <dir> -s <bytes> -m <volume mode> -a create|delete.
//
// The ConfigMap's keys are claims, not facts: everything the pod runs (the
// script text itself, the command, the template's fields) is written into
// the pod spec, so that podrun.SameIntent compares it before a pod of the
// same name is trusted, and a ConfigMap edited while a pod runs cannot
// change what that pod does. The only host path the pod gets is the root
// the provisioner chose, mounted at the same path; VOL_DIR is that root and
// the directory pathpattern checked. A symbolic link below the root can
// therefore only lead into the container's own filesystem, never the host's.

// Files of local-path's ConfigMap, beside config.json.
const (
	FileSetup     = "setup"
	FileTeardown  = "teardown"
	FileHelperPod = "helperPod.yaml"
	// DefaultCmdTimeout is local-path's bound of a setup or teardown.
	DefaultCmdTimeout = 120 * time.Second
)

// Environment of a script, as local-path sets it.
const (
	EnvVolDir       = "VOL_DIR"
	EnvVolMode      = "VOL_MODE"
	EnvVolSizeBytes = "VOL_SIZE_BYTES"
)

// local-path's action names, passed with -a.
const (
	scriptActionCreate = "create"
	scriptActionDelete = "delete"
)

// Scripts is a checked setup and teardown, and the pod template they run in.
type Scripts struct {
	// Setup and Teardown are the command lines (a script run by /bin/sh
	// -c, or a command of the image), without local-path's arguments.
	Setup, Teardown []string
	// Timeout bounds each script's pod (cmdTimeoutSeconds).
	Timeout time.Duration
	// Template is helperPod.yaml, checked.
	Template *corev1.Pod
}

// scriptKeys are config.json's keys of local-path's scripts.
type scriptKeys struct {
	SetupCommand      *string `json:"setupCommand"`
	TeardownCommand   *string `json:"teardownCommand"`
	CmdTimeoutSeconds *int    `json:"cmdTimeoutSeconds"`
}

func (k scriptKeys) isZero() bool {
	return k.SetupCommand == nil && k.TeardownCommand == nil && k.CmdTimeoutSeconds == nil
}

// ErrScriptsNeedHelperPods: the configuration has scripts, which only run
// in helper pods.
var ErrScriptsNeedHelperPods = errors.New("local-path's setup and teardown run in helper pods")

// scriptsNeedHelperPods is the error of a configuration with scripts for a
// provisioner that makes directories itself.
func scriptsNeedHelperPods(s *Scripts) error {
	if s == nil {
		return nil
	}
	return errScriptsNeedHelperPods()
}

func errScriptsNeedHelperPods() error {
	return fmt.Errorf("%w: start the provisioner with --helper-pods (chart value mode: helper-pods; hostpath/deploy/helper-pods), "+
		"or remove setupCommand, teardownCommand, cmdTimeoutSeconds and the ConfigMap keys setup, teardown and helperPod.yaml to let it make and remove directories itself",
		ErrScriptsNeedHelperPods)
}

// loadScripts reads the script files beside the configuration file at path
// and checks them together with config.json's keys. It returns nil when
// none is set; without helperPods, any of them is refused as such.
func loadScripts(path string, keys scriptKeys, helperPods bool) (*Scripts, error) {
	files := map[string]string{}
	for _, name := range []string{FileSetup, FileTeardown, FileHelperPod} {
		data, err := os.ReadFile(filepath.Join(filepath.Dir(path), name))
		switch {
		case err == nil:
			files[name] = string(data)
		case !errors.Is(err, os.ErrNotExist):
			return nil, err
		}
	}
	if !helperPods && (!keys.isZero() || len(files) > 0) {
		return nil, errScriptsNeedHelperPods()
	}
	return parseScripts(keys, files)
}

// parseScripts checks config.json's script keys and the ConfigMap's files.
func parseScripts(keys scriptKeys, files map[string]string) (*Scripts, error) {
	if keys.isZero() && len(files) == 0 {
		return nil, nil
	}
	var errs []error
	s := &Scripts{Timeout: DefaultCmdTimeout}
	if n := keys.CmdTimeoutSeconds; n != nil {
		if *n <= 0 {
			errs = append(errs, fmt.Errorf("cmdTimeoutSeconds %d must be positive", *n))
		}
		s.Timeout = time.Duration(*n) * time.Second
	}
	// A command takes precedence over a script, as in local-path.
	for _, step := range []struct {
		file    string
		key     string
		command *string
		into    *[]string
	}{
		{FileSetup, "setupCommand", keys.SetupCommand, &s.Setup},
		{FileTeardown, "teardownCommand", keys.TeardownCommand, &s.Teardown},
	} {
		switch script, ok := files[step.file]; {
		case step.command != nil && *step.command != "":
			if !filepath.IsAbs(*step.command) {
				errs = append(errs, fmt.Errorf("%s %q must be the absolute path of a program in the helper image", step.key, *step.command))
			}
			*step.into = []string{*step.command}
		case ok && strings.TrimSpace(script) != "":
			// The text itself, not a file of a ConfigMap volume: see the
			// package comment above. $0 names the script in its messages.
			*step.into = []string{"/bin/sh", "-c", script, step.file}
		default:
			errs = append(errs, fmt.Errorf("no %s: give the ConfigMap key %s (a script) or config.json's %s (a program of the helper image)", step.file, step.file, step.key))
		}
	}
	if tmpl, ok := files[FileHelperPod]; !ok {
		errs = append(errs, fmt.Errorf("no %s: the scripts run in the image its first container names (the provisioner's own image has no shell); add the ConfigMap key %s",
			FileHelperPod, FileHelperPod))
	} else {
		pod, err := parseHelperTemplate(tmpl)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", FileHelperPod, err))
		}
		s.Template = pod
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// What helperPod.yaml may set; every other field is refused by name. The
// rest of the pod is the provisioner's: the command and its inputs, the
// node, the one host path (the chosen root), the service account (none),
// the restart policy and the deadline.
var (
	templateFields          = []string{"apiVersion", "kind", "metadata", "spec"}
	templateMetadataFields  = []string{"name", "namespace", "labels", "annotations"}
	templateSpecFields      = []string{"containers", "priorityClassName", "tolerations", "nodeSelector", "imagePullSecrets"}
	templateContainerFields = []string{"name", "image", "imagePullPolicy", "resources", "securityContext", "env"}
	// refusedWhy explains the refusals people meet.
	refusedWhy = map[string]string{
		"volumes":      "the pod gets exactly one host path, the root the volume is made under; scripts that keep state elsewhere on the host are not supported",
		"volumeMounts": "the pod gets exactly one host path, the root the volume is made under, mounted at its own path",
		"command":      "the provisioner sets it: the setup or teardown script, or setupCommand/teardownCommand",
		"args":         "the provisioner sets local-path's -p, -s, -m and -a",
		"nodeName":     "the provisioner pins the pod to the volume's node",
		"hostNetwork":  "a script needs no host namespace", "hostPID": "a script needs no host namespace", "hostIPC": "a script needs no host namespace",
		"serviceAccountName": "helper pods get no API credentials",
		"initContainers":     "the first container runs the script; there is nothing else to run",
		"securityContext":    "set it on the container: it applies to the script's container and nothing else",
	}
)

// parseHelperTemplate reads helperPod.yaml: a Pod with one container, the
// one that runs the scripts, limited to the fields above.
func parseHelperTemplate(s string) (*corev1.Pod, error) {
	raw, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return nil, errors.New("must be a Pod (a YAML mapping)")
	}
	errs := templateFieldErrors(top)
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(s), &pod); err != nil {
		errs = append(errs, fmt.Errorf("not a valid Pod: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if v := pod.APIVersion; v != "" && v != "v1" || pod.Kind != "" && pod.Kind != "Pod" {
		return nil, fmt.Errorf("apiVersion %q, kind %q: it must be a v1 Pod", pod.APIVersion, pod.Kind)
	}
	return &pod, errors.Join(templateContainerErrors(pod.Spec.Containers[0])...)
}

// templateFieldErrors names each field of the template (top, its JSON
// form) outside the fields above, and a number of containers other than
// one.
func templateFieldErrors(top map[string]json.RawMessage) []error {
	errs := onlyFields("", top, templateFields)
	var meta, spec map[string]json.RawMessage
	_ = json.Unmarshal(top["metadata"], &meta)
	_ = json.Unmarshal(top["spec"], &spec)
	errs = append(errs, onlyFields("metadata.", meta, templateMetadataFields)...)
	errs = append(errs, onlyFields("spec.", spec, templateSpecFields)...)
	var containers []map[string]json.RawMessage
	_ = json.Unmarshal(spec["containers"], &containers)
	if len(containers) != 1 {
		errs = append(errs, fmt.Errorf("spec.containers has %d containers, want exactly one: it runs the scripts", len(containers)))
	}
	for i, c := range containers {
		errs = append(errs, onlyFields(fmt.Sprintf("spec.containers[%d].", i), c, templateContainerFields)...)
	}
	return errs
}

// templateContainerErrors refuses a script container c without an image,
// or with an environment variable that reads from the API or that the
// provisioner sets.
func templateContainerErrors(c corev1.Container) []error {
	var errs []error
	if c.Image == "" {
		errs = append(errs, errors.New("spec.containers[0].image is empty: name an image with /bin/sh (e.g. busybox) or with setupCommand and teardownCommand"))
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			errs = append(errs, fmt.Errorf("spec.containers[0].env %s: valueFrom is not supported (helper pods read no Secrets or API fields): give a value", e.Name))
		}
		if e.Name == EnvVolDir || e.Name == EnvVolMode || e.Name == EnvVolSizeBytes {
			errs = append(errs, fmt.Errorf("spec.containers[0].env %s: the provisioner sets it", e.Name))
		}
	}
	return errs
}

// onlyFields names each key of m outside allowed, with why when it is a
// field people try.
func onlyFields(prefix string, m map[string]json.RawMessage, allowed []string) []error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if slices.Contains(allowed, k) {
			continue
		}
		why := refusedWhy[k]
		if why == "" {
			why = "helperPod.yaml may set only " + strings.Join(allowed, ", ") + " here"
		}
		errs = append(errs, fmt.Errorf("%s%s is not supported: %s", prefix, k, why))
	}
	return errs
}

// ErrNotShellWord: a path for a script holds a character a shell treats
// specially when the script expands the path unquoted.
var ErrNotShellWord = errors.New("not one shell word")

// scriptWord is the rule for a path handed to an administrator's setup or
// teardown script (VOL_DIR and -p): it must stay one word that no
// unquoted expansion can split, glob or end ("rm -rf $VOL_DIR", "mkdir -p
// ${VOL_DIR}", as local-path users' scripts commonly write). So it holds
// only ASCII letters, digits and . _ - + @ : , = % and the / between
// components; a space, tab, newline, * ? [ ] ' " $ ` \ ; & | < > ( ) { }
// # ! ~ ^ or any other byte is refused, naming it. Trusted source: none of
// the claim's values (names, labels, annotations are the tenant's) nor the
// directory recorded on a PV (editable): each is checked here before a
// script gets it.
func scriptWord(s string) error {
	for _, c := range s {
		if !scriptWordChar(c) {
			return fmt.Errorf("%w: it contains %q, which a script that expands the path unquoted would split or expand (for example rm -rf $VOL_DIR); "+
				"with setup and teardown scripts, a path may hold only letters, digits, / and . _ - + @ : , = %%", ErrNotShellWord, c)
		}
	}
	return nil
}

func scriptWordChar(c rune) bool {
	return c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/._-+@:,=%", c))
}

// chooseRoot is the root a script makes the volume under: local-path picks
// any of the node's paths; this pick is stable for a volume, so that a
// retried setup builds the very same pod.
func chooseRoot(roots []string, pv string) string {
	var h uint32
	for _, b := range []byte(pv) {
		h = h*31 + uint32(b)
	}
	return roots[int(h%uint32(len(roots)))] //nolint:gosec // len(roots) > 0 and small
}

// scriptPod turns pod (the provisioner's helper pod for op) into the pod
// that runs op's script: the template's container, with the provisioner's
// command, inputs and mount.
func (s *Scripts) scriptPod(pod *corev1.Pod, op HelperOp, root string) {
	t := s.Template.DeepCopy()
	req := op.Request
	command, action := s.Setup, scriptActionCreate
	if req.Action == HelperRemove {
		command, action = s.Teardown, scriptActionDelete
	}
	dir := filepath.Join(root, req.Rel)
	c := t.Spec.Containers[0]
	c.Name = HelperContainerName
	c.Command = slices.Clone(command)
	c.Args = []string{"-p", dir, "-s", strconv.FormatInt(req.SizeBytes, 10), "-m", string(corev1.PersistentVolumeFilesystem), "-a", action}
	c.Env = append(c.Env,
		corev1.EnvVar{Name: EnvVolDir, Value: dir},
		corev1.EnvVar{Name: EnvVolMode, Value: string(corev1.PersistentVolumeFilesystem)},
		corev1.EnvVar{Name: EnvVolSizeBytes, Value: strconv.FormatInt(req.SizeBytes, 10)})
	// The script's output is its message: the event quotes it.
	c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	if c.SecurityContext == nil {
		// Root with the powers the built-in helper has, plus CHOWN for
		// scripts that set owners; a writable filesystem for their
		// temporary files. Anything more, the template asks for.
		sc := HelperSecurityContext()
		sc.ReadOnlyRootFilesystem = ptr.To(false)
		sc.Capabilities.Add = append(sc.Capabilities.Add, "CHOWN")
		c.SecurityContext = sc
	}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "root-0", MountPath: root}}
	// First, the built-in helper checks the path for links with
	// lib/nofollow: a script follows them (mkdir -p, rm -rf), and one
	// through a parent could reach another volume's directory. Before a
	// setup, it also applies mustBeEmpty's rule, as it does when it makes
	// the directory itself.
	check := pod.Spec.Containers[0]
	check.Name = checkContainerName
	check.Args = HelperRequest{Action: HelperCheck, Roots: []string{root}, Rel: req.Rel, MustBeEmpty: req.MustBeEmpty}.Args()
	check.VolumeMounts = []corev1.VolumeMount{{Name: "root-0", MountPath: root, ReadOnly: true}}
	pod.Spec.InitContainers = []corev1.Container{check}
	pod.Spec.Volumes = []corev1.Volume{{Name: "root-0", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: root, Type: ptr.To(corev1.HostPathDirectoryOrCreate)},
	}}}
	pod.Spec.Containers = []corev1.Container{c}
	pod.Spec.ActiveDeadlineSeconds = ptr.To(int64(s.Timeout.Seconds()))
	pod.Spec.PriorityClassName = t.Spec.PriorityClassName
	pod.Spec.ImagePullSecrets = t.Spec.ImagePullSecrets
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, t.Spec.Tolerations...)
	for k, v := range t.Spec.NodeSelector {
		if pod.Spec.NodeSelector == nil {
			pod.Spec.NodeSelector = map[string]string{}
		}
		pod.Spec.NodeSelector[k] = v
	}
	// The template's labels and annotations, under the provisioner's own.
	for k, v := range t.Labels {
		if _, ours := pod.Labels[k]; !ours {
			pod.Labels[k] = v
		}
	}
	if len(t.Annotations) > 0 {
		pod.Annotations = maps.Clone(t.Annotations)
	}
}

// AnnSetupFailure, on the teardown pod that runs after a failed setup, is
// why setup failed: the attempt that finds the teardown ended reports it.
const AnnSetupFailure = "hostpath.kubeprov.io/setup-failure"

// checkContainerName is the init container of a script's pod: the
// built-in helper's path check.
const checkContainerName = "check-path"

// checkFailed is the refusal of a script pod's path check, if it refused.
func checkFailed(pod *corev1.Pod, desc string) error {
	for _, cs := range pod.Status.InitContainerStatuses {
		t := cs.State.Terminated
		if cs.Name != checkContainerName || t == nil || t.ExitCode == 0 {
			continue
		}
		var res HelperResult
		if json.Unmarshal([]byte(strings.TrimSpace(t.Message)), &res) != nil || res.Error == "" {
			res.Error = podrun.Truncate(t.Message)
		}
		return fmt.Errorf("%s: the path check before the script refused the path, and the script did not run: %s", desc, podrun.Truncate(res.Error))
	}
	return nil
}

// errScriptFailed: a setup or teardown ran and failed (or was killed at
// its deadline).
var errScriptFailed = errors.New("script failed")

// helperBound is how long a helper pod may take, and the setting that
// says so (for messages).
type helperBound struct {
	d    time.Duration
	what string
}

func (b helperBound) String() string { return b.what + " " + b.d.String() }

// bound is op's pod's bound: cmdTimeoutSeconds for a script, else
// --helper-timeout.
func (h *HelperDirs) bound(op HelperOp) helperBound {
	if op.Scripts != nil {
		return helperBound{op.Scripts.Timeout, "cmdTimeoutSeconds"}
	}
	return helperBound{h.cfg.Timeout, "--helper-timeout"}
}

// scriptResult reads an ended script pod: its exit code is the answer, its
// output (the termination message falls back to the log's tail) the
// reason.
func scriptResult(pod *corev1.Pod, t *corev1.ContainerStateTerminated, desc string, op HelperOp, bound helperBound) (*HelperResult, error) {
	if pod.Status.Phase == corev1.PodSucceeded && t.ExitCode == 0 {
		return &HelperResult{Root: op.Root, SetupFailure: pod.Annotations[AnnSetupFailure]}, nil
	}
	out := podrun.Truncate(t.Message)
	if out == "" {
		out = "no output"
	}
	if pod.Status.Reason == "DeadlineExceeded" {
		return nil, fmt.Errorf("%w: %s was stopped: it did not finish within %s; its output: %s", errScriptFailed, desc, bound, out)
	}
	return nil, fmt.Errorf("%w: %s exited with code %d: %s", errScriptFailed, desc, t.ExitCode, out)
}

// createWithScripts runs the setup script under the root chosen for the
// volume. A failed setup is followed by the teardown, as the directory may
// be half made: the claim's next attempt finds that teardown, reports both
// outcomes, and a later one runs setup again.
func (h *HelperDirs) createWithScripts(ctx context.Context, op HelperOp, s *Scripts) (string, error) {
	if err := scriptWord(op.Request.Rel); err != nil {
		return "", fmt.Errorf("refusing to run the setup script on %q: %w", op.Request.Rel, err)
	}
	op.Scripts, op.Root = s, chooseRoot(op.Request.Roots, op.PV)
	teardown := op
	teardown.Request = HelperRequest{Action: HelperRemove, Roots: []string{op.Root}, Rel: op.Request.Rel}
	name := HelperPodName(HelperRemove, op.PV, op.Node, op.Request.Rel)
	_, err := h.cfg.Client.CoreV1().Pods(h.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		res, err := h.run(ctx, teardown)
		if err != nil {
			if errors.Is(err, ErrInProgress) {
				return "", err
			}
			return "", fmt.Errorf("the setup script failed and so did the teardown that followed, so the directory may remain: %w", err)
		}
		why := res.SetupFailure
		if why == "" {
			why = "(reason not recorded)"
		}
		return "", fmt.Errorf("%s; the teardown script ran after it", why)
	case !apierrors.IsNotFound(err):
		return "", err
	}
	// A setup that failed, or was given up at its bound (its pod lost or
	// deleted: ErrOutcomeUnknown), may have done part of its work.
	_, err = h.run(ctx, op)
	if !errors.Is(err, errScriptFailed) && !errors.Is(err, ErrOutcomeUnknown) {
		return op.Root, err
	}
	teardown.SetupFailure = podrun.Truncate(err.Error())
	if _, err := h.run(ctx, teardown); !errors.Is(err, ErrInProgress) {
		return "", fmt.Errorf("the setup script failed (%s), and starting the teardown after it failed too, so the directory may remain: %w", teardown.SetupFailure, err)
	}
	return "", fmt.Errorf("%w: %s; the teardown script runs to remove what it made", ErrInProgress, teardown.SetupFailure)
}

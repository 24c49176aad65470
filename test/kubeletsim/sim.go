// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kubeletsim plays scheduler and kubelet for tests on a control plane
// that has neither: it binds pending pods to the Nodes it manages (honoring
// nodeSelector), runs each pod's init containers (one after the other, to
// their end) and then its container as local processes with the pod's
// environment, secret and hostPath volumes, service account token and
// termination message file, enforces activeDeadlineSeconds, and reports the
// outcome through the pod's status, as a kubelet does. Everything the code
// under test does with pods goes through the real API server.
//
// It is a fake, for tests of what code does with pods through the API (which
// spec it creates, how it reads statuses), not evidence that pods run: there
// is no container isolation, no securityContext or Pod Security enforcement,
// no image pull (an unknown image waits as ErrImagePull forever, while a
// real kubelet fails the pod at its activeDeadlineSeconds). What only a real
// node shows is tested on real nodes (package cluster, test/e2e).
//
// Images are programs: a test maps each image name to the command (and ENV)
// the image would have. Paths inside the "container" (mount paths, the
// termination message path, the service account directory) live under a
// private root directory per pod; environment values that name such a path
// are rewritten to the local one, and KUBELETSIM_ROOT holds the root for
// scripts that use well-known paths ("${KUBELETSIM_ROOT:-}/var/run/...").
package kubeletsim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

const (
	// RootEnv holds the pod's private root directory.
	RootEnv = "KUBELETSIM_ROOT"
	// saDir is where a kubelet mounts the service account token.
	saDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	// Limits a kubelet applies to termination messages.
	maxTerminationMessage = 4096
	fallbackLogBytes      = 2048
	fallbackLogLines      = 80
	// killedExitCode is what a runtime reports for SIGKILL.
	killedExitCode = 137
)

// Image is what a container image would carry: its entrypoint and ENV.
type Image struct {
	Command []string
	Env     []string
}

// Run records one pod that ran to the end.
type Run struct {
	// Pod is the pod as it was when its container started.
	Pod *corev1.Pod
	// Node is where it ran.
	Node string
	// ExitCode and Message are the container's terminated state.
	ExitCode int32
	Message  string
	// DeadlineExceeded tells that activeDeadlineSeconds killed it.
	DeadlineExceeded bool
}

// Sim is a scheduler and kubelet for the Nodes added with AddNode.
type Sim struct {
	client kubernetes.Interface
	config *rest.Config
	images map[string]Image
	dir    string

	pods  corelisters.PodLister
	nodes corelisters.NodeLister
	queue workqueue.TypedRateLimitingInterface[string]

	mu      sync.Mutex
	managed sets.Set[string]
	running map[types.UID]*process
	runs    []Run
	wg      sync.WaitGroup
}

type process struct {
	cmd    *exec.Cmd
	killed bool // by deletion, not by the deadline
}

// New returns a simulator using cfg (an admin config) that runs images from
// the given map, keeping each pod's files under dir.
func New(cfg *rest.Config, dir string, images map[string]Image) (*Sim, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Sim{
		client:  client,
		config:  rest.CopyConfig(cfg),
		images:  images,
		dir:     dir,
		managed: sets.New[string](),
		running: map[types.UID]*process{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 2*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "kubeletsim"}),
	}, nil
}

// AddNode creates a Ready Node that the simulator schedules pods to and runs
// them on. Pods waiting for a node are looked at again.
func (s *Sim) AddNode(ctx context.Context, name string, nodeLabels map[string]string) error {
	l := map[string]string{"kubernetes.io/hostname": name}
	for k, v := range nodeLabels {
		l[k] = v
	}
	node, err := s.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	if _, err := s.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("marking node %s Ready: %w", name, err)
	}
	s.mu.Lock()
	s.managed.Insert(name)
	s.mu.Unlock()
	if s.pods != nil {
		if pods, err := s.pods.List(labels.Everything()); err == nil {
			for _, p := range pods {
				if p.Spec.NodeName == "" {
					s.enqueue(p)
				}
			}
		}
	}
	return nil
}

// Runs returns the pods that ran to the end so far.
func (s *Sim) Runs() []Run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.runs)
}

// Run works until ctx ends, then kills the processes it started and waits for them.
func (s *Sim) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(s.client, 0)
	podInformer := factory.Core().V1().Pods()
	s.pods = podInformer.Lister()
	s.nodes = factory.Core().V1().Nodes().Lister()
	_, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.enqueue(obj) },
		UpdateFunc: func(_, obj any) { s.enqueue(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				s.kill(p.UID)
			}
		},
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.Informer().HasSynced, factory.Core().V1().Nodes().Informer().HasSynced) {
		return fmt.Errorf("kubeletsim: caches did not sync: %w", ctx.Err())
	}
	var workers sync.WaitGroup
	for range 2 {
		workers.Go(func() {
			for s.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	s.queue.ShutDown()
	workers.Wait()
	s.mu.Lock()
	for uid := range s.running {
		s.killLocked(uid)
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

func (s *Sim) enqueue(obj any) {
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		s.queue.Add(key)
	}
}

func (s *Sim) processNext(ctx context.Context) bool {
	key, quit := s.queue.Get()
	if quit {
		return false
	}
	defer s.queue.Done(key)
	if err := s.sync(ctx, key); err != nil {
		if ctx.Err() == nil {
			klog.FromContext(ctx).V(2).Info("kubeletsim: retrying pod", "pod", key, "err", err)
			s.queue.AddRateLimited(key)
		}
		return true
	}
	s.queue.Forget(key)
	return true
}

// sync acts on one pod: schedule it, start it, or finish its deletion.
func (s *Sim) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := s.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	ours := s.managed.Has(pod.Spec.NodeName)
	_, running := s.running[pod.UID]
	s.mu.Unlock()
	switch {
	case pod.DeletionTimestamp != nil:
		if !ours {
			return nil
		}
		// What a kubelet does for a pod being deleted gracefully: stop its
		// containers, then remove the object.
		s.kill(pod.UID)
		uid := pod.UID
		err := s.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return nil
	case pod.Spec.NodeName == "":
		return s.schedule(ctx, pod)
	case ours && !running && pod.Status.StartTime == nil:
		return s.start(ctx, pod)
	}
	return nil
}

// schedule binds pod to the first managed Ready node (by name) matching its
// nodeSelector, or reports it unschedulable as the scheduler does.
func (s *Sim) schedule(ctx context.Context, pod *corev1.Pod) error {
	s.mu.Lock()
	names := sets.List(s.managed)
	s.mu.Unlock()
	sel := labels.SelectorFromSet(pod.Spec.NodeSelector)
	for _, n := range names {
		node, err := s.nodes.Get(n)
		if err != nil {
			continue
		}
		if sel.Matches(labels.Set(node.Labels)) {
			binding := &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
				Target:     corev1.ObjectReference{Kind: "Node", Name: n},
			}
			err := s.client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				return nil
			}
			return err
		}
	}
	msg := fmt.Sprintf("0/%d nodes are available: %d node(s) didn't match Pod's node affinity/selector.", len(names), len(names))
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message == msg {
			return nil // already said; writing again would only wake us up again
		}
	}
	return s.updateStatus(ctx, pod, func(st *corev1.PodStatus) {
		setCondition(st, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg})
	})
}

// start prepares the pod's files and environment, runs its init
// containers, and starts its container.
func (s *Sim) start(ctx context.Context, pod *corev1.Pod) error {
	if len(pod.Spec.Containers) != 1 {
		return s.fail(ctx, pod, "kubeletsim runs pods with exactly one container")
	}
	c := pod.Spec.Containers[0]
	if _, ok := s.images[c.Image]; !ok {
		return s.wait(ctx, pod, "ErrImagePull", fmt.Sprintf("image %q is not known to the simulator", c.Image))
	}
	root := filepath.Join(s.dir, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	inits, ok, err := s.runInitContainers(ctx, pod, root)
	if err != nil || !ok {
		return err
	}
	argv, env, localTerm, err := s.prepare(ctx, pod, c, root)
	if err != nil {
		var wait waitingError
		if errors.As(err, &wait) {
			return s.wait(ctx, pod, "ContainerCreating", wait.Error())
		}
		return s.fail(ctx, pod, err.Error())
	}
	logFile, err := os.Create(filepath.Join(filepath.Dir(root), "container.log"))
	if err != nil {
		return err
	}
	now := metav1.Now()
	started := pod.DeepCopy()
	if err := s.updateStatus(ctx, pod, func(st *corev1.PodStatus) {
		st.Phase = corev1.PodRunning
		st.StartTime = &now
		st.HostIP = "127.0.0.1"
		st.InitContainerStatuses = inits
		st.ContainerStatuses = []corev1.ContainerStatus{{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}}
	}); err != nil {
		_ = logFile.Close()
		return err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return s.fail(ctx, pod, fmt.Sprintf("starting %v: %v", argv, err))
	}
	p := &process{cmd: cmd}
	s.mu.Lock()
	s.running[pod.UID] = p
	s.mu.Unlock()
	s.wg.Go(func() {
		defer func() { _ = logFile.Close() }()
		s.supervise(context.WithoutCancel(ctx), started, p, now.Time, localTerm, logFile.Name())
	})
	return nil
}

// waitingError is a container that cannot start yet (its volumes).
type waitingError struct{ error }

// prepare makes container c's volumes and termination message file under
// the pod's root, and returns its command line, environment and the local
// path of that file.
func (s *Sim) prepare(ctx context.Context, pod *corev1.Pod, c corev1.Container, root string) (argv, env []string, localTerm string, err error) {
	img := s.images[c.Image]
	mounts, err := s.mountVolumes(ctx, pod, c, root)
	if err != nil {
		return nil, nil, "", waitingError{err}
	}
	termPath := c.TerminationMessagePath
	if termPath == "" {
		termPath = corev1.TerminationMessagePathDefault
	}
	localTerm = filepath.Join(root, termPath)
	if err := os.MkdirAll(filepath.Dir(localTerm), 0o755); err != nil {
		return nil, nil, "", err
	}
	if err := os.WriteFile(localTerm, nil, 0o666); err != nil {
		return nil, nil, "", err
	}
	mounts[termPath] = localTerm
	env, err = s.environment(pod, c, img, root, mounts)
	if err != nil {
		return nil, nil, "", err
	}
	argv = slices.Concat(img.Command, c.Args)
	if len(c.Command) > 0 {
		argv = slices.Concat(c.Command, c.Args)
	}
	if len(argv) == 0 {
		return nil, nil, "", errors.New("no command: the image has no entrypoint and the container no command")
	}
	return argv, env, localTerm, nil
}

// runInitContainers runs the pod's init containers one after the other,
// each to its end, as a kubelet does before it starts the containers, and
// returns their statuses. A failed one fails the pod (restartPolicy Never,
// as for every pod here) and ends with ok false; so does one that cannot
// start. activeDeadlineSeconds is not enforced on them: keep them short.
func (s *Sim) runInitContainers(ctx context.Context, pod *corev1.Pod, root string) (statuses []corev1.ContainerStatus, ok bool, err error) {
	for _, c := range pod.Spec.InitContainers {
		if _, known := s.images[c.Image]; !known {
			return nil, false, s.wait(ctx, pod, "ErrImagePull", fmt.Sprintf("image %q of init container %s is not known to the simulator", c.Image, c.Name))
		}
		argv, env, localTerm, err := s.prepare(ctx, pod, c, root)
		if err != nil {
			return nil, false, s.fail(ctx, pod, fmt.Sprintf("init container %s: %v", c.Name, err))
		}
		started := metav1.Now()
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, root, &out, &out
		code := int32(0)
		if err := cmd.Run(); err != nil {
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				return nil, false, s.fail(ctx, pod, fmt.Sprintf("starting init container %s %v: %v", c.Name, argv, err))
			}
			code = int32(max(exit.ExitCode(), 1))
		}
		msg := readTail(localTerm, maxTerminationMessage, 0)
		if msg == "" && code != 0 && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
			msg = tail(out.Bytes(), fallbackLogBytes, fallbackLogLines)
		}
		reason := "Completed"
		if code != 0 {
			reason = "Error"
		}
		statuses = append(statuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Started: ptr.To(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: reason, Message: msg, StartedAt: started, FinishedAt: metav1.Now(),
			}},
		})
		if code == 0 {
			continue
		}
		main := pod.Spec.Containers[0]
		err = s.updateStatus(ctx, pod, func(st *corev1.PodStatus) {
			st.Phase = corev1.PodFailed
			st.StartTime = &started
			st.InitContainerStatuses = statuses
			st.ContainerStatuses = []corev1.ContainerStatus{{
				Name: main.Name, Image: main.Image, Started: ptr.To(false),
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}},
			}}
		})
		s.mu.Lock()
		s.runs = append(s.runs, Run{Pod: pod, Node: pod.Spec.NodeName, ExitCode: code, Message: msg})
		s.mu.Unlock()
		return nil, false, err
	}
	return statuses, true, nil
}

// supervise waits for the container, enforcing activeDeadlineSeconds, and
// writes its final status.
func (s *Sim) supervise(ctx context.Context, pod *corev1.Pod, p *process, startedAt time.Time, termFile, logFile string) {
	logger := klog.FromContext(ctx)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	var deadline <-chan time.Time
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil {
		t := time.NewTimer(time.Until(startedAt.Add(time.Duration(*d) * time.Second)))
		defer t.Stop()
		deadline = t.C
	}
	exceeded := false
	var waitErr error
	select {
	case waitErr = <-done:
	case <-deadline:
		exceeded = true
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		waitErr = <-done
	}
	s.mu.Lock()
	delete(s.running, pod.UID)
	killed := p.killed
	s.mu.Unlock()
	code := int32(0)
	if exit := (*exec.ExitError)(nil); errors.As(waitErr, &exit) {
		code = int32(exit.ExitCode())
		if code < 0 { // killed by a signal
			code = killedExitCode
		}
	}
	if killed {
		return // the pod is being deleted: no status to report
	}
	msg := readTail(termFile, maxTerminationMessage, 0)
	c := pod.Spec.Containers[0]
	if msg == "" && code != 0 && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		msg = readTail(logFile, fallbackLogBytes, fallbackLogLines)
	}
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	finished := metav1.Now()
	err := s.updateStatus(ctx, pod, func(st *corev1.PodStatus) {
		st.Phase = corev1.PodSucceeded
		if code != 0 || exceeded {
			st.Phase = corev1.PodFailed
		}
		if exceeded {
			st.Reason = "DeadlineExceeded"
			st.Message = "Pod was active on the node longer than the specified deadline"
		}
		st.ContainerStatuses = []corev1.ContainerStatus{{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Started: ptr.To(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: reason, Message: msg,
				StartedAt: metav1.NewTime(startedAt), FinishedAt: finished,
			}},
		}}
	})
	if err != nil {
		logger.Error(err, "kubeletsim: reporting pod status failed", "pod", klog.KObj(pod))
	}
	s.mu.Lock()
	s.runs = append(s.runs, Run{Pod: pod, Node: pod.Spec.NodeName, ExitCode: code, Message: msg, DeadlineExceeded: exceeded})
	s.mu.Unlock()
}

// mountVolumes materializes the container's volume mounts and returns
// mount path -> local path.
func (s *Sim) mountVolumes(ctx context.Context, pod *corev1.Pod, c corev1.Container, root string) (map[string]string, error) {
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			return nil, fmt.Errorf("volume %q of mount %s is not defined", m.Name, m.MountPath)
		}
		local := filepath.Join(root, m.MountPath)
		switch {
		case v.Secret != nil:
			secret, err := s.client.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("MountVolume.SetUp failed for volume %q: %w", m.Name, err)
			}
			mode := os.FileMode(ptr.Deref(v.Secret.DefaultMode, 0o644))
			if err := os.MkdirAll(local, 0o755); err != nil {
				return nil, err
			}
			for k, data := range secret.Data {
				if err := os.WriteFile(filepath.Join(local, k), data, mode); err != nil {
					return nil, err
				}
			}
		case v.HostPath != nil:
			// The simulated node is this machine.
			local = v.HostPath.Path
			if ptr.Deref(v.HostPath.Type, "") == corev1.HostPathDirectoryOrCreate {
				if err := os.MkdirAll(local, 0o755); err != nil {
					return nil, err
				}
			}
		case v.EmptyDir != nil:
			if err := os.MkdirAll(local, 0o777); err != nil {
				return nil, err
			}
		case isTokenVolume(v):
			// What the ServiceAccount admission adds.
			if err := s.writeToken(ctx, pod, local); err != nil {
				return nil, fmt.Errorf("service account token for %s: %w", pod.Spec.ServiceAccountName, err)
			}
		default:
			return nil, fmt.Errorf("volume %q: kubeletsim supports secret, hostPath, emptyDir and service account token volumes only", m.Name)
		}
		mounts[m.MountPath] = local
	}
	// Without the admission, the token is mounted where it would put it.
	if _, mounted := mounts[saDir]; !mounted && pod.Spec.ServiceAccountName != "" && ptr.Deref(pod.Spec.AutomountServiceAccountToken, true) {
		local := filepath.Join(root, saDir)
		if err := s.writeToken(ctx, pod, local); err != nil {
			return nil, fmt.Errorf("service account token for %s: %w", pod.Spec.ServiceAccountName, err)
		}
		mounts[saDir] = local
	}
	return mounts, nil
}

// isTokenVolume reports whether v is a projected volume with a service
// account token: the token, CA and namespace writeToken writes.
func isTokenVolume(v corev1.Volume) bool {
	if v.Projected == nil {
		return false
	}
	return slices.ContainsFunc(v.Projected.Sources, func(p corev1.VolumeProjection) bool { return p.ServiceAccountToken != nil })
}

// writeToken does what the kubelet's projected token volume does: a token
// bound to the pod, the cluster CA and the namespace.
func (s *Sim) writeToken(ctx context.Context, pod *corev1.Pod, dir string) error {
	tr, err := s.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](3600),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	ca := s.config.CAData
	if len(ca) == 0 && s.config.CAFile != "" {
		if ca, err = os.ReadFile(s.config.CAFile); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": ca, "namespace": []byte(pod.Namespace)}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// environment is the container's environment: the image's ENV, the
// container's env (path values rewritten to local paths), the service
// variables a kubelet adds, PATH if the image sets none, and RootEnv.
func (s *Sim) environment(_ *corev1.Pod, c corev1.Container, img Image, root string, mounts map[string]string) ([]string, error) {
	paths := make([]string, 0, len(mounts))
	for p := range mounts {
		paths = append(paths, p)
	}
	// Longest first, so that /a/b wins over /a.
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	rewrite := func(v string) string {
		for _, p := range paths {
			if v == p || strings.HasPrefix(v, p+"/") {
				return mounts[p] + strings.TrimPrefix(v, p)
			}
		}
		return v
	}
	env := map[string]string{}
	for _, kv := range img.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if _, ok := env["PATH"]; !ok {
		env["PATH"] = os.Getenv("PATH")
	}
	if u, err := url.Parse(s.config.Host); err == nil {
		env["KUBERNETES_SERVICE_HOST"] = u.Hostname()
		env["KUBERNETES_SERVICE_PORT"] = u.Port()
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			return nil, fmt.Errorf("env %s: kubeletsim supports plain values only", e.Name)
		}
		env[e.Name] = rewrite(e.Value)
	}
	env[RootEnv] = root
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// wait reports the container as waiting (image pull, volume setup), as a
// kubelet does for a pod it cannot start yet.
func (s *Sim) wait(ctx context.Context, pod *corev1.Pod, reason, msg string) error {
	c := pod.Spec.Containers[0]
	now := metav1.Now()
	return s.updateStatus(ctx, pod, func(st *corev1.PodStatus) {
		st.Phase = corev1.PodPending
		// Accepted by the node (so not started again), but not running.
		st.StartTime = &now
		st.ContainerStatuses = []corev1.ContainerStatus{{
			Name: c.Name, Image: c.Image, Started: ptr.To(false),
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
		}}
	})
}

// fail reports a pod that cannot run at all.
func (s *Sim) fail(ctx context.Context, pod *corev1.Pod, msg string) error {
	return s.updateStatus(ctx, pod, func(st *corev1.PodStatus) {
		st.Phase = corev1.PodFailed
		st.Reason = "KubeletsimUnsupported"
		st.Message = msg
	})
}

func (s *Sim) updateStatus(ctx context.Context, pod *corev1.Pod, mutate func(*corev1.PodStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := s.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if current.UID != pod.UID {
			return nil
		}
		mutate(&current.Status)
		_, err = s.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, current, metav1.UpdateOptions{})
		return err
	})
}

func (s *Sim) kill(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked(uid)
}

func (s *Sim) killLocked(uid types.UID) {
	if p, ok := s.running[uid]; ok && !p.killed {
		p.killed = true
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

func setCondition(st *corev1.PodStatus, c corev1.PodCondition) {
	c.LastTransitionTime = metav1.Now()
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

// readTail returns the end of a file: at most maxBytes and, if maxLines > 0,
// at most maxLines lines.
func readTail(path string, maxBytes, maxLines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return tail(data, maxBytes, maxLines)
}

// tail is the end of data: at most maxBytes and, if maxLines > 0, at most
// maxLines lines.
func tail(data []byte, maxBytes, maxLines int) string {
	if len(data) > maxBytes {
		data = data[len(data)-maxBytes:]
	}
	if maxLines > 0 {
		lines := bytes.SplitAfter(data, []byte("\n"))
		if len(lines) > maxLines {
			data = bytes.Join(lines[len(lines)-maxLines:], nil)
		}
	}
	return string(data)
}

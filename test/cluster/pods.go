// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeprov/external-storage/test/framework"
)

// DefaultStartTimeout bounds Start in RunMain: it covers cold builds of the
// control plane and the node components.
const DefaultStartTimeout = 40 * time.Minute

// RunMain is for TestMain: it starts a cluster, hands it to set, runs the
// tests, then opts.AfterTests, and stops the cluster, also on SIGINT/SIGTERM.
// If the cluster cannot start, the package fails under CI=true and is
// skipped elsewhere (framework.MainUnavailable). It returns the exit code.
func RunMain(m *testing.M, opts Options, set func(*Cluster)) int {
	if opts.Log == nil {
		opts.Log = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "cluster: "+format+"\n", args...) }
	}
	ctrllog.SetLogger(klog.Background()) // envtest logs through it
	ctx, cancel := context.WithTimeout(context.Background(), DefaultStartTimeout)
	defer cancel()
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	c, err := Start(ctx, opts)
	stopSignals()
	if err != nil {
		return framework.MainUnavailable(m, "a cluster with real nodes", err)
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		fmt.Fprintln(os.Stderr, "cluster: interrupted, stopping the cluster")
		_ = c.Stop()
		os.Exit(1)
	}()
	set(c)
	code := m.Run()
	if opts.AfterTests != nil {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		if err := opts.AfterTests(ctx, c); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			code = max(code, 1)
		}
		cancel()
	}
	signal.Stop(signals)
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: stopping the cluster: %v\n", err)
		code = max(code, 1)
	}
	return code
}

// EnforceRestricted labels a namespace so that Pod Security admission
// refuses pods that break the restricted standard.
func (c *Cluster) EnforceRestricted(ctx context.Context, ns string) error {
	patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted"}}}`)
	_, err := c.Client.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// RestrictedSecurityContext is what the restricted Pod Security Standard
// asks of a container, with a read-only root file system.
func RestrictedSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// RestrictedPod is a pod of one container that runs once, as the restricted
// standard wants; command, if non-nil, replaces the image's entrypoint.
func RestrictedPod(name, image string, command []string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name:            name,
				Image:           image,
				Command:         command,
				SecurityContext: RestrictedSecurityContext(),
			}},
		},
	}
}

// RunPod creates pod in ns (once the namespace's default service account
// exists) and waits until it has succeeded. If it fails, the error carries
// its status and log.
func (c *Cluster) RunPod(ctx context.Context, ns string, pod *corev1.Pod) error {
	if err := c.waitServiceAccount(ctx, ns, "default"); err != nil {
		return err
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating pod %s/%s: %w", ns, pod.Name, err)
	}
	return c.WaitPodPhase(ctx, ns, pod.Name, corev1.PodSucceeded)
}

// WaitPodPhase waits until the pod is in phase (or, waiting for
// PodRunning, Ready). A pod that fails instead ends the wait at once.
func (c *Cluster) WaitPodPhase(ctx context.Context, ns, name string, phase corev1.PodPhase) error {
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = pod
		if pod.Status.Phase == corev1.PodFailed && phase != corev1.PodFailed {
			return false, fmt.Errorf("pod failed")
		}
		if phase == corev1.PodRunning {
			for _, cond := range pod.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}
		return pod.Status.Phase == phase, nil
	})
	if err != nil {
		log, _ := c.PodLog(ctx, ns, name)
		status := "never seen"
		if last != nil {
			status = fmt.Sprintf("phase %s, node %q, %+v", last.Status.Phase, last.Spec.NodeName, last.Status.ContainerStatuses)
		}
		return fmt.Errorf("pod %s/%s is not %s: %w\nstatus: %s\nevents: %s\nlog: %s", ns, name, phase, err, status, c.podEvents(ns, name), log)
	}
	return nil
}

// PodLog reads the log of the pod's (first) container, through the
// apiserver from the kubelet, as kubectl logs does.
func (c *Cluster) PodLog(ctx context.Context, ns, name string) (string, error) {
	data, err := c.Client.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	return string(data), err
}

// podEvents lists the pod's events, for error messages.
func (c *Cluster) podEvents(ns, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return err.Error()
	}
	s := ""
	for _, e := range events.Items {
		s += fmt.Sprintf("\n  %s %s: %s", e.Type, e.Reason, e.Message)
	}
	return s
}

// waitServiceAccount waits until the service account controller has made
// the account: pods naming it are refused before.
func (c *Cluster) waitServiceAccount(ctx context.Context, ns, name string) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	})
}

// WaitDeploymentAvailable waits until every replica of the Deployment is
// available (its readiness probe passed).
func (c *Cluster) WaitDeploymentAvailable(ctx context.Context, ns, name string) error {
	return c.waitWorkload(ctx, ns, name, "Deployment", func(ctx context.Context) (bool, any, error) {
		d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil, err
		}
		return d.Status.AvailableReplicas > 0 && d.Status.AvailableReplicas == d.Status.Replicas, d.Status, nil
	})
}

// WaitDaemonSetReady waits until the DaemonSet has a ready pod on every
// node it should run on.
func (c *Cluster) WaitDaemonSetReady(ctx context.Context, ns, name string) error {
	return c.waitWorkload(ctx, ns, name, "DaemonSet", func(ctx context.Context) (bool, any, error) {
		ds, err := c.Client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil, err
		}
		return ds.Status.DesiredNumberScheduled > 0 && ds.Status.NumberReady == ds.Status.DesiredNumberScheduled, ds.Status, nil
	})
}

// WaitStatefulSetReady waits until every replica of the StatefulSet is
// ready.
func (c *Cluster) WaitStatefulSetReady(ctx context.Context, ns, name string) error {
	return c.waitWorkload(ctx, ns, name, "StatefulSet", func(ctx context.Context) (bool, any, error) {
		s, err := c.Client.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil, err
		}
		want := int32(1)
		if s.Spec.Replicas != nil {
			want = *s.Spec.Replicas
		}
		return s.Status.ReadyReplicas == want && s.Status.ObservedGeneration >= s.Generation, s.Status, nil
	})
}

// waitWorkload polls ready, which also returns the workload's status; on
// timeout the error shows the last status and the namespace's pods.
func (c *Cluster) waitWorkload(ctx context.Context, ns, name, kind string, ready func(context.Context) (bool, any, error)) error {
	var status any
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		ok, s, err := ready(ctx)
		if err != nil {
			return false, nil // not created yet, or the apiserver is busy
		}
		status = s
		return ok, nil
	})
	if err != nil {
		var states []string
		if pods, lerr := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{}); lerr == nil {
			for _, p := range pods.Items {
				states = append(states, p.Name+": "+string(p.Status.Phase)+" "+p.Status.Message)
			}
		}
		return fmt.Errorf("%s %s/%s is not ready: %w (status %+v; pods %v)", kind, ns, name, err, status, states)
	}
	return nil
}

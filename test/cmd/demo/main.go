// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command demo is `make demo`: a newcomer's first minute with the project.
// It starts a cluster with one real node (package cluster: the control
// plane, kube-scheduler, a kubelet with containerd and runc; built from
// source the first time), installs hostpath-provisioner as its README says
// (make push, kustomize with the image overridden), runs the README's
// example pod writing into a claim, and shows the pod, the PV, the claim and
// the file in the directory on the node, then deletes them. It needs root
// and, beyond Go, the Debian packages of hack/deps/node.sh.
//
//	cd test && go run ./cmd/demo [--keep]
//
// With --keep it stops after the pod has written its file and leaves everything
// running, with a KUBECONFIG to try kubectl, until Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubeprov/external-storage/test/cluster"
	"github.com/kubeprov/external-storage/test/e2e"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

const (
	binaryName = "hostpath-provisioner"
	// What users apply (hostpath/README.md), relative to the repository root.
	installDir       = "hostpath/deploy/single-node"
	exampleDir       = "hostpath/deploy/example"
	provisionerImage = "ghcr.io/kubeprov/hostpath-provisioner"
	provisionerNS    = "kubeprov-hostpath"
	// The names of the example's claim and pod.
	exampleName = "hostpath-example"
	exampleNS   = "default"
	// waitTimeout bounds the waits for the cluster; a warm demo takes seconds.
	waitTimeout = 3 * time.Minute
)

// errControlPlane marks a cluster that could not start.
var errControlPlane = errors.New("cannot start the cluster")

func main() {
	keep := flag.Bool("keep", false, "leave the control plane and the provisioner running with the claim bound, until Ctrl-C")
	flag.Parse()
	// envtest logs through controller-runtime's logger, which prints a stack
	// trace if nobody set it; the demo's own lines say what happens.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{out: os.Stdout, start: time.Now(), keep: *keep}
	if err := d.run(ctx); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "\ndemo interrupted; everything it started is stopped")
			os.Exit(130)
		}
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n", err)
		os.Exit(1)
	}
}

type demo struct {
	out   io.Writer
	start time.Time
	keep  bool
}

// say prints a progress line stamped with the time since the demo started.
func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "[%5.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

func (d *demo) run(ctx context.Context) (err error) {
	d.say("Starting a cluster with one real node: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,")
	d.say("  and a kubelet with containerd, runc and the CNI bridge in namespaces of their own (needs root).")
	d.say("  The first run builds them from source (about 15 min for the control plane, 3 more for the node); then seconds.")
	c, err := cluster.Start(ctx, cluster.Options{Nodes: 1, Log: func(format string, args ...any) { d.say("  "+format, args...) }})
	if err != nil {
		return fmt.Errorf("%w: %w", errControlPlane, err)
	}
	defer func() {
		began := time.Now()
		if serr := c.Stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the cluster: %w", serr))
		}
		d.say("Stopped the cluster in %s", since(began))
	}()

	began := time.Now()
	d.say("make push of hostpath-provisioner into the cluster's registry %s (a minute or two the first time)...", c.Registry)
	ref, err := e2e.PushImage(ctx, c, "hostpath")
	if err != nil {
		return err
	}
	d.say("Pushed %s in %s", ref, since(began))

	mc, err := manifests.NewClient(c.ControlPlane)
	if err != nil {
		return err
	}
	install, err := e2e.Render(installDir, e2e.ImageOverride{Name: provisionerImage, NewRef: ref})
	if err != nil {
		return err
	}
	began = time.Now()
	if err := e2e.Apply(ctx, mc, install); err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	if err := c.WaitDeploymentAvailable(waitCtx, provisionerNS, binaryName); err != nil {
		return err
	}
	d.say("Applied %s (image overridden): the provisioner pod is ready on %s, %s later", installDir, c.Nodes[0].Name, since(began))

	example, err := e2e.Render(exampleDir, e2e.ImageOverride{Name: "busybox", NewRef: c.Image(cluster.BusyboxImage)})
	if err != nil {
		return err
	}
	began = time.Now()
	if err := e2e.Apply(ctx, mc, example); err != nil {
		return err
	}
	d.say("Applied %s: PVC and pod %s/%s", exampleDir, exampleNS, exampleName)
	if err := c.WaitPodPhase(waitCtx, exampleNS, exampleName, corev1.PodSucceeded); err != nil {
		return err
	}
	claim, pv, err := framework.WaitForPVCBound(waitCtx, c.Client, exampleNS, exampleName)
	if err != nil {
		return err
	}
	pod, err := c.Client.CoreV1().Pods(exampleNS).Get(ctx, exampleName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	d.say("The pod wrote into its claim and completed, %s after they were applied:\n", since(began))
	printTable(d.out, pv, claim, pod)
	dir := pv.Spec.HostPath.Path
	node := c.Nodes[0]
	listing, err := node.Exec(ctx, "ls", "-la", dir)
	if err != nil {
		return fmt.Errorf("the PV is bound but its directory is not on the node: %w", err)
	}
	fmt.Fprintf(d.out, "\n  on node %s, ls -la %s:\n%s\n", node.Name, dir, indent(string(listing)))

	if d.keep {
		return d.wait(ctx, c, claim, dir)
	}

	began = time.Now()
	if err := e2e.Remove(ctx, mc, example); err != nil {
		return err
	}
	d.say("Deleted the pod and PVC %s/%s", claim.Namespace, claim.Name)
	if err := framework.WaitForPVDeleted(waitCtx, c.Client, pv.Name); err != nil {
		return err
	}
	out, err := node.Exec(ctx, "ls", "-A", path.Dir(dir))
	if err != nil {
		return fmt.Errorf("listing %s on the node after PV %s was deleted: %w", path.Dir(dir), pv.Name, err)
	}
	if strings.Contains(string(out), path.Base(dir)) {
		return fmt.Errorf("PV %s is deleted but its directory %s is still on the node", pv.Name, dir)
	}
	d.say("PV %s and its directory on the node are gone, %s after the claim was deleted", pv.Name, since(began))
	d.say("Done: a claim provisioned, used by a pod on a real node and cleaned up by hostpath-provisioner. Stopping the cluster...")
	return nil
}

// wait leaves everything running for the user until Ctrl-C.
func (d *demo) wait(ctx context.Context, c *cluster.Cluster, claim *corev1.PersistentVolumeClaim, dir string) error {
	fmt.Fprintf(d.out, "\nEverything keeps running. In another terminal:\n\n  export KUBECONFIG=%s\n", c.KubeconfigPath)
	fmt.Fprintf(d.out, "  kubectl get pods,pv,pvc -A\n  kubectl logs -n %s %s\n  nsenter -t %d -m -n ls -l %s   # inside the node\n  kubectl delete pod,pvc -n %s %s   # the PV and the directory go away\n\n",
		claim.Namespace, claim.Name, c.Nodes[0].HolderPid(), dir, claim.Namespace, claim.Name)
	if _, err := exec.LookPath("kubectl"); err != nil {
		fmt.Fprintln(d.out, "(kubectl is not on PATH here; any kubectl of 1.35 to 1.37 will do.)")
	}
	d.say("Press Ctrl-C to stop everything.")
	<-ctx.Done()
	fmt.Fprintln(d.out)
	d.say("Ctrl-C: stopping what the demo started...")
	return nil
}

// printTable prints what `kubectl get pod,pv,pvc` shows.
func printTable(out io.Writer, pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim, pod *corev1.Pod) {
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "NAME\tSTATUS\tNODE\tAGE")
	fmt.Fprintf(w, "pod/%s\t%s\t%s\t%s\n", pod.Name, pod.Status.Phase, pod.Spec.NodeName, age(pod.CreationTimestamp))
	fmt.Fprintln(w)
	capacity := pv.Spec.Capacity[corev1.ResourceStorage]
	fmt.Fprintln(w, "NAME\tCAPACITY\tACCESS MODES\tRECLAIM POLICY\tSTATUS\tCLAIM\tSTORAGECLASS\tAGE")
	fmt.Fprintf(w, "persistentvolume/%s\t%s\t%s\t%s\t%s\t%s/%s\t%s\t%s\n", pv.Name, capacity.String(), accessModes(pv.Spec.AccessModes),
		pv.Spec.PersistentVolumeReclaimPolicy, pv.Status.Phase, claim.Namespace, claim.Name, pv.Spec.StorageClassName, age(pv.CreationTimestamp))
	fmt.Fprintln(w)
	fmt.Fprintln(w, "NAME\tSTATUS\tVOLUME\tCAPACITY\tACCESS MODES\tSTORAGECLASS\tAGE")
	fmt.Fprintf(w, "persistentvolumeclaim/%s\t%s\t%s\t%s\t%s\t%s\t%s\n", claim.Name, claim.Status.Phase, claim.Spec.VolumeName,
		capacity.String(), accessModes(claim.Status.AccessModes), *claim.Spec.StorageClassName, age(claim.CreationTimestamp))
	_ = w.Flush()
}

// accessModes abbreviates as kubectl does.
func accessModes(modes []corev1.PersistentVolumeAccessMode) string {
	short := map[corev1.PersistentVolumeAccessMode]string{
		corev1.ReadWriteOnce: "RWO", corev1.ReadOnlyMany: "ROX", corev1.ReadWriteMany: "RWX", corev1.ReadWriteOncePod: "RWOP",
	}
	var names []string
	for _, m := range modes {
		names = append(names, short[m])
	}
	return strings.Join(names, ",")
}

func age(t metav1.Time) string { return duration.HumanDuration(time.Since(t.Time)) }

// indent indents each line of s.
func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

func since(t time.Time) string { return time.Since(t).Round(10 * time.Millisecond).String() }

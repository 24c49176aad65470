// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command demo is `make demo`: a newcomer's first minute with the project.
// It starts a real control plane (etcd, kube-apiserver and
// kube-controller-manager on 127.0.0.1, built from source the first time),
// runs hostpath-provisioner against it, and follows a claim from creation
// to Bound to deleted, showing the PV and the directory behind it. Nothing
// needs installing by hand beyond Go.
//
//	cd test && go run ./cmd/demo [--keep]
//
// With --keep it stops after the claim is bound and leaves everything
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
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/kubeprov/external-storage/test/framework"
)

const (
	binaryName = "hostpath-provisioner"
	// nodeName stands for the one node of the demo cluster.
	nodeName = "demo-node"
	// The manifests users apply, relative to the repository root.
	classManifest = "hostpath/deploy/single-node/storageclass.yaml"
	claimManifest = "hostpath/deploy/example/pvc.yaml"
	// waitTimeout bounds each wait for the cluster; a warm demo takes seconds.
	waitTimeout = time.Minute
)

// errControlPlane marks a control plane that could not start.
var errControlPlane = errors.New("cannot start the control plane")

func main() {
	keep := flag.Bool("keep", false, "leave the control plane and the provisioner running with the claim bound, until Ctrl-C")
	flag.Parse()
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
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "kubeprov-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	// Build first: a compile error should not wait for the control plane.
	began := time.Now()
	d.say("Building hostpath-provisioner (go build; a minute or two the first time)...")
	bin, err := framework.BuildBinary(ctx, "hostpath", binaryName)
	if err != nil {
		return err
	}
	d.say("Built %s in %s", bin, since(began))

	d.say("Starting a control plane: etcd, kube-apiserver and kube-controller-manager on 127.0.0.1")
	cp, err := framework.Start(ctx, framework.Options{Log: func(format string, args ...any) { d.say("  "+format, args...) }})
	if err != nil {
		return fmt.Errorf("%w: %w", errControlPlane, err)
	}
	defer func() {
		began := time.Now()
		if serr := cp.Stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the control plane: %w", serr))
		}
		d.say("Stopped the control plane in %s", since(began))
	}()

	pvDir := filepath.Join(tmp, "volumes")
	logPath := filepath.Join(tmp, binaryName+".log")
	args := []string{"--kubeconfig=" + cp.KubeconfigPath, "--pv-dir=" + pvDir, "--node-name=" + nodeName}
	p, err := framework.StartProcess(ctx, framework.ProcessOptions{Binary: bin, Args: args, LogPath: logPath})
	if err != nil {
		return err
	}
	defer func() {
		if serr := p.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
		d.say("Stopped %s (pid %d)", binaryName, p.Pid())
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(d.out, "\nLast lines of the provisioner's log:\n%s\n", p.LogTail(20))
		}
	}()
	d.say("Running %s %s (pid %d)", binaryName, strings.Join(args[1:], " "), p.Pid())

	class, claim := &storagev1.StorageClass{}, &corev1.PersistentVolumeClaim{}
	if err := readManifest(root, classManifest, class); err != nil {
		return err
	}
	if err := readManifest(root, claimManifest, claim); err != nil {
		return err
	}
	if _, err := cp.Client.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return err
	}
	began = time.Now()
	if claim, err = cp.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return err
	}
	d.say("Applied %s and %s: StorageClass %s, PVC %s/%s", classManifest, claimManifest, class.Name, claim.Namespace, claim.Name)

	waitCtx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	claim, pv, err := framework.WaitForPVCBound(waitCtx, cp.Client, claim.Namespace, claim.Name)
	if err != nil {
		return err
	}
	d.say("PVC %s/%s is Bound, %s after it was created:\n", claim.Namespace, claim.Name, since(began))
	printTable(d.out, pv, claim)
	dir := pv.Spec.HostPath.Path
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("the PV is bound but its directory is missing: %w", err)
	}
	fmt.Fprintf(d.out, "\n  directory: %s %s (on node %s, where the PV's node affinity pins pods)\n\n", fi.Mode(), dir, pv.Annotations["hostpath.kubeprov.io/node"])

	file := filepath.Join(dir, "hello.txt")
	if err := os.WriteFile(file, []byte("written by make demo\n"), 0o644); err != nil {
		return err
	}
	d.say("Wrote %s, as a pod using the claim would", file)

	if d.keep {
		return d.wait(ctx, cp.KubeconfigPath, claim, dir)
	}

	began = time.Now()
	if err := cp.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	d.say("Deleted PVC %s/%s", claim.Namespace, claim.Name)
	if err := framework.WaitForPVDeleted(waitCtx, cp.Client, pv.Name); err != nil {
		return err
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("PV %s is deleted but its directory %s is still there (%w)", pv.Name, dir, err)
	}
	d.say("PV %s and its directory are gone, %s after the claim was deleted", pv.Name, since(began))
	d.say("Done: a claim provisioned, used and cleaned up by hostpath-provisioner. Stopping what the demo started...")
	return nil
}

// wait leaves everything running for the user until Ctrl-C.
func (d *demo) wait(ctx context.Context, kubeconfig string, claim *corev1.PersistentVolumeClaim, dir string) error {
	fmt.Fprintf(d.out, "\nEverything keeps running. In another terminal:\n\n  export KUBECONFIG=%s\n", kubeconfig)
	fmt.Fprintf(d.out, "  kubectl get pv,pvc -A\n  kubectl describe pvc -n %s %s\n  ls -l %s\n  kubectl delete pvc -n %s %s   # the PV and the directory go away\n\n",
		claim.Namespace, claim.Name, dir, claim.Namespace, claim.Name)
	if _, err := exec.LookPath("kubectl"); err != nil {
		fmt.Fprintln(d.out, "(kubectl is not on PATH here; any kubectl of 1.35 to 1.37 will do.)")
	}
	d.say("Press Ctrl-C to stop everything.")
	<-ctx.Done()
	fmt.Fprintln(d.out)
	d.say("Ctrl-C: stopping what the demo started...")
	return nil
}

// readManifest reads one object from a YAML file of the repository.
func readManifest(root, path string, into any) error {
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// printTable prints what `kubectl get pv,pvc` shows.
func printTable(out io.Writer, pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) {
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
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

func since(t time.Time) string { return time.Since(t).Round(10 * time.Millisecond).String() }

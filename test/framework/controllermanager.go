// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// ProbeProvisioner is the provisioner of the StorageClass Start uses to check
	// that kube-controller-manager works. Nothing provisions its volumes.
	ProbeProvisioner = "framework.kubeprov.io/probe"

	// AnnStorageProvisioner is the annotation the PV controller sets on a PVC to
	// name the provisioner that is expected to provision it.
	AnnStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
)

// volumeControllers are the only kube-controller-manager controllers Start runs:
// binding, expansion and the two protection finalizers. Everything else (garbage
// collector, namespace controller, ...) stays off to keep the load low.
var volumeControllers = []string{
	"persistentvolume-binder-controller",
	"persistentvolume-expander-controller",
	"persistentvolume-protection-controller",
	"persistentvolumeclaim-protection-controller",
}

// errControllerManagerExited cancels waits that cannot succeed any more.
var errControllerManagerExited = errors.New("kube-controller-manager exited")

// controllerManager is a kube-controller-manager child process.
type controllerManager struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // the exit status; read only after done is closed
}

// startControllerManager starts kube-controller-manager with the admin kubeconfig
// and waits until it has handled the probe PVC.
func (cp *ControlPlane) startControllerManager(ctx context.Context, extraArgs []string) error {
	args := []string{
		"--kubeconfig=" + cp.KubeconfigPath,
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers=" + strings.Join(volumeControllers, ","),
		"--pvclaimbinder-sync-period=1s",
		// For the root-ca-cert-publisher, when a caller runs all controllers.
		"--root-ca-file=" + cp.CAFile,
	}
	// Last flag wins, so the caller's flags override the defaults above.
	args = append(args, extraArgs...)

	logFile, err := os.OpenFile(cp.ControllerManagerLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	// The child gets its own copy of the descriptor; ours is not needed after Start.
	defer logFile.Close()

	cmd := exec.Command(filepath.Join(cp.BinDir, "kube-controller-manager"), args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group: a Ctrl-C in the terminal reaches the test binary,
		// which stops the control plane in order, not every process at once.
		Setpgid: true,
		// If the test binary dies without Stop (a test timeout panics), do not leave
		// a controller manager behind.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	kcm := &controllerManager{cmd: cmd, done: make(chan struct{})}
	go func() {
		kcm.err = cmd.Wait()
		close(kcm.done)
	}()
	cp.kcm = kcm

	if err := cp.probeControllerManager(ctx); err != nil {
		return fmt.Errorf("kube-controller-manager (pid %d) is not working: %w\nkube-controller-manager log tail (%s):\n%s",
			cmd.Process.Pid, err, cp.ControllerManagerLog, fileTail(cp.ControllerManagerLog, 20))
	}
	return nil
}

// probeControllerManager proves that the volume controllers run: the PV controller
// sets the provisioner annotation on a new PVC, and the pvc-protection controller
// lets a deleted PVC go. It gives up early if the process exits.
func (cp *ControlPlane) probeControllerManager(ctx context.Context) error {
	ctx, cancelTimeout := context.WithTimeout(ctx, DefaultControllerManagerReadyTimeout)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-cp.kcm.done:
			cancel(fmt.Errorf("%w: %w", errControllerManagerExited, cp.kcm.err))
		case <-ctx.Done():
		}
	}()

	c := cp.Client
	ns, err := CreateNamespace(ctx, c, "kubeprov-probe")
	if err != nil {
		return err
	}
	sc := NewStorageClass("", ProbeProvisioner, nil)
	sc.GenerateName = "kubeprov-probe-"
	sc, err = c.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating probe StorageClass: %w", err)
	}
	pvc := NewPVC(ns, "probe", sc.Name, "1Mi")
	if _, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating probe PVC: %w", err)
	}

	provisioner, err := WaitForPVCAnnotation(ctx, c, ns, pvc.Name, AnnStorageProvisioner)
	if err != nil {
		return err
	}
	if provisioner != ProbeProvisioner {
		return fmt.Errorf("probe PVC %s/%s got %s=%q, want %q", ns, pvc.Name, AnnStorageProvisioner, provisioner, ProbeProvisioner)
	}

	// Clean up, which at the same time checks the pvc-protection controller. On
	// errors above there is no cleanup: Start stops the whole control plane.
	if err := c.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting probe PVC: %w", err)
	}
	if err := WaitForPVCDeleted(ctx, c, ns, pvc.Name); err != nil {
		return err
	}
	if err := c.StorageV1().StorageClasses().Delete(ctx, sc.Name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting probe StorageClass: %w", err)
	}
	return DeleteNamespace(ctx, c, ns)
}

// stop sends SIGTERM to the process (by pid: it is our child) and kills it if it
// has not exited after timeout.
func (m *controllerManager) stop(timeout time.Duration) error {
	select {
	case <-m.done:
		return nil // already gone; its log says why
	default:
	}
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping kube-controller-manager (pid %d): %w", m.cmd.Process.Pid, err)
	}
	select {
	case <-m.done:
		return nil
	case <-time.After(timeout):
		_ = m.cmd.Process.Kill()
		<-m.done
		return fmt.Errorf("kube-controller-manager (pid %d) ignored SIGTERM for %s and was killed", m.cmd.Process.Pid, timeout)
	}
}

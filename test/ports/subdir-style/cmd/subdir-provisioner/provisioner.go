// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command subdir-provisioner serves volumes as directories of one NFS export,
// the way nfs-subdir-external-provisioner does: the export is mounted at
// -mount-root, each volume is a directory in it, and the PV points NFS
// clients at that directory. It is the worked port of docs/migrating.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/controller"
)

// Annotations that record on the PV what Delete needs: the StorageClass may
// be gone, or changed, by the time the volume is released.
const (
	annOnDelete        = "subdir.example.com/on-delete"
	annArchiveOnDelete = "subdir.example.com/archive-on-delete"
)

// pathVariable matches ${.PVC.namespace}, ${.PVC.name}, ${.PVC.labels.<key>}
// and ${.PVC.annotations.<key>} in a pathPattern.
var pathVariable = regexp.MustCompile(`\$\{\.PVC\.(namespace|name|labels\.[^}]+|annotations\.[^}]+)\}`)

type subdirProvisioner struct {
	server     string // NFS server named in the PVs
	exportPath string // the export's path on the server
	mountRoot  string // where the export is mounted in this container
}

var (
	_ controller.Provisioner         = (*subdirProvisioner)(nil)
	_ controller.ClaimMetadataReader = (*subdirProvisioner)(nil)
)

// Provision creates the claim's directory, or finds the one it created
// before: MkdirAll makes a repeated call for the same claim idempotent.
func (p *subdirProvisioner) Provision(ctx context.Context, options controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	claim, params := options.PVC, options.StorageClass.Parameters
	dir := strings.Join([]string{claim.Namespace, claim.Name, options.PVName}, "-")
	if pattern := params["pathPattern"]; pattern != "" {
		dir = expandPattern(pattern, claim)
		if !filepath.IsLocal(dir) {
			return nil, controller.ProvisioningFinished, fmt.Errorf("StorageClass %s: pathPattern %q gives %q for this claim, which is not a path inside the export; fix the pattern or the claim's labels and annotations", options.StorageClass.Name, pattern, dir)
		}
	}
	full := filepath.Join(p.mountRoot, dir)
	klog.FromContext(ctx).V(2).Info("Creating directory", "path", full)
	if err := os.MkdirAll(full, 0o777); err != nil { //nolint:gosec // shared storage: any pod's user must write it
		return nil, controller.ProvisioningFinished, fmt.Errorf("creating directory %s: %w", full, err)
	}
	if err := os.Chmod(full, 0o777); err != nil { //nolint:gosec // as above, whatever the umask
		return nil, controller.ProvisioningFinished, fmt.Errorf("setting the mode of %s: %w", full, err)
	}
	return options.NewVolume(controller.VolumeSpec{
		Source: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{
			Server: p.server,
			Path:   filepath.Join(p.exportPath, dir),
		}},
		Annotations: map[string]string{
			annOnDelete:        params["onDelete"],
			annArchiveOnDelete: params["archiveOnDelete"],
		},
	}), controller.ProvisioningFinished, nil
}

// Delete keeps, archives or removes the volume's directory, as the class
// said when the volume was made. A directory that is gone already is fine.
func (p *subdirProvisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.NFS == nil {
		return fmt.Errorf("PV %s has no NFS source: it was not made by this provisioner; delete it and its data yourself", pv.Name)
	}
	dir, err := filepath.Rel(p.exportPath, pv.Spec.NFS.Path)
	if err != nil || !filepath.IsLocal(dir) {
		return fmt.Errorf("PV %s: NFS path %s is not inside the export %s; delete it and its data yourself", pv.Name, pv.Spec.NFS.Path, p.exportPath)
	}
	full := filepath.Join(p.mountRoot, dir)
	if _, err := os.Stat(full); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("path", full)
	onDelete, archive := pv.Annotations[annOnDelete], pv.Annotations[annArchiveOnDelete]
	_, recorded := pv.Annotations[annOnDelete]
	switch {
	case onDelete == "retain":
		logger.V(2).Info("Keeping directory (onDelete: retain)")
		return nil
	case onDelete == "delete" || (recorded && archive == "false"):
		logger.V(2).Info("Removing directory")
		return os.RemoveAll(full)
	default:
		// archiveOnDelete defaults to true. A PV made before the port has no
		// annotations: archiving is the choice that loses no data.
		archived := filepath.Join(filepath.Dir(full), "archived-"+filepath.Base(full))
		logger.V(2).Info("Archiving directory", "archive", archived)
		return os.Rename(full, archived)
	}
}

// ClaimMetadataKeys declares the labels and annotations a pathPattern
// reads, so that the controller's journal keeps them for a Provision that
// is repeated after a restart.
func (p *subdirProvisioner) ClaimMetadataKeys(class *storagev1.StorageClass) (labels, annotations []string) {
	for _, m := range pathVariable.FindAllStringSubmatch(class.Parameters["pathPattern"], -1) {
		if key, ok := strings.CutPrefix(m[1], "labels."); ok {
			labels = append(labels, key)
		} else if key, ok := strings.CutPrefix(m[1], "annotations."); ok {
			annotations = append(annotations, key)
		}
	}
	return labels, annotations
}

// expandPattern replaces the variables of a pathPattern with the claim's values.
func expandPattern(pattern string, claim *corev1.PersistentVolumeClaim) string {
	return filepath.Clean(pathVariable.ReplaceAllStringFunc(pattern, func(v string) string {
		field := pathVariable.FindStringSubmatch(v)[1]
		switch {
		case field == "namespace":
			return claim.Namespace
		case field == "name":
			return claim.Name
		case strings.HasPrefix(field, "labels."):
			return claim.Labels[strings.TrimPrefix(field, "labels.")]
		default:
			return claim.Annotations[strings.TrimPrefix(field, "annotations.")]
		}
	}))
}

func main() {
	klog.InitFlags(nil) // -v, -vmodule, -logtostderr, ... as glog had them
	kubeconfig := flag.String("kubeconfig", "", "Path to a kubeconfig; empty means in-cluster configuration.")
	mountRoot := flag.String("mount-root", "/persistentvolumes", "Where the NFS export is mounted.")
	flag.Parse()
	if err := run(*kubeconfig, *mountRoot); err != nil {
		klog.ErrorS(err, "Provisioner failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

func run(kubeconfig, mountRoot string) error {
	name, server, path := os.Getenv("PROVISIONER_NAME"), os.Getenv("NFS_SERVER"), os.Getenv("NFS_PATH")
	if name == "" || server == "" || path == "" {
		return errors.New("environment variables PROVISIONER_NAME, NFS_SERVER and NFS_PATH are required")
	}
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return fmt.Errorf("kubernetes client configuration: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// Leader election is on in a pod, as before; its Lease and the journal
	// are in the pod's namespace.
	var opts []controller.Option
	if os.Getenv("ENABLE_LEADER_ELECTION") == "false" {
		opts = append(opts, controller.WithoutLeaderElection())
	}
	p := &subdirProvisioner{server: server, exportPath: path, mountRoot: mountRoot}
	pc, err := controller.NewProvisionController(client, name, p, opts...)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return pc.Run(klog.NewContext(ctx, klog.Background()))
}

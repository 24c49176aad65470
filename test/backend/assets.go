// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// AssetLister is the part of a Backend the asset checks need, for
// provisioners that are not one of the project's backends (test/ports).
type AssetLister interface {
	// Name names the assets' kind in messages.
	Name() string
	// Assets and AssetOf are as in Backend.
	Assets(ctx context.Context) ([]string, error)
	AssetOf(pv *corev1.PersistentVolume) string
}

// CheckAssets compares the backend's assets with the PVs of a StorageClass,
// the only class the backend serves: every PV's asset exists, no two PVs
// stand for one asset, and no asset is without a PV (a leak). The error
// names every mismatch.
func CheckAssets(ctx context.Context, b AssetLister, client kubernetes.Interface, className string) error {
	assets, err := b.Assets(ctx)
	if err != nil {
		return fmt.Errorf("listing the %s assets: %w", b.Name(), err)
	}
	list, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing PVs: %w", err)
	}
	owners := map[string][]string{} // asset -> PVs
	var pvs int
	for i := range list.Items {
		pv := &list.Items[i]
		if pv.Spec.StorageClassName != className {
			continue
		}
		pvs++
		asset := b.AssetOf(pv)
		owners[asset] = append(owners[asset], pv.Name)
	}
	var errs []error
	for _, asset := range slices.Sorted(maps.Keys(owners)) {
		switch {
		case asset == "":
			errs = append(errs, fmt.Errorf("PVs %s name no %s asset", strings.Join(owners[asset], ", "), b.Name()))
		case len(owners[asset]) > 1:
			errs = append(errs, fmt.Errorf("PVs %s all stand for asset %s", strings.Join(owners[asset], ", "), asset))
		}
		if asset != "" && !slices.Contains(assets, asset) {
			errs = append(errs, fmt.Errorf("PV %s: its asset %s does not exist", strings.Join(owners[asset], ", "), asset))
		}
	}
	var leaked []string
	for _, asset := range assets {
		if _, ok := owners[asset]; !ok {
			leaked = append(leaked, asset)
		}
	}
	if len(leaked) > 0 {
		slices.Sort(leaked)
		errs = append(errs, fmt.Errorf("%d %s assets have no PV (leaked): %s", len(leaked), b.Name(), strings.Join(leaked, ", ")))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%d PVs of class %s, %d %s assets: %w", pvs, className, len(assets), b.Name(), err)
	}
	return nil
}

// WaitForAssets waits until CheckAssets passes, and returns its last error
// if ctx ends first: assets and PVs are created and removed one after the
// other, so a single look can catch them in between.
func WaitForAssets(ctx context.Context, b AssetLister, client kubernetes.Interface, className string) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := CheckAssets(ctx, b, client, className)
		if err != nil && ctx.Err() != nil {
			// A look cut short by the deadline says nothing about the
			// assets: keep the last complete one's answer.
			return false, nil
		}
		last = err
		return last == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w: %w", err, last)
	}
	return err
}

// Dirs lists the names of the directories in dir, those named in skip
// aside, for backends whose assets are directories; a dir that does not
// exist yet holds none.
func Dirs(dir string, skip ...string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && !slices.Contains(skip, e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

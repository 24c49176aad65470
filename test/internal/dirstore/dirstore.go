// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package dirstore is a provisioner for tests of the library itself: each
// asset is a directory under a root, so a test (or another process) can count
// exactly which assets exist and compare them with the PVs. Hooks let tests
// block or fail calls at chosen moments.
package dirstore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/lib/controller"
)

// Store implements controller.Provisioner on directories.
type Store struct {
	Root string
	// BeforeProvision, when set, runs first and may fail the call.
	BeforeProvision func(ctx context.Context, o controller.ProvisionOptions) (controller.ProvisioningState, error)
	// AfterCreate, when set, runs once the directory exists.
	AfterCreate func(ctx context.Context, o controller.ProvisionOptions)

	mu         sync.Mutex
	provisions map[string]int
}

// New returns a store rooted at root (created if missing).
func New(root string) (*Store, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	return &Store{Root: root, provisions: map[string]int{}}, nil
}

// Provision creates <root>/<pv name>; calling it again for the same name
// finds the same directory.
func (s *Store) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	s.mu.Lock()
	s.provisions[o.PVName]++
	s.mu.Unlock()
	if s.BeforeProvision != nil {
		if state, err := s.BeforeProvision(ctx, o); err != nil {
			return nil, state, err
		}
	}
	path := filepath.Join(s.Root, o.PVName)
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if s.AfterCreate != nil {
		s.AfterCreate(ctx, o)
	}
	return o.NewVolume(controller.VolumeSpec{
		Source: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}},
	}), controller.ProvisioningFinished, nil
}

// Delete removes the directory; one that is gone already is success.
func (s *Store) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	err := os.Remove(filepath.Join(s.Root, pv.Name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Assets lists the directories that exist, sorted.
func (s *Store) Assets() ([]string, error) { return Assets(s.Root) }

// Assets lists the asset directories under root, sorted.
func Assets(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// Calls returns how often Provision was called for each PV name.
func (s *Store) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.provisions))
	for k, v := range s.provisions {
		out[k] = v
	}
	return out
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package gidallocator hands out supplemental group IDs for volumes (NFS,
// GlusterFS-style shares) from a per-StorageClass range given by the class
// parameters gidMin and gidMax, and records each in the PV annotation
// pv.beta.kubernetes.io/gid, which the kubelet adds to the pod's groups.
// Its table is rebuilt from existing PVs, so a restart never hands out a GID
// twice. The PV annotation is only a claim (anyone who may edit PVs can
// change it); a provisioner whose storage records each volume's group
// itself (a directory's group owner) should use NewFromStorage, so that the
// storage's record, which only the provisioner writes, decides.
package gidallocator

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Class parameters, annotation and defaults.
const (
	ParamGIDMin   = "gidMin"
	ParamGIDMax   = "gidMax"
	AnnGID        = "pv.beta.kubernetes.io/gid"
	DefaultGIDMin = 2000
	DefaultGIDMax = math.MaxInt32
)

// Allocator allocates GIDs per storage class. Safe for concurrent use.
type Allocator struct {
	client kubernetes.Interface
	inUse  GroupsInUse

	mu      sync.Mutex
	classes map[string]*table
}

type table struct {
	used  map[int]string // gid -> PV name
	byPV  map[string]int
	next  int
	known bool // rebuilt from the API
}

// New returns an allocator that rebuilds its tables from the PVs in the API.
func New(client kubernetes.Interface) *Allocator {
	return &Allocator{client: client, classes: map[string]*table{}}
}

// GroupsInUse reports the groups the storage itself gives its volumes, each
// with the name of the volume (its PV's name) that has it.
type GroupsInUse func(ctx context.Context) (map[int]string, error)

// NewFromStorage returns an allocator that rebuilds its tables from the
// storage's own record, inUse, as well as from the PVs: a GID in either is
// never handed out, and where both name a volume's GID, the storage's is the
// one Release frees. The storage does not know classes, so a GID it
// reports is taken in every class's range.
func NewFromStorage(client kubernetes.Interface, inUse GroupsInUse) *Allocator {
	a := New(client)
	a.inUse = inUse
	return a
}

// Range parses gidMin and gidMax from class parameters, with defaults, and
// errors that name the parameter.
func Range(params map[string]string) (gidMin, gidMax int, err error) {
	gidMin, gidMax = DefaultGIDMin, DefaultGIDMax
	parse := func(key string, into *int) error {
		v, ok := params[key]
		if !ok {
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			return fmt.Errorf("parameter %s: %q is not a GID between 1 and %d", key, v, math.MaxInt32)
		}
		*into = int(n)
		return nil
	}
	if err := parse(ParamGIDMin, &gidMin); err != nil {
		return 0, 0, err
	}
	if err := parse(ParamGIDMax, &gidMax); err != nil {
		return 0, 0, err
	}
	if gidMin > gidMax {
		return 0, 0, fmt.Errorf("parameter %s (%d) is greater than %s (%d)", ParamGIDMin, gidMin, ParamGIDMax, gidMax)
	}
	return gidMin, gidMax, nil
}

// Allocate returns a GID for the PV pvName of the class, the same one when
// called again for that PV (Provision is retried), or an error when the
// class's range is exhausted.
func (a *Allocator) Allocate(ctx context.Context, className, pvName string, params map[string]string) (int, error) {
	gidMin, gidMax, err := Range(params)
	if err != nil {
		return 0, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	t, err := a.table(ctx, className)
	if err != nil {
		return 0, err
	}
	if gid, ok := t.byPV[pvName]; ok {
		return gid, nil
	}
	size := gidMax - gidMin + 1
	start := t.next
	if start < gidMin || start > gidMax {
		start = gidMin
	}
	for i := 0; i < size; i++ {
		gid := gidMin + (start-gidMin+i)%size
		if _, taken := t.used[gid]; !taken {
			t.used[gid], t.byPV[pvName] = pvName, gid
			t.next = gid + 1
			return gid, nil
		}
	}
	return 0, fmt.Errorf("no free GID in range %d-%d of StorageClass %s: widen %s/%s or delete unused volumes",
		gidMin, gidMax, className, ParamGIDMin, ParamGIDMax)
}

// Release frees the GID of a deleted PV.
func (a *Allocator) Release(pv *corev1.PersistentVolume) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.classes[pv.Spec.StorageClassName]
	if t == nil {
		return
	}
	if gid, ok := t.byPV[pv.Name]; ok {
		delete(t.used, gid)
		delete(t.byPV, pv.Name)
	}
}

// table returns the class's table, rebuilding it from the API the first time.
func (a *Allocator) table(ctx context.Context, className string) (*table, error) {
	if t := a.classes[className]; t != nil && t.known {
		return t, nil
	}
	pvs, err := a.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing PersistentVolumes to rebuild the GID table: %w", err)
	}
	t := &table{used: map[int]string{}, byPV: map[string]int{}, known: true}
	for _, pv := range pvs.Items {
		if pv.Spec.StorageClassName != className {
			continue
		}
		if gid, err := strconv.Atoi(pv.Annotations[AnnGID]); err == nil {
			t.used[gid], t.byPV[pv.Name] = pv.Name, gid
		}
	}
	if a.inUse != nil {
		if err := t.addStorageGroups(ctx, a.inUse, pvs.Items, className); err != nil {
			return nil, err
		}
	}
	a.classes[className] = t
	return t, nil
}

// addStorageGroups marks the storage's groups taken, and makes the
// storage's group the one of each of the class's volumes where its PV's
// annotation names another.
func (t *table) addStorageGroups(ctx context.Context, inUse GroupsInUse, pvs []corev1.PersistentVolume, className string) error {
	groups, err := inUse(ctx)
	if err != nil {
		return fmt.Errorf("reading the storage's groups to rebuild the GID table: %w", err)
	}
	ofClass := map[string]bool{}
	for _, pv := range pvs {
		ofClass[pv.Name] = pv.Spec.StorageClassName == className
	}
	for gid, volume := range groups {
		if claimed, ok := t.byPV[volume]; ok && claimed != gid && t.used[claimed] == volume {
			delete(t.used, claimed)
			delete(t.byPV, volume)
		}
	}
	for gid, volume := range groups {
		t.used[gid] = volume
		if ofClass[volume] {
			t.byPV[volume] = gid
		}
	}
	return nil
}

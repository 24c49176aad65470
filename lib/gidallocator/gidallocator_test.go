// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package gidallocator

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func pv(name, class, gid string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{AnnGID: gid}},
		Spec:       corev1.PersistentVolumeSpec{StorageClassName: class},
	}
}

func TestAllocateSkipsGIDsOfExistingVolumes(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(pv("a", "gold", "2000"), pv("b", "gold", "2002"), pv("c", "silver", "2001"))
	a := New(client)
	params := map[string]string{ParamGIDMin: "2000", ParamGIDMax: "2003"}
	var got []int
	for _, name := range []string{"x", "y"} {
		gid, err := a.Allocate(ctx, "gold", name, params)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, gid)
	}
	if got[0] != 2001 || got[1] != 2003 {
		t.Fatalf("allocated %v, want [2001 2003] (2000 and 2002 are used in gold; silver's 2001 is not)", got)
	}
	if _, err := a.Allocate(ctx, "gold", "z", params); err == nil || !strings.Contains(err.Error(), "no free GID") {
		t.Fatalf("exhausted range: err = %v", err)
	}
	// Retried Provision gets the same GID.
	if gid, _ := a.Allocate(ctx, "gold", "x", params); gid != 2001 {
		t.Fatalf("retry got %d, want 2001", gid)
	}
	a.Release(pv("x", "gold", "2001"))
	if gid, err := a.Allocate(ctx, "gold", "z", params); err != nil || gid != 2001 {
		t.Fatalf("after release got %d, %v; want 2001", gid, err)
	}
}

func TestRangeErrorsNameTheParameter(t *testing.T) {
	for params, want := range map[[2]string]string{
		{"abc", "3000"}:  ParamGIDMin,
		{"2000", "-5"}:   ParamGIDMax,
		{"3000", "2000"}: "greater than",
	} {
		_, _, err := Range(map[string]string{ParamGIDMin: params[0], ParamGIDMax: params[1]})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Range(%v) err = %v, want mentioning %q", params, err, want)
		}
	}
	lo, hi, err := Range(nil)
	if err != nil || lo != DefaultGIDMin || hi != DefaultGIDMax {
		t.Fatalf("defaults = %d, %d, %v", lo, hi, err)
	}
}

func TestStorageGroupsOverruleAnnotations(t *testing.T) {
	ctx := context.Background()
	// "a" has 2000 on the storage but nothing in its annotation (removed by
	// someone); "b" really has 2003, its annotation says 2001; "orphan" is a
	// directory without a PV (a volume being made).
	a0 := pv("a", "gold", "")
	client := fake.NewClientset(a0, pv("b", "gold", "2001"))
	storage := map[int]string{2000: "a", 2003: "b", 2004: "orphan"}
	alloc := NewFromStorage(client, func(context.Context) (map[int]string, error) { return storage, nil })
	params := map[string]string{ParamGIDMin: "2000", ParamGIDMax: "2005"}
	var got []int
	for _, name := range []string{"x", "y"} {
		gid, err := alloc.Allocate(ctx, "gold", name, params)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, gid)
	}
	if got[0] != 2001 || got[1] != 2002 {
		t.Fatalf("allocated %v, want [2001 2002]: 2000, 2003 and 2004 are the storage's, 2001 only an annotation's", got)
	}
	if _, err := alloc.Allocate(ctx, "gold", "z", params); err != nil {
		t.Fatal(err) // 2005
	}
	// Deleting b frees the storage's 2003, not the annotation's 2001.
	alloc.Release(pv("b", "gold", "2001"))
	if gid, err := alloc.Allocate(ctx, "gold", "w", params); err != nil || gid != 2003 {
		t.Fatalf("after deleting b got %d, %v; want 2003", gid, err)
	}
	failing := NewFromStorage(client, func(context.Context) (map[int]string, error) { return nil, errors.New("export root unreadable") })
	if _, err := failing.Allocate(ctx, "gold", "x", params); err == nil || !strings.Contains(err.Error(), "export root unreadable") {
		t.Fatalf("unreadable storage: err = %v, want it named (never a guess from annotations alone)", err)
	}
}

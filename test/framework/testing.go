// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// DefaultCleanupTimeout bounds each cleanup registered by the helpers below; the
// test's own context is already canceled when cleanups run.
const DefaultCleanupTimeout = 30 * time.Second

// Unavailable ends a test that this machine cannot run (a tool or component
// missing): a failure under CI=true, whose scripts install everything, a
// skip elsewhere.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg + " (set CI=true to fail instead)")
}

// TestContext returns a context that ends after timeout or when the test ends,
// whichever comes first.
func TestContext(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// CreateTestNamespace creates a namespace for one test and deletes it (with
// DeleteNamespace) when the test ends. It fails the test if it cannot create it.
func (cp *ControlPlane) CreateTestNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns, err := CreateNamespace(t.Context(), cp.Client, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultCleanupTimeout)
		defer cancel()
		if err := DeleteNamespace(ctx, cp.Client, ns); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return ns
}

// BuildTestBinary is BuildBinary for a test, which it fails if the build
// fails. It allows ten minutes: a cold build on two busy cores takes
// several.
func BuildTestBinary(t testing.TB, module, binary string, buildFlags ...string) string {
	t.Helper()
	bin, err := BuildBinary(TestContext(t, 10*time.Minute), module, binary, buildFlags...)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// CreateTestStorageClass creates sc (StorageClasses are cluster-scoped: give
// it a name of the test's own) and deletes it when the test ends, unless the
// test deleted it itself. It fails the test if it cannot create it.
func (cp *ControlPlane) CreateTestStorageClass(t testing.TB, sc *storagev1.StorageClass) *storagev1.StorageClass {
	t.Helper()
	created, err := cp.Client.StorageV1().StorageClasses().Create(t.Context(), sc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultCleanupTimeout)
		defer cancel()
		if err := cp.Client.StorageV1().StorageClasses().Delete(ctx, created.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: %v", err)
		}
	})
	return created
}

// CreateTestRBAC creates the RBAC objects of the YAML file at path
// (ClusterRoles, ClusterRoleBindings, Roles and RoleBindings), each after edit, if set, changed it (names, namespaces,
// subjects), and deletes the cluster-scoped ones when the test ends; the
// namespaced ones go with their namespace. It fails the test on any other
// kind and if it cannot create an object. A provisioner's deploy/rbac.yaml
// lacks the library's rules, which its kustomization adds: use
// manifests.CreateTestRBAC for it.
func (cp *ControlPlane) CreateTestRBAC(t testing.TB, path string, edit func(runtime.Object)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var objs []runtime.Object
	reader := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decoding %s: %v", path, err)
		}
		objs = append(objs, obj)
	}
	cp.CreateTestRBACObjects(t, path, objs, edit)
}

// CreateTestRBACObjects is CreateTestRBAC for objects already read (from
// where, for messages), e.g. rendered by kustomize. It returns once the
// authorizer grants what the bindings grant (WaitUntilAuthorized).
func (cp *ControlPlane) CreateTestRBACObjects(t testing.TB, from string, objs []runtime.Object, edit func(runtime.Object)) {
	t.Helper()
	ctx, rbac := t.Context(), cp.Client.RbacV1()
	for _, obj := range objs {
		var err error
		if edit != nil {
			edit(obj)
		}
		var remove func(context.Context) error
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			_, err = rbac.ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			remove = func(ctx context.Context) error {
				return rbac.ClusterRoles().Delete(ctx, o.Name, metav1.DeleteOptions{})
			}
		case *rbacv1.ClusterRoleBinding:
			_, err = rbac.ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			remove = func(ctx context.Context) error {
				return rbac.ClusterRoleBindings().Delete(ctx, o.Name, metav1.DeleteOptions{})
			}
		case *rbacv1.Role:
			_, err = rbac.Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = rbac.RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("%s: unexpected %T", from, obj)
		}
		if err != nil {
			t.Fatalf("%s: %v", from, err)
		}
		if remove != nil {
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), DefaultCleanupTimeout)
				defer cancel()
				if err := remove(ctx); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("cleanup: %v", err)
				}
			})
		}
	}
	if err := WaitUntilAuthorized(ctx, cp.Client, objs...); err != nil {
		t.Fatalf("%s: %v", from, err)
	}
}

// StopAtEnd stops p when the test ends, failing the test if p did not exit
// cleanly (or crashed earlier), and shows the end of p's log if the test
// failed.
func StopAtEnd(t testing.TB, p *Process) {
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stopping %s: %v", p.Name, err)
		}
		if t.Failed() {
			t.Logf("log of %s (pid %d, %s), last lines:\n%s", p.Name, p.Pid(), p.LogPath, p.LogTail(60))
		}
	})
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package docs keeps the documentation honest: docs/writing-a-provisioner.md
// shows the program CI compiles, its excerpts are in the code they quote, and
// the program binds a claim on the real control plane; and (drift_test.go)
// what the READMEs and docs/ say about packages, flags, make targets, files
// and Pod Security levels is checked against the code that has them.
package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/test/framework"
)

var cp *framework.ControlPlane

func TestMain(m *testing.M) {
	framework.RunMain(m, framework.Options{}, func(c *framework.ControlPlane) { cp = c })
}

const guide = "../../../docs/writing-a-provisioner.md"

// guides are the pages whose marked code blocks must be in the code they
// name: the worked ports of docs/migrating.md are test/ports, which CI
// builds and runs (test/integration/ports).
var guides = []string{guide, "../../../docs/migrating.md"}

// blocks returns the Go code blocks preceded by a marker comment, by kind
// ("file" or "excerpt") and path.
var marked = regexp.MustCompile("(?s)<!-- (file|excerpt): ([^ ]+) -->\n```go\n(.*?)```")

func TestGuideShowsTheCodeCIBuilds(t *testing.T) {
	for _, guide := range guides {
		t.Run(filepath.Base(guide), func(t *testing.T) { checkMarkedBlocks(t, guide) })
	}
}

func checkMarkedBlocks(t *testing.T, guide string) {
	doc, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	matches := marked.FindAllStringSubmatch(string(doc), -1)
	if len(matches) < 2 {
		t.Fatalf("found %d marked code blocks, want the program or excerpts", len(matches))
	}
	for _, m := range matches {
		kind, path, code := m[1], m[2], m[3]
		src, err := os.ReadFile(filepath.Join("../../..", path))
		if err != nil {
			t.Errorf("%s %s: %v", kind, path, err)
			continue
		}
		switch kind {
		case "file":
			if string(src) != code {
				t.Errorf("the guide's copy of %s differs from the file: update the guide", path)
			}
		case "excerpt":
			if !strings.Contains(string(src), code) {
				t.Errorf("excerpt not found in %s:\n%s", path, code)
			}
		}
	}
}

func TestGuideProgramBindsAClaim(t *testing.T) {
	ctx := framework.TestContext(t, 2*time.Minute)
	bin := filepath.Join(t.TempDir(), "minimal-provisioner")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./examples/minimal-provisioner")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the guide's program: %v\n%s", err, out)
	}
	root := t.TempDir()
	run := exec.Command(bin, "--kubeconfig", cp.KubeconfigPath, "--root", root, "--leader-election-namespace=default")
	logs := &strings.Builder{}
	run.Stdout, run.Stderr = logs, logs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = run.Process.Kill()
		_ = run.Wait()
		if t.Failed() {
			t.Logf("provisioner output:\n%s", logs.String())
		}
	})

	cp.CreateTestStorageClass(t, framework.NewStorageClass("minimal", "example.com/minimal", nil))
	ns := cp.CreateTestNamespace(t, "guide")
	if _, err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, framework.NewPVC(ns, "data", "minimal", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, pv, err := framework.WaitForPVCBound(ctx, cp.Client, ns, "data")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, pv.Name)); err != nil {
		t.Fatalf("the volume's directory: %v", err)
	}
	if err := cp.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, cp.Client, pv.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, pv.Name)); !os.IsNotExist(err) {
		t.Fatalf("directory left after delete: %v", err)
	}
}

// TestGuideListsEveryOption: the guide's options table names every With*
// option of package controller, so that a reader of the guide knows them all.
func TestGuideListsEveryOption(t *testing.T) {
	src, err := os.ReadFile("../../../lib/controller/options.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(guide)
	if err != nil {
		t.Fatal(err)
	}
	options := regexp.MustCompile(`(?m)^func (With[A-Za-z]+)\(`).FindAllStringSubmatch(string(src), -1)
	if len(options) < 10 {
		t.Fatalf("found %d options in options.go: the pattern no longer matches", len(options))
	}
	for _, o := range options {
		if !strings.Contains(string(doc), "`"+o[1]+"(") {
			t.Errorf("docs/writing-a-provisioner.md does not list controller.%s in its options table", o[1])
		}
	}
}

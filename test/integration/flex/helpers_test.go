// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeprov/external-storage/flex/pkg/flex"
	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework"
)

// testTimeout bounds each test; provisioning here takes well under a second.
const testTimeout = 2 * time.Minute

// Paths of the scripts under test, relative to this package.
var (
	hostdirDriver = mustAbs("../../../flex/examples/hostdir")
	entrypoint    = mustAbs("../../../flex/examples/image/entrypoint.sh")
	testDriver    = mustAbs("../../testdata/flex/test-driver")
	createPV      = mustAbs("../../testdata/flex/create-pv")
)

func mustAbs(rel string) string {
	p, err := filepath.Abs(rel)
	if err != nil {
		panic(err)
	}
	return p
}

// requireTools fails (CI) or skips (locally) when the scripts' tools are missing.
func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			framework.Unavailable(t, "%s is not installed (hack/deps/flex.sh installs it): %v", tool, err)
		}
	}
}

// client returns an admin client with room for the test's bursts.
func client(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg := cp.RestConfig()
	cfg.QPS, cfg.Burst = 100, 200
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var unsafeName = regexp.MustCompile(`[^a-z0-9-]+`)

// uniqueName derives a DNS-label name from the test's name.
func uniqueName(t *testing.T, prefix string) string {
	n := unsafeName.ReplaceAllString(strings.ToLower(t.Name()), "-")
	n = prefix + "-" + n
	if len(n) > 50 {
		n = n[:50]
	}
	return strings.Trim(n, "-")
}

// startController runs a ProvisionController for p in the background until
// the returned stop function is called (or the test ends).
func startController(t *testing.T, name string, p controller.Provisioner, journalNS, identity string) (stop func()) {
	t.Helper()
	ctrl, err := controller.NewProvisionController(client(t), name, p,
		controller.WithRetryInterval(100*time.Millisecond, 2*time.Second),
		controller.WithJournal(journalNS, ""),
		controller.WithIdentity(identity),
		controller.WithEventFlushInterval(100*time.Millisecond),
		controller.WithOperationTimeout(time.Minute),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller %s: %v", name, err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// newProvisioner returns a flex Provisioner.
func newProvisioner(t *testing.T, name, identity string, l flex.Launcher, flexDriver string) *flex.Provisioner {
	t.Helper()
	p, err := flex.New(flex.Options{Name: name, Identity: identity, Launcher: l, FlexDriver: flexDriver, Client: client(t)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func createPVC(t *testing.T, ctx context.Context, ns, name, class, size string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc, err := client(t).CoreV1().PersistentVolumeClaims(ns).Create(ctx, framework.NewPVC(ns, name, class, size), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pvc
}

// deleteAndWaitGone deletes the claim and waits until its PV is gone too.
func deleteAndWaitGone(t *testing.T, ctx context.Context, pvc *corev1.PersistentVolumeClaim, pvName string) {
	t.Helper()
	c := client(t)
	if err := c.CoreV1().PersistentVolumeClaims(pvc.Namespace).Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitForPVDeleted(ctx, c, pvName); err != nil {
		t.Fatal(err)
	}
}

// waitForEventContaining waits for an event with reason about obj whose
// message contains every one of want, and returns its message.
func waitForEventContaining(t *testing.T, ctx context.Context, obj *corev1.PersistentVolumeClaim, reason string, want ...string) string {
	t.Helper()
	c := client(t)
	var last string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		events, err := framework.ListEvents(ctx, c, obj)
		if err != nil {
			return false, nil
		}
		for _, ev := range events {
			if ev.Reason != reason {
				continue
			}
			last = ev.Message
			if containsAll(ev.Message, want...) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event about %s/%s containing %q; last one: %q", reason, obj.Namespace, obj.Name, want, last)
	}
	return last
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// waitForFile waits until path exists and returns its content.
func waitForFile(t *testing.T, ctx context.Context, path string) string {
	t.Helper()
	var data []byte
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		var err error
		data, err = os.ReadFile(path)
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("%s never appeared", path)
	}
	return string(data)
}

// volumeDirs lists the volume directories under a driver root (everything
// but the test driver's bookkeeping).
func volumeDirs(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "calls" {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}

// readInput reads a JSON input the test driver recorded.
func readInput(t *testing.T, s string) map[string]string {
	t.Helper()
	var in map[string]string
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		t.Fatalf("recorded input %q: %v", s, err)
	}
	return in
}

// expectAnnotations checks the flex annotations every provisioned PV carries.
func expectAnnotations(t *testing.T, pv *corev1.PersistentVolume, provisioner, identity, launcher string) map[string]string {
	t.Helper()
	ann := pv.Annotations
	for k, want := range map[string]string{
		flex.AnnIdentity:            identity,
		flex.AnnLauncher:            launcher,
		controller.AnnProvisionedBy: provisioner,
	} {
		if ann[k] != want {
			t.Errorf("PV %s annotation %s = %q, want %q", pv.Name, k, ann[k], want)
		}
	}
	return readInput(t, ann[flex.AnnInput])
}

func pvNameOf(pvc *corev1.PersistentVolumeClaim) string {
	return fmt.Sprintf("pvc-%s", pvc.UID)
}

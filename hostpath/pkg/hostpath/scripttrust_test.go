// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/kubeprov/external-storage/lib/podrun/podruntest"
)

// Scripts as local-path users often write them: the path expanded
// unquoted, so that the shell splits it at spaces and globs it.
const (
	unquotedSetup    = "set -eu\nmkdir -m 0777 -p ${VOL_DIR}\n"
	unquotedTeardown = "set -eu\nrm -rf $VOL_DIR\n"
)

// unquotedScriptProvisioner is a provisioner whose setup and teardown run
// in helper pods with this machine's /bin/sh, in the node path as their
// working directory (so that a glob the shell expands there meets the
// other volumes), and the node path.
func unquotedScriptProvisioner(t *testing.T, setup, teardown string) (*Provisioner, string) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	c := newHelperClient()
	dir := t.TempDir()
	go func() {
		for range podruntest.Kubelet(ctx, t, c, helperNS, runsScriptIn(t, dir)) {
		}
	}()
	return scriptProvisionerAt(t, newHelperDirs(t, c, time.Minute), dir, setup, teardown), dir
}

// precious makes another volume's directory under root, holding a file.
func precious(t *testing.T, root, rel string) string {
	t.Helper()
	dir := filepath.Join(root, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func assertKept(t *testing.T, dir string) {
	t.Helper()
	if got, err := os.ReadFile(filepath.Join(dir, "data")); err != nil || string(got) != "keep" {
		t.Errorf("another volume's data %s: %q, %v; want it untouched", dir, got, err)
	}
}

// TestScriptPathIsOneShellWord (issue 36 case 3): a tenant writes "x *"
// (or another shell character) into the annotation the class's pathPattern
// reads. Handed to scripts that expand $VOL_DIR unquoted, that path would
// make and then remove every directory beside it. The claim is refused,
// naming the annotation and the character, and nothing is made or removed;
// a PV that an earlier version made with such a path is not handed to the
// teardown either.
func TestScriptPathIsOneShellWord(t *testing.T) {
	for _, value := range []string{"x *", "x;rm", "a?b", "$(id)", "x\ny", "`id`", "a'b", "a[b]"} {
		t.Run(value, func(t *testing.T) {
			p, dir := unquotedScriptProvisioner(t, unquotedSetup, unquotedTeardown)
			other := precious(t, dir, "other")
			pv, err := provisionEnded(t, p, patterned("pvc-1", "worker-7", value))
			if err == nil {
				// Today's code: the script made it; its teardown runs.
				_, derr := untilEnded(t.Context(), t, func() (any, error) { return nil, p.Delete(t.Context(), pv) })
				t.Errorf("claim with annotation dir %q provisioned at %s (teardown: %v), want it refused", value, pv.Spec.HostPath.Path, derr)
			} else {
				bad := []rune(strings.TrimLeft(value, "abxy"))[0]
				for _, want := range []string{`claim annotation "dir"`, fmt.Sprintf("%q", bad)} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("Provision: %v, want it to name %s", err, want)
					}
				}
			}
			assertKept(t, other)
			if got := entries(t, dir); len(got) != 1 {
				t.Errorf("the node path holds %q, want only the other volume", got)
			}
		})
	}
	t.Run("PV of an earlier version", func(t *testing.T) {
		p, dir := unquotedScriptProvisioner(t, unquotedSetup, unquotedTeardown)
		other := precious(t, dir, "other")
		pv := provision(t, p, patterned("pvc-1", "worker-7", "x"))
		pv.Annotations[AnnDir] = "x *"
		pv.Spec.HostPath.Path = filepath.Join(dir, "x *")
		_, err := untilEnded(t.Context(), t, func() (any, error) { return nil, p.Delete(t.Context(), pv) })
		if err == nil || !strings.Contains(err.Error(), "' '") {
			t.Errorf("Delete of a PV whose directory is %q: %v, want it refused naming ' '", "x *", err)
		}
		assertKept(t, other)
	})
}

// TestScriptsRefuseNonEmptyDirectory (issue 36 case 4): a patterned claim
// names a directory that holds a deleted PV's retained data. The built-in
// helper refuses it; so does the path check before a setup script, and the
// script never runs.
func TestScriptsRefuseNonEmptyDirectory(t *testing.T) {
	for name, newP := range map[string]func(t *testing.T) (*Provisioner, string){
		"built-in helper": func(t *testing.T) (*Provisioner, string) { p, dir, _ := modes[1].new(t); return p, dir },
		"scripts": func(t *testing.T) (*Provisioner, string) {
			return unquotedScriptProvisioner(t, "set -eu\nmkdir -p \"$VOL_DIR\"\ntouch \"$VOL_DIR/setup-ran\"\n", quotaTeardown)
		},
	} {
		t.Run(name, func(t *testing.T) {
			p, dir := newP(t)
			retained := precious(t, dir, "team-a")
			pv, err := provisionEnded(t, p, patterned("pvc-1", "worker-7", "team-a"))
			if err == nil || !strings.Contains(err.Error(), "already exists and holds files") {
				t.Errorf("claim for the retained directory: PV %v, %v; want it refused as holding files", pv != nil, err)
			}
			assertKept(t, retained)
			if got := entries(t, retained); len(got) != 1 {
				t.Errorf("the retained directory holds %v, want only its data (the setup must not run)", got)
			}
		})
	}
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package nfs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework"
)

// upstreamName is nfs-subdir-external-provisioner's default provisioner
// name, as its deploy/class.yaml and Deployment give it.
const upstreamName = "k8s-sigs.io/nfs-subdir-external-provisioner"

// shareVolume makes a server-mode volume of srv to serve as a subdir-mode
// share and returns its path: on this machine both the NFS path clients
// mount and the directory the subdir provisioner works in (it cannot mount
// NFS).
func shareVolume(t *testing.T, ctx context.Context, srv *server, ns, name string) string {
	t.Helper()
	class := "share-" + ns + "-" + name
	cp.CreateTestStorageClass(t, framework.NewStorageClass(class, srv.name, nil))
	return bound(t, ctx, ns, name, class, nil).Spec.NFS.Path
}

// TestSubdirUpstreamExamples replays nfs-subdir-external-provisioner's
// README and deploy/ examples: its Deployment's environment (NFS_SERVER,
// NFS_PATH, PROVISIONER_NAME, ENABLE_LEADER_ELECTION) and its example
// classes, unchanged, and checks the directories on the share after each
// claim is created and deleted.
func TestSubdirUpstreamExamples(t *testing.T) {
	requireNFS(t)
	ctx := framework.TestContext(t, 6*time.Minute)
	srv := startServer(t, nil)
	ns := cp.CreateTestNamespace(t, "nfs-upstream")
	share := shareVolume(t, ctx, srv, ns, "share")

	startProc(t, []string{"--mode=subdir", "--nfs-root=" + share, "--leader-election-namespace=" + ns},
		[]string{"NFS_SERVER=" + loopback, "NFS_PATH=" + share, "PROVISIONER_NAME=" + upstreamName, "ENABLE_LEADER_ELECTION=true"})
	class := func(t *testing.T, name string, params map[string]string) string {
		cp.CreateTestStorageClass(t, framework.NewStorageClass(name, upstreamName, params))
		return name
	}

	t.Run("ENABLE_LEADER_ELECTION", func(t *testing.T) {
		lease, err := cp.Client.CoordinationV1().Leases(ns).Get(ctx, controller.LeaseName(upstreamName), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("no leader Lease with ENABLE_LEADER_ELECTION=true: %v", err)
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			t.Errorf("Lease %s has no holder", lease.Name)
		}
	})

	// README, "Deploying your storage class": a directory per namespace and
	// storage-path annotation, deleted with the claim.
	t.Run("readme_class_pathPattern_annotation_onDelete_delete", func(t *testing.T) {
		n := class(t, "nfs-client-"+ns, map[string]string{
			"pathPattern": "${.PVC.namespace}/${.PVC.annotations.nfs.io/storage-path}",
			"onDelete":    "delete",
		})
		annotated := bound(t, ctx, ns, "test-claim", n, func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Annotations = map[string]string{"nfs.io/storage-path": "test-path"}
		})
		if want := share + "/" + ns + "/test-path"; annotated.Spec.NFS.Path != want {
			t.Fatalf("PV path %s, want %s", annotated.Spec.NFS.Path, want)
		}
		nfsWrite(t, ctx, annotated.Spec.NFS.Path, "SUCCESS", "", "4")
		mustRead(t, ctx, annotated.Spec.NFS.Path, "SUCCESS", "", "3")

		// Without the annotation the pattern is "<namespace>/", which is
		// "<namespace>" as upstream: a directory holding test-path, so it is
		// refused while test-claim exists (upstream would nest the volumes).
		plain := createPVC(t, ns, "no-annotation", n, "1Mi", nil)
		waitEvent(t, ctx, plain, "overlaps", annotated.Name)
		deleteClaim(t, ctx, ns, "test-claim", annotated.Name)
		if exists(t, filepath.Join(share, ns, "test-path")) {
			t.Errorf("%s/test-path still exists after onDelete delete", ns)
		}
		_, pv, err := framework.WaitForPVCBound(ctx, cp.Client, ns, plain.Name)
		if err != nil {
			t.Fatal(err)
		}
		if want := share + "/" + ns; pv.Spec.NFS.Path != want {
			t.Errorf("PV of a claim without the annotation: path %s, want %s", pv.Spec.NFS.Path, want)
		}
		deleteClaim(t, ctx, ns, plain.Name, pv.Name)
		if exists(t, filepath.Join(share, ns)) {
			t.Errorf("%s still exists after onDelete delete", ns)
		}
	})

	// deploy/class.yaml: archiveOnDelete "false", default directory name.
	t.Run("deploy_class_archiveOnDelete_false", func(t *testing.T) {
		pv := bound(t, ctx, ns, "deploy-claim", class(t, "nfs-deploy-"+ns, map[string]string{"archiveOnDelete": "false"}), nil)
		rel := ns + "-deploy-claim-" + pv.Name
		if pv.Spec.NFS.Path != share+"/"+rel {
			t.Fatalf("PV path %s, want %s/%s", pv.Spec.NFS.Path, share, rel)
		}
		nfsWrite(t, ctx, pv.Spec.NFS.Path, "f", "data\n", "4")
		deleteClaim(t, ctx, ns, "deploy-claim", pv.Name)
		if exists(t, filepath.Join(share, rel)) || exists(t, filepath.Join(share, "archived-"+rel)) {
			t.Errorf("archiveOnDelete false left %s or its archive", rel)
		}
	})

	// No parameters: archived as archived-<directory>, as upstream's default.
	t.Run("no_parameters_archive", func(t *testing.T) {
		pv := bound(t, ctx, ns, "plain-claim", class(t, "nfs-plain-"+ns, nil), nil)
		rel := ns + "-plain-claim-" + pv.Name
		nfsWrite(t, ctx, pv.Spec.NFS.Path, "keep", "kept\n", "4")
		deleteClaim(t, ctx, ns, "plain-claim", pv.Name)
		if exists(t, filepath.Join(share, rel)) {
			t.Errorf("%s still exists after the default archive", rel)
		}
		mustRead(t, ctx, share+"/archived-"+rel, "keep", "kept\n", "4")
	})

	// onDelete wins over a contradicting archiveOnDelete, as upstream.
	t.Run("onDelete_wins_over_archiveOnDelete", func(t *testing.T) {
		del := bound(t, ctx, ns, "wins-delete", class(t, "nfs-wins-delete-"+ns, map[string]string{
			"pathPattern": "wins/${.PVC.name}", "onDelete": "delete", "archiveOnDelete": "true"}), nil)
		ret := bound(t, ctx, ns, "wins-retain", class(t, "nfs-wins-retain-"+ns, map[string]string{
			"pathPattern": "wins/${.PVC.name}", "onDelete": "retain", "archiveOnDelete": "false"}), nil)
		nfsWrite(t, ctx, ret.Spec.NFS.Path, "r", "retained\n", "4")
		deleteClaim(t, ctx, ns, "wins-delete", del.Name)
		deleteClaim(t, ctx, ns, "wins-retain", ret.Name)
		if exists(t, filepath.Join(share, "wins", "wins-delete")) || exists(t, filepath.Join(share, "wins", "archived-wins-delete")) {
			t.Errorf("onDelete delete with archiveOnDelete true did not delete")
		}
		mustRead(t, ctx, ret.Spec.NFS.Path, "r", "retained\n", "4")
	})

	// A pattern that expands to nothing falls back to the default name.
	t.Run("empty_pattern_falls_back_to_default_name", func(t *testing.T) {
		pv := bound(t, ctx, ns, "fallback", class(t, "nfs-fallback-"+ns, map[string]string{
			"pathPattern": "${.PVC.labels.missing}/${.PVC.annotations.missing}", "onDelete": "delete"}), nil)
		if want := share + "/" + ns + "-fallback-" + pv.Name; pv.Spec.NFS.Path != want {
			t.Errorf("PV path %s, want the default name %s", pv.Spec.NFS.Path, want)
		}
		deleteClaim(t, ctx, ns, "fallback", pv.Name)
	})

	// --strict-parameters (STRICT_PARAMETERS) keeps the stricter rules.
	t.Run("strict_parameters", func(t *testing.T) {
		strictName := "kubeprov.io/nfs-subdir-strict"
		startProc(t, []string{"--mode=subdir", "--nfs-root=" + share},
			[]string{"NFS_SERVER=" + loopback, "NFS_PATH=" + share, "PROVISIONER_NAME=" + strictName, "STRICT_PARAMETERS=true"})
		for claim, tc := range map[string]struct {
			params map[string]string
			want   []string
		}{
			"missing-annotation": {map[string]string{"pathPattern": "${.PVC.namespace}/${.PVC.annotations.nfs.io/storage-path}"},
				[]string{"pathPattern", `the claim has no annotation "nfs.io/storage-path"`}},
			"empty-component": {map[string]string{"pathPattern": "a//${.PVC.name}"}, []string{"pathPattern", "empty component"}},
			"contradiction": {map[string]string{"onDelete": "delete", "archiveOnDelete": "true"},
				[]string{"onDelete", "archiveOnDelete", "contradict"}},
		} {
			n := "nfs-strict-" + claim + "-" + ns
			cp.CreateTestStorageClass(t, framework.NewStorageClass(n, strictName, tc.params))
			failsWith(t, ctx, createPVC(t, ns, "strict-"+claim, n, "1Mi", nil), tc.want...)
		}
		if exists(t, filepath.Join(share, "a")) {
			t.Errorf("strict mode refused a//... but created a")
		}
	})
}

// TestSubdirTwoShares: one subdir-mode instance, two shares configured with
// --share (no default share), each class selecting one with its share
// parameter; a class naming another share is refused; a share that is not
// mounted stops the provisioner at start with an error naming it.
func TestSubdirTwoShares(t *testing.T) {
	requireNFS(t)
	ctx := framework.TestContext(t, 6*time.Minute)
	srv := startServer(t, nil)
	ns := cp.CreateTestNamespace(t, "nfs-shares")
	gold, silver := shareVolume(t, ctx, srv, ns, "gold"), shareVolume(t, ctx, srv, ns, "silver")
	shareFlag := func(name, dir string) string {
		return "--share=name=" + name + ",server=" + loopback + ",path=" + dir + ",root=" + dir
	}

	t.Run("unmounted_share_stops_the_start", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "not-mounted")
		cmd := exec.CommandContext(ctx, framework.BuildTestBinary(t, "nfs", "nfs-provisioner"),
			"--kubeconfig="+cp.KubeconfigPath, "--mode=subdir", "--provisioner=kubeprov.io/nfs-unmounted",
			shareFlag("gold", gold), "--share=name=bronze,server="+loopback+",path=/bronze,root="+missing)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), `NFS share "bronze" `+loopback+`:/bronze (mounted at `+missing+`)`) {
			t.Fatalf("start with an unmounted share: %v; output:\n%s", err, out)
		}
	})

	name := "kubeprov.io/nfs-two-shares"
	startProc(t, []string{"--mode=subdir", "--provisioner=" + name, shareFlag("gold", gold), shareFlag("silver", silver)}, nil)
	class := func(t *testing.T, suffix string, params map[string]string) string {
		n := "nfs-shares-" + suffix + "-" + ns
		cp.CreateTestStorageClass(t, framework.NewStorageClass(n, name, params))
		return n
	}
	params := func(share string) map[string]string {
		return map[string]string{"share": share, "pathPattern": "${.PVC.namespace}/${.PVC.name}", "onDelete": "delete"}
	}
	onGold := bound(t, ctx, ns, "on-gold", class(t, "gold", params("gold")), nil)
	onSilver := bound(t, ctx, ns, "on-silver", class(t, "silver", params("silver")), nil)
	for pv, want := range map[*corev1.PersistentVolume]string{onGold: gold + "/" + ns + "/on-gold", onSilver: silver + "/" + ns + "/on-silver"} {
		if pv.Spec.NFS.Server != loopback || pv.Spec.NFS.Path != want {
			t.Errorf("PV %s: NFS source %+v, want %s:%s", pv.Name, pv.Spec.NFS, loopback, want)
		}
		nfsWrite(t, ctx, pv.Spec.NFS.Path, "which", want+"\n", "4")
		mustRead(t, ctx, pv.Spec.NFS.Path, "which", want+"\n", "3")
	}
	if exists(t, filepath.Join(gold, ns, "on-silver")) || exists(t, filepath.Join(silver, ns, "on-gold")) {
		t.Errorf("a volume's directory went to the other share")
	}

	for claim, p := range map[string]map[string]string{
		"no-share":      {"pathPattern": "${.PVC.name}"},
		"unknown-share": {"share": "platinum"},
	} {
		pvc := createPVC(t, ns, claim, class(t, claim, p), "1Mi", nil)
		failsWith(t, ctx, pvc, "share", "gold, silver")
	}
	for _, c := range []struct {
		pv    *corev1.PersistentVolume
		claim string
		dir   string
	}{{onGold, "on-gold", filepath.Join(gold, ns, "on-gold")}, {onSilver, "on-silver", filepath.Join(silver, ns, "on-silver")}} {
		deleteClaim(t, ctx, ns, c.claim, c.pv.Name)
		if exists(t, c.dir) {
			t.Errorf("%s still exists after onDelete delete", c.dir)
		}
	}
	if _, err := os.Stat(gold); err != nil {
		t.Errorf("share gold itself: %v", err)
	}
}

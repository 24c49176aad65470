// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package charts

import (
	"slices"
	"strings"
	"testing"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework/helm"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// TestNotesTellWhatUninstallLeaves renders each chart's NOTES.txt, what
// helm install prints, in each mode: it tells how to remove what helm
// uninstall leaves behind, the provisioner's in-flight journal ConfigMaps
// (by the label the library writes on them, which test/e2e finds after
// uninstalling every chart), the Secret that signs them and, exactly when
// the release elects a leader,
// its Lease; charts/nfs also the StatefulSet's export claim.
func TestNotesTellWhatUninstallLeaves(t *testing.T) {
	for _, p := range pairings {
		t.Run(p.String(), func(t *testing.T) {
			ch := loadChart(t, p.chart)
			notes, err := helm.Notes(ch, "r", testNamespace, p.values)
			if err != nil {
				t.Fatal(err)
			}
			journals := "kubectl delete configmap -n " + testNamespace + " -l " + controller.LabelManagedBy + "=kubeprov-external-storage"
			if !strings.Contains(notes, journals) {
				t.Errorf("NOTES.txt does not say %q:\n%s", journals, notes)
			}
			journalKey := "kubectl delete secret -n " + testNamespace + " " + controller.JournalKeySecret
			if !strings.Contains(notes, journalKey) {
				t.Errorf("NOTES.txt does not say %q:\n%s", journalKey, notes)
			}
			objs := mustRender(t, ch, "r", testNamespace, p.values)
			_, c := pod(t, objs)
			if leader := slices.Contains(c.Args, "--leader-election"); strings.Contains(notes, "kubectl get lease") != leader {
				t.Errorf("the release elects a leader: %t; NOTES.txt tells to remove a Lease: %t\n%s", leader, !leader, notes)
			}
			if p.chart != "nfs" {
				return
			}
			ws, err := manifests.Workloads(objs)
			if err != nil {
				t.Fatal(err)
			}
			exportClaim := "kubectl delete pvc -n " + testNamespace + " export-" + ws[0].Name + "-0"
			if !strings.Contains(notes, exportClaim) {
				t.Errorf("NOTES.txt does not say %q:\n%s", exportClaim, notes)
			}
		})
	}
}

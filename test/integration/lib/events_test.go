// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package lib

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/framework"
)

// A burst of claims with the events written through a client at the
// binaries' default budget (--kube-api-qps 5, burst 10, as the CSI
// sidecars): every claim shows its own ProvisioningSucceeded, naming its
// volume, where `kubectl describe pvc` looks.
func TestBurstLeavesASuccessEventOnEveryClaim(t *testing.T) {
	const claims = 100
	ctx := framework.TestContext(t, 4*time.Minute)
	name := uniqueName("events")
	events := defaultBudgetEventClient(t)
	runController(t, name, newStore(t), controller.WithEventClient(events),
		controller.WithEventFlushInterval(controller.DefaultEventFlushInterval))
	sc := cp.CreateTestStorageClass(t, framework.NewStorageClass(className(name), name, nil))
	ns := cp.CreateTestNamespace(t, "events")

	uids := map[types.UID]string{}
	for i := range claims {
		pvc := createClaim(t, ctx, framework.NewPVC(ns, fmt.Sprintf("c%d", i), sc.Name, "1Gi"))
		uids[pvc.UID] = pvc.Name
	}
	var missing []string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		succeeded := map[types.UID]bool{}
		for _, ev := range list.Items {
			if ev.Reason != controller.EventProvisioningSucceeded || ev.InvolvedObject.Kind != "PersistentVolumeClaim" {
				continue
			}
			if want := "pvc-" + string(ev.InvolvedObject.UID); ev.Type != corev1.EventTypeNormal || !strings.Contains(ev.Message, want) {
				return false, fmt.Errorf("claim %s: success event %q does not name its volume %s", ev.InvolvedObject.Name, ev.Message, want)
			}
			succeeded[ev.InvolvedObject.UID] = true
		}
		missing = missing[:0]
		for uid, claim := range uids {
			if !succeeded[uid] {
				missing = append(missing, claim)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		t.Fatalf("%d of %d claims have no %s event (%v): %v", len(missing), claims, controller.EventProvisioningSucceeded, err, missing)
	}
}

// defaultBudgetEventClient is an admin client at the binaries' default
// budget (--kube-api-qps 5, burst 10, as the CSI sidecars), for events.
func defaultBudgetEventClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg := cp.RestConfig()
	cfg.QPS, cfg.Burst = cli.DefaultKubeAPIQPS, cli.DefaultKubeAPIBurst
	events, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

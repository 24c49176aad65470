// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package faults

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/kubeprov/external-storage/test/backend"
	"github.com/kubeprov/external-storage/test/backend/all"
	"github.com/kubeprov/external-storage/test/framework"
)

// Bounds of the waits of one case. A passing case takes seconds; these only
// decide how long a failing one takes to say so.
const (
	caseTimeout = 5 * time.Minute
	// settleTimeout: after the fault, every claim is Bound (or failed with a
	// Warning event) and every deleted claim's PV is gone.
	settleTimeout = 2 * time.Minute
	// deleteTimeout: after deleting the claims, every PV of the class is gone.
	deleteTimeout = 2 * time.Minute
	// assetsTimeout: the assets agree with the PVs.
	assetsTimeout = 30 * time.Second
	// logLines of each replica's log are shown when a case fails.
	logLines = 40
)

// env is one case's world: a backend with its own provisioner name, a
// namespace, a StorageClass, the replicas and the burst's claims.
type env struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
	b      backend.Backend
	ns     string
	class  string

	pvcs corelisters.PersistentVolumeClaimLister
	pvs  corelisters.PersistentVolumeLister

	mu       sync.Mutex
	replicas map[string]*framework.Process // the running process of each identity
	started  []*framework.Process          // every process started, for their logs
	uids     map[string]types.UID          // claim name -> UID
	deleted  map[string]bool               // claims the case deleted
}

// instance is a backend with the namespace of its replicas' journal and
// Lease.
type instance struct {
	b  backend.Backend
	ns string
}

// newInstance makes a backend with a provisioner name of its own, stopped
// when the test ends.
func newInstance(t *testing.T, backendName string) *instance {
	t.Helper()
	ns := cp.CreateTestNamespace(t, "faults")
	// A provisioner this slow keeps a burst of a dozen claims in flight for
	// a few seconds, long enough to inject a fault in its middle.
	qps := max(5, claims/3)
	b, err := all.New(t.Context(), backendName, backend.Config{
		ControlPlane:    cp,
		Namespace:       ns,
		ProvisionerName: ns + ".faults.kubeprov.io", // valid as a CSI driver name too
		Dir:             t.TempDir(),
		ExtraArgs:       []string{fmt.Sprintf("--kube-api-qps=%d", qps), fmt.Sprintf("--kube-api-burst=%d", qps)},
		Log:             t.Logf,
	})
	if err != nil {
		unavailable(t, backendName, err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("stopping the %s backend: %v", backendName, err)
		}
	})
	return &instance{b: b, ns: ns}
}

// newEnv starts the replicas of a backend (two competing for the Lease with
// leaderElection, else one) for one case: of shared, or of an instance of
// the case's own if shared is nil. Everything stops when the case ends, the
// claims first.
func newEnv(t *testing.T, backendName string, shared *instance, leaderElection bool) *env {
	t.Helper()
	inst := shared
	if inst == nil {
		inst = newInstance(t, backendName)
	}
	ctx := framework.TestContext(t, caseTimeout)
	cfg := cp.RestConfig()
	cfg.QPS, cfg.Burst = 200, 400
	client := kubernetes.NewForConfigOrDie(cfg)
	ns := inst.ns
	if shared != nil {
		ns = cp.CreateTestNamespace(t, "faults")
	}
	b := inst.b
	e := &env{
		t: t, ctx: ctx, client: client, b: b, ns: ns, class: ns,
		replicas: map[string]*framework.Process{}, uids: map[string]types.UID{}, deleted: map[string]bool{},
	}

	sc := framework.NewStorageClass(e.class, b.ProvisionerName(), b.Parameters())
	if _, err := client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), framework.DefaultCleanupTimeout)
		defer cancel()
		if err := client.StorageV1().StorageClasses().Delete(ctx, e.class, metav1.DeleteOptions{}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	factory := informers.NewSharedInformerFactory(client, 0)
	e.pvcs = factory.Core().V1().PersistentVolumeClaims().Lister()
	e.pvs = factory.Core().V1().PersistentVolumes().Lister()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	// Cleanups run last first: the claims go while the replicas still run,
	// then the replicas stop, then a failed case shows their logs.
	t.Cleanup(e.showLogsIfFailed)
	t.Cleanup(e.stopReplicas)
	t.Cleanup(e.removeLeftovers)

	identities := []string{"a"}
	if leaderElection {
		identities = []string{"a", "b"}
	}
	for _, id := range identities {
		p, err := b.StartProvisioner(ctx, id, leaderElection)
		if err != nil {
			t.Fatalf("starting replica %s: %v", id, err)
		}
		e.track(id, p)
	}
	if leaderElection {
		e.waitForLeader()
	}
	return e
}

// unavailable fails the test, or skips it when the machine lacks the
// backend's components, except under CI=true, where every backend must run.
func unavailable(t *testing.T, backendName string, err error) {
	t.Helper()
	msg := fmt.Sprintf("the %s backend cannot start: %v", backendName, err)
	if !all.IsMissing(err) {
		t.Fatal(msg)
	}
	framework.Unavailable(t, "%s", msg)
}

func (e *env) track(identity string, p *framework.Process) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.replicas[identity] = p
	e.started = append(e.started, p)
}

// startReplica starts (again) the replica called identity, with the leader
// election setting of the first.
func (e *env) startReplica(identity string) (*framework.Process, error) {
	p, err := e.b.StartProvisioner(e.ctx, identity, len(e.current()) > 1)
	if err != nil {
		return nil, fmt.Errorf("starting replica %s: %w", identity, err)
	}
	e.track(identity, p)
	return p, nil
}

// replica is the running process of identity.
func (e *env) replica(identity string) *framework.Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.replicas[identity]
}

// current lists the running process of each identity.
func (e *env) current() []*framework.Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Collect(maps.Values(e.replicas))
}

// leader is the replica that leads now: the one that said so last among the
// live ones.
func (e *env) leader() *framework.Process {
	for _, p := range e.current() {
		select {
		case <-p.Exited():
			continue
		default:
		}
		if p.HasLog("Became leader") {
			return p
		}
	}
	return nil
}

// standby is a live replica other than p.
func (e *env) standby(p *framework.Process) *framework.Process {
	for _, q := range e.current() {
		select {
		case <-q.Exited():
		default:
			if q != p {
				return q
			}
		}
	}
	return nil
}

func (e *env) waitForLeader() {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return e.leader() != nil, nil
	})
	if err != nil {
		e.t.Fatalf("no replica became leader: %v", err)
	}
}

// createClaims creates the burst: n claims of the case's class.
func (e *env) createClaims(n int) {
	e.t.Helper()
	for i := range n {
		pvc := framework.NewPVC(e.ns, fmt.Sprintf("claim-%03d", i), e.class, "1Mi")
		created, err := e.client.CoreV1().PersistentVolumeClaims(e.ns).Create(e.ctx, pvc, metav1.CreateOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		e.mu.Lock()
		e.uids[created.Name] = created.UID
		e.mu.Unlock()
	}
}

// claimNames lists the burst's claims, sorted.
func (e *env) claimNames() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Sorted(maps.Keys(e.uids))
}

func (e *env) uid(claim string) types.UID {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.uids[claim]
}

func (e *env) isDeleted(claim string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.deleted[claim]
}

// deleteClaim deletes a claim of the burst and remembers that it should not
// bind.
func (e *env) deleteClaim(name string) error {
	e.mu.Lock()
	e.deleted[name] = true
	e.mu.Unlock()
	err := e.client.CoreV1().PersistentVolumeClaims(e.ns).Delete(e.ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting claim %s: %w", name, err)
	}
	return nil
}

// volumes lists the PVs of the case's class, sorted by name.
func (e *env) volumes() []*corev1.PersistentVolume {
	all, _ := e.pvs.List(labels.Everything()) // a lister never fails
	var pvs []*corev1.PersistentVolume
	for _, pv := range all {
		if pv.Spec.StorageClassName == e.class {
			pvs = append(pvs, pv)
		}
	}
	slices.SortFunc(pvs, func(a, b *corev1.PersistentVolume) int { return strings.Compare(a.Name, b.Name) })
	return pvs
}

// claimsWithPV maps each claim UID that a PV of the class names to its PVs.
func (e *env) claimsWithPV() map[types.UID][]string {
	owners := map[types.UID][]string{}
	for _, pv := range e.volumes() {
		if ref := pv.Spec.ClaimRef; ref != nil {
			owners[ref.UID] = append(owners[ref.UID], pv.Name)
		}
	}
	return owners
}

// unprovisioned lists the live claims of the burst that no PV names yet.
func (e *env) unprovisioned(withPV map[types.UID][]string) []string {
	var names []string
	for _, name := range e.claimNames() {
		if _, ok := withPV[e.uid(name)]; !ok && !e.isDeleted(name) {
			names = append(names, name)
		}
	}
	return names
}

// waitInFlight waits until a quarter of the burst has its PV, and fails the
// case if the whole burst got there first (a fault injected after the
// burst tests nothing). It returns the number of PVs.
func (e *env) waitInFlight() int {
	e.t.Helper()
	n := len(e.claimNames())
	threshold := max(1, n/4)
	var got int
	err := wait.PollUntilContextCancel(e.ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		got = len(e.volumes())
		return got >= threshold, nil
	})
	if err != nil {
		e.t.Fatalf("waiting for %d of %d PVs to exist: %v (%d exist)", threshold, n, err, got)
	}
	if got >= n {
		e.t.Fatalf("all %d PVs existed before the fault: the burst went too fast to catch in flight", n)
	}
	return got
}

// settle waits until every live claim is Bound and every deleted claim's PV
// is gone. When that does not happen in time, a claim that is not Bound but
// has a Warning event counts as failed the way a user can see; anything
// else fails the case.
func (e *env) settle() {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, settleTimeout, true, func(context.Context) (bool, error) {
		return len(e.pending()) == 0, nil
	})
	if err == nil {
		return
	}
	var failed, stuck []string
	for _, name := range e.pending() {
		if e.isDeleted(name) {
			stuck = append(stuck, fmt.Sprintf("deleted claim %s still has PVs %v", name, e.claimsWithPV()[e.uid(name)]))
			continue
		}
		desc, warned := e.describeClaim(name)
		if warned {
			failed = append(failed, desc)
		} else {
			stuck = append(stuck, desc)
		}
	}
	if len(failed) > 0 {
		e.t.Logf("%d claims failed with a Warning event:\n%s", len(failed), strings.Join(failed, "\n"))
	}
	if len(stuck) > 0 {
		e.t.Errorf("%d claims neither Bound nor failed with a Warning event after %s:\n%s", len(stuck), settleTimeout, strings.Join(stuck, "\n"))
	}
}

// pending lists the claims that are not where they should end: live ones
// not Bound, deleted ones with a PV.
func (e *env) pending() []string {
	withPV := e.claimsWithPV()
	var names []string
	for _, name := range e.claimNames() {
		if e.isDeleted(name) {
			if _, ok := withPV[e.uid(name)]; ok {
				names = append(names, name)
			}
			continue
		}
		if pvc, err := e.pvcs.PersistentVolumeClaims(e.ns).Get(name); err != nil || pvc.Status.Phase != corev1.ClaimBound {
			names = append(names, name)
		}
	}
	return names
}

// describeClaim renders a claim's state and events for a failure message,
// and reports whether it has a Warning event.
func (e *env) describeClaim(name string) (string, bool) {
	pvc, err := e.client.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("claim %s: %v", name, err), false
	}
	events, warned := e.describeEvents(pvc)
	return fmt.Sprintf("claim %s: %s, volume %q%s", name, pvc.Status.Phase, pvc.Spec.VolumeName, events), warned
}

// describeEvents lists obj's events and reports whether one is a Warning.
func (e *env) describeEvents(obj runtime.Object) (string, bool) {
	events, err := framework.ListEvents(e.ctx, e.client, obj)
	if err != nil {
		return fmt.Sprintf(", events: %v", err), false
	}
	var b strings.Builder
	warned := false
	for _, ev := range events {
		warned = warned || ev.Type == corev1.EventTypeWarning
		fmt.Fprintf(&b, "\n    %s %s (x%d): %s", ev.Type, ev.Reason, max(ev.Count, 1), ev.Message)
	}
	if len(events) == 0 {
		b.WriteString(", no events")
	}
	return b.String(), warned
}

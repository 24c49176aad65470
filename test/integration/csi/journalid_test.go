// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/test/csidriver"
)

// journalIDGrace is how long after CreateVolume's answer a kill may still
// find the volume's ID missing from the journal: one ConfigMap write on
// loopback. The client's throttled backlog in a burst, which the ID write
// waited behind before (issue 36 case 8), is seconds.
const journalIDGrace = 500 * time.Millisecond

// TestVolumeIDReachesJournalDespiteThrottling: ours runs with the sidecar's
// default API budget (--kube-api-qps=5, --kube-api-burst=10) through a burst
// of claims, so that its PV writes wait behind the client's rate limiter,
// and is SIGKILLed right after a CreateVolume answers. Every volume answered
// before that carries its ID in the journal entry, though its PV may still
// wait for the budget; once the claims are deleted, ours started again
// deletes those volumes by ID and creates none of them again.
func TestVolumeIDReachesJournalDespiteThrottling(t *testing.T) {
	var mu sync.Mutex
	answered := map[string]time.Time{} // volume name -> CreateVolume's answer
	killNow := make(chan struct{})
	// Past the budget's burst of 10, so that PVs wait for the rate limiter.
	const killAfter = 25
	e := newEnv(t, inProcessDriver, csidriver.Options{OperationDelay: 20 * time.Millisecond, Logf: func(format string, args ...any) {
		if !strings.HasPrefix(format, "CreateVolume ") || len(args) != 2 {
			return
		}
		name, answer := args[0].(string), args[1].(string)
		if strings.Contains(answer, "error") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, ok := answered[name]; !ok {
			answered[name] = time.Now()
			if len(answered) == killAfter {
				close(killNow)
			}
		}
	}})
	class := e.createClass(nil)
	throttled := []string{"--kube-api-qps=5", "--kube-api-burst=10"}
	e.prov = e.startProvisioner(throttled...)
	if err := e.prov.WaitReady(e.ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	recorded := e.watchRecordedIDs()

	const burst = 40
	claims := make([]*corev1.PersistentVolumeClaim, burst)
	for i := range claims {
		claims[i] = e.createClaim(class.Name, "1Gi")
	}
	select {
	case <-killNow:
	case <-e.ctx.Done():
		t.Fatalf("the driver answered fewer than %d CreateVolume calls", killAfter)
	}
	// The kill comes journalIDGrace after the killAfter-th answer: every
	// volume answered until then must have its ID recorded by the kill, and
	// most have no PV yet (the budget writes 5 a second).
	time.Sleep(journalIDGrace)
	if err := e.prov.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	entries := e.journalEntries()
	// A volume whose PV exists needs no ID: a restart finds the PV. Its
	// entry may still be there (its removal not yet written, or written
	// again by a sync of the claim that came before the PV reached the
	// cache), so an entry alone does not mean the PV was not saved.
	saved := e.volumeNames()

	mu.Lock()
	answeredAtKill := maps.Clone(answered)
	mu.Unlock()
	var delays []time.Duration
	var due, missing []string
	for name, at := range answeredAtKill {
		if w, ok := recorded.at(name); ok {
			delays = append(delays, w.Sub(at))
		}
		entry, inFlight := entries[name]
		if !inFlight || saved[name] || killed.Sub(at) < journalIDGrace {
			continue // its PV was saved, or the kill came right after the answer
		}
		due = append(due, name)
		if !strings.Contains(entry, `"assetID":`) {
			missing = append(missing, name)
		}
	}
	slices.Sort(delays)
	if len(delays) > 0 {
		t.Logf("CreateVolume answer to the ID in the journal: %d volumes, median %v, max %v", len(delays), delays[len(delays)/2], delays[len(delays)-1])
	}
	t.Logf("killed with %d journal entries; %d volumes answered more than %v before the kill have no PV", len(entries), len(due), journalIDGrace)
	if len(due) == 0 {
		t.Fatalf("no volume answered more than %v before the kill was without its PV: nothing to check", journalIDGrace)
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d journal entries of volumes answered more than %v before the kill carry no volume ID: %v",
			len(missing), len(due), journalIDGrace, missing)
	}

	for _, c := range claims {
		if err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Delete(e.ctx, c.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	creates := len(e.driver.CreateRequests())
	e.prov = e.startProvisioner(throttled...)
	e.eventually("ours to finish every journal entry", func() bool { return len(e.journalEntries()) == 0 })
	for _, req := range e.driver.CreateRequests()[creates:] {
		if slices.Contains(due, req.GetName()) {
			t.Errorf("ours called CreateVolume %s again after its restart, for a volume the driver had answered more than %v before the kill",
				req.GetName(), journalIDGrace)
		}
	}
	e.noVolumeLeft()
}

// recordedIDs is when each volume's ID first appeared in the journal.
type recordedIDs struct {
	mu    sync.Mutex
	first map[string]time.Time
}

func (r *recordedIDs) at(name string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.first[name]
	return t, ok
}

// watchRecordedIDs watches ours' journal ConfigMap until the test ends.
func (e *env) watchRecordedIDs() *recordedIDs {
	e.t.Helper()
	r := &recordedIDs{first: map[string]time.Time{}}
	w, err := cp.Client.CoreV1().ConfigMaps(journalNamespace).Watch(e.ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", controller.JournalName(e.name, "")).String()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			now := time.Now()
			r.mu.Lock()
			for k, v := range cm.Data {
				if _, seen := r.first[k]; !seen && strings.Contains(v, `"assetID":`) {
					r.first[k] = now
				}
			}
			r.mu.Unlock()
		}
	}()
	return r
}

// volumeNames are the names of the PVs that exist now.
func (e *env) volumeNames() map[string]bool {
	e.t.Helper()
	list, err := cp.Client.CoreV1().PersistentVolumes().List(e.ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	names := map[string]bool{}
	for _, pv := range list.Items {
		names[pv.Name] = true
	}
	return names
}

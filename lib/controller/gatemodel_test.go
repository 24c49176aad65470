// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/internal/journal"
	"github.com/kubeprov/external-storage/lib/recordkey"
)

// The adversarial model test of the controller's destructive decisions
// (issue 36): a world of API objects (a fake clientset), a backend that
// records every asset (gateBackend), the real ProvisionController driven
// step by step through its sync functions and its start-up resume, a
// minimal kube-controller-manager binder, an admin, another provisioner
// that serves claims while ours is down, and, in some modes, an adversary
// who can read and write the journal ConfigMaps, create (not read) Secrets
// in the provisioner's namespace and edit PV annotations. Every choice
// comes from one byte stream, so that a run is replayed exactly from its
// seed (or its fuzz input); a failure prints the steps.
//
// Invariants, checked at each backend call and after every step:
//  1. no asset of a Retain class is ever deleted;
//  2. no asset is deleted for another claim than the one it was made for;
//  3. no CreateVolume for a claim that is gone, unless an earlier
//     CreateVolume's answer for it was never recorded (a timeout, or a kill
//     before its ID reached the journal), and then once per lost answer;
//  4. without an adversary, at quiescence: every asset of a Delete-class
//     claim that is gone is deleted, and every live claim has one asset.

// gateMode says which adversary moves a run may make.
type gateMode byte

const (
	gateQuiet      gateMode = iota // no adversary: invariant 4 is checked too
	gateReplay                     // journal entries kept and written back, edited, deleted (issue 36 case 1)
	gatePlantedKey                 // the journal key Secret created before the first start, entries forged with it (case 2)
	gateAll
	numGateModes
)

// The step kinds. The adversary's are named for the attack they carry.
type gateStep int

const (
	stepCreateClaim gateStep = iota
	stepDeleteClaim
	stepBind             // kube-controller-manager binds, and releases the PVs of gone claims
	stepAdminDeletePV    // an admin deletes a Released PV of a Retain class to keep its data
	stepTimePasses       // the journal's lazy removals are written
	stepSyncClaim        // the controller syncs a claim key
	stepSyncVolume       // the controller syncs a PV
	stepSyncSave         // the controller retries saving a PV
	stepStop             // graceful stop, or hard kill (which may lose unwritten removals)
	stepStart            // a controller starts: same holder, another, a third between, no leader election
	stepOtherProvisioner // while ours is down, another provisioner of the driver (upstream's sidecar) serves and deletes
	stepAdvKeepEntry     // case 1: keep a copy of a journal entry
	stepAdvReplayEntry   // case 1: write a kept copy back
	stepAdvDeleteEntry
	stepAdvEditEntry
	stepAdvPlantKey   // case 2: create the journal key Secret, with a known key, before the first start
	stepAdvForgeEntry // case 2: sign an entry with the planted key
	stepAdvEditAnnotation
	numGateSteps
)

var gateStepNames = [numGateSteps]string{"create-claim", "delete-claim", "bind", "admin-delete-pv", "time-passes",
	"sync-claim", "sync-volume", "sync-save", "stop", "start", "other-provisioner",
	"ADV-keep-entry", "ADV-replay-entry", "ADV-delete-entry", "ADV-edit-entry", "ADV-plant-key", "ADV-forge-entry", "ADV-edit-annotation"}

// gateChoices turns a byte stream into choices; past its end every choice is 0.
type gateChoices struct {
	data []byte
	pos  int
}

func (c *gateChoices) exhausted() bool { return c.pos >= len(c.data) }

func (c *gateChoices) intn(n int) int {
	if n <= 1 || c.pos >= len(c.data) {
		return 0
	}
	b := int(c.data[c.pos])
	c.pos++
	return b % n
}

// gateLease is the leader Lease as the next controller finds it.
type gateLease struct {
	off         bool // leader election off (the node-local DaemonSet, upstream's default)
	holder      string
	transitions int
}

func (l gateLease) term() *journal.LeaseTerm {
	if l.off {
		return nil
	}
	return &journal.LeaseTerm{Holder: l.holder, Transitions: l.transitions}
}

func (l gateLease) String() string {
	if l.off {
		return "leader election off"
	}
	return fmt.Sprintf("Lease held by %s at transition %d", l.holder, l.transitions)
}

// gateIncarnation is one running controller.
type gateIncarnation struct {
	c      *ProvisionController
	ctx    context.Context
	cancel context.CancelFunc
	pump   chan struct{} // closed when its journal writer has returned
}

// keptEntry is a journal entry as the adversary copied it.
type keptEntry struct {
	key, value, classKey, classValue string
}

const (
	gateClassDelete = "del"
	gateClassRetain = "keep"
	gateNamespace   = "ns"
	gateMaxClaims   = 4
)

var gatePlantedKeyBytes = []byte(strings.Repeat("A", recordkey.KeyBytes))

type gateWorld struct {
	t      testing.TB
	ctx    context.Context
	mode   gateMode
	ch     *gateChoices
	client *fake.Clientset
	be     *gateBackend
	ctl    *gateIncarnation
	lease  gateLease
	trace  []string
	step   int

	// mu guards what the journal writer's goroutine reaches through the
	// clientset's reactors.
	mu          sync.Mutex
	journalData map[string]string // the journal ConfigMap's data as last written
	classData   map[string]string // every class value the journal ever held, by key
	pending     map[string]string // removals written lazily: a hard kill loses them
	modelWrites bool              // the model (not the controller) is writing the journal
	notes       []string
	violations  []string

	live          map[types.UID]*corev1.PersistentVolumeClaim
	allow         map[types.UID]int // CreateVolumes allowed for a gone claim (invariant 3)
	goneKeys      map[string]bool
	unseenDeletes map[types.UID]bool // claims deleted since the controller's cache was last refreshed
	uidSeq        int
	pvSeq         int
	started       bool
	faults        bool
	killAfterStep bool
	kept          []keptEntry
	forged        int
}

func newGateWorld(t testing.TB, mode gateMode, data []byte) *gateWorld {
	// The controller's log is off: the trace says what happened, and
	// logging every decision of every run would cost most of the time.
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Logger{}))
	t.Cleanup(cancel)
	w := &gateWorld{t: t, ctx: ctx, mode: mode, ch: &gateChoices{data: data},
		client:      fake.NewClientset(gateClass(gateClassDelete, corev1.PersistentVolumeReclaimDelete), gateClass(gateClassRetain, corev1.PersistentVolumeReclaimRetain)),
		journalData: map[string]string{}, classData: map[string]string{}, pending: map[string]string{},
		live: map[types.UID]*corev1.PersistentVolumeClaim{}, allow: map[types.UID]int{}, goneKeys: map[string]bool{}, unseenDeletes: map[types.UID]bool{},
		lease: gateLease{holder: "ours-a", transitions: 0}, faults: true}
	w.be = newGateBackend(w)
	w.client.PrependReactor("*", "configmaps", w.observeJournalWrite)
	w.client.PrependReactor("create", "persistentvolumes", w.observeVolumeSave)
	t.Cleanup(func() {
		if w.ctl != nil {
			w.ctl.cancel()
			<-w.ctl.pump
		}
	})
	return w
}

func gateClass(name string, policy corev1.PersistentVolumeReclaimPolicy) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("sc-" + name)},
		Provisioner: testProvisioner, ReclaimPolicy: &policy}
}

// note adds a line to the current step's trace.
func (w *gateWorld) note(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notes = append(w.notes, s)
}

func (w *gateWorld) violate(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, fmt.Sprintf(format, args...))
}

// observeJournalWrite follows the journal ConfigMap's writes: a write by
// the controller that adds or changes an entry carries every removal made
// before it; one that only removes is the lazy kind a hard kill loses.
func (w *gateWorld) observeJournalWrite(action k8stesting.Action) (bool, runtime.Object, error) {
	var cm *corev1.ConfigMap
	switch a := action.(type) {
	case k8stesting.CreateAction: // an UpdateAction too: both carry GetObject
		cm, _ = a.GetObject().(*corev1.ConfigMap)
	}
	if cm == nil || cm.Name != JournalName(testProvisioner, "") {
		return false, nil, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.journalData
	eager := false
	for k, v := range cm.Data {
		if journal.IsClassKey(k) {
			w.classData[k] = v
		} else if old[k] != v {
			eager = true
		}
	}
	if !w.modelWrites {
		if eager {
			clear(w.pending)
		} else {
			for k, v := range old {
				if _, ok := cm.Data[k]; !ok && !journal.IsClassKey(k) {
					w.pending[k] = v
				}
			}
		}
	}
	w.journalData = maps.Clone(cm.Data)
	return false, nil, nil
}

// observeVolumeSave gives a new PV its UID, as the API server does (the
// controller tells PVs apart by it), and takes a PV our controller saves as
// the record of its volume's answer.
func (w *gateWorld) observeVolumeSave(action k8stesting.Action) (bool, runtime.Object, error) {
	pv, ok := action.(k8stesting.CreateAction).GetObject().(*corev1.PersistentVolume)
	if !ok {
		return false, nil, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pvSeq++
	pv.UID = types.UID(fmt.Sprintf("pv-uid-%d", w.pvSeq))
	if pv.Spec.ClaimRef != nil && w.ctl != nil {
		w.allow[pv.Spec.ClaimRef.UID] = 0
	}
	return false, nil, nil
}

// checkCreateFor checks invariant 3 at a CreateVolume for claim uid: one
// the controller can know is gone (its cache no longer holds it), or that
// never existed.
func (w *gateWorld) checkCreateFor(uid types.UID, pvName string) {
	if _, ok := w.live[uid]; ok || w.unseenDeletes[uid] {
		return
	}
	w.mu.Lock()
	allowed := w.allow[uid] > 0
	if allowed {
		w.allow[uid]--
	}
	w.mu.Unlock()
	if !allowed {
		w.violate("invariant 3: CreateVolume(%s) for claim %s, which is gone, and no earlier answer for it was lost", pvName, uid)
	}
}

// answerLost: the controller never learned what CreateVolume did for uid.
func (w *gateWorld) answerLost(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.allow[uid] = 1
}

// idRecorded: the ID of uid's volume is in the journal on the server, if
// the controller put it there.
func (w *gateWorld) idRecorded(uid types.UID, pvName, id string) {
	cm, err := w.client.CoreV1().ConfigMaps(OutOfClusterNamespace).Get(w.ctx, JournalName(testProvisioner, ""), metav1.GetOptions{})
	if err != nil || !strings.Contains(cm.Data[pvName], `"assetID":"`+id+`"`) {
		w.note("the ID " + id + " did not reach the journal")
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.allow[uid] = 0
}

func (w *gateWorld) chooseFault() int {
	if !w.faults {
		return faultNone
	}
	// About half the calls succeed.
	if f := w.ch.intn(2 * numFaults); f < numFaults {
		return f
	}
	return faultNone
}

func (w *gateWorld) chooseDeleteFault() bool { return w.faults && w.ch.intn(8) == 7 }

// run plays steps until the choices or maxSteps run out, then, without an
// adversary, brings the world to quiescence and checks for leaks.
func (w *gateWorld) run(maxSteps int) {
	for w.step = 0; w.step < maxSteps && !w.ch.exhausted(); w.step++ {
		kind := w.chooseStep()
		w.do(kind)
		w.endStep(gateStepNames[kind])
	}
	if w.mode == gateQuiet {
		w.settle()
	}
}

// stepWeights says how often each step is chosen, 0 when it cannot be
// taken now or in this mode.
func (w *gateWorld) stepWeights() [numGateSteps]int {
	var wt [numGateSteps]int
	up := w.ctl != nil
	wt[stepCreateClaim] = map[bool]int{true: 6}[len(w.live) < gateMaxClaims]
	wt[stepDeleteClaim] = map[bool]int{true: 4}[len(w.live) > 0]
	wt[stepBind], wt[stepAdminDeletePV], wt[stepTimePasses] = 5, 2, 1
	if up {
		wt[stepSyncClaim], wt[stepSyncVolume], wt[stepStop] = 12, 5, 2
		wt[stepSyncSave] = map[bool]int{true: 2}[len(w.ctl.c.saves.pvs) > 0]
	} else {
		wt[stepStart] = map[bool]int{true: 6, false: 3}[w.started]
		wt[stepOtherProvisioner] = map[bool]int{true: 4}[w.started]
	}
	if w.mode == gateReplay || w.mode == gateAll {
		wt[stepAdvKeepEntry], wt[stepAdvReplayEntry], wt[stepAdvDeleteEntry], wt[stepAdvEditEntry], wt[stepAdvEditAnnotation] = 3, 3, 1, 1, 1
	}
	if w.mode == gatePlantedKey || w.mode == gateAll {
		wt[stepAdvPlantKey] = map[bool]int{true: 20}[!w.started]
		wt[stepAdvForgeEntry] = 3
	}
	return wt
}

func (w *gateWorld) chooseStep() gateStep {
	wt := w.stepWeights()
	total := 0
	for _, n := range wt {
		total += n
	}
	pick := w.ch.intn(total)
	for k, n := range wt {
		if pick < n {
			return gateStep(k)
		}
		pick -= n
	}
	return stepBind
}

func (w *gateWorld) do(kind gateStep) {
	switch kind {
	case stepCreateClaim:
		w.createClaim()
	case stepDeleteClaim:
		w.deleteClaim()
	case stepBind:
		w.bind()
	case stepAdminDeletePV:
		w.adminDeletePV()
	case stepTimePasses:
		w.timePasses()
	case stepSyncClaim:
		w.syncClaim()
	case stepSyncVolume:
		w.syncVolume()
	case stepSyncSave:
		w.syncSave()
	case stepStop:
		w.stop(w.ch.intn(2) == 0)
	case stepStart:
		w.start(w.chooseLease())
	case stepOtherProvisioner:
		w.otherProvisioner()
	default:
		w.adversary(kind)
	}
}

// endStep records the step and fails on a violation, with the trace.
func (w *gateWorld) endStep(name string) {
	w.mu.Lock()
	notes, violations := w.notes, w.violations
	w.notes = nil
	w.mu.Unlock()
	line := fmt.Sprintf("%3d %s", w.step, name)
	if len(notes) > 0 {
		line += ": " + strings.Join(notes, "; ")
	}
	w.trace = append(w.trace, line)
	if len(violations) > 0 {
		w.t.Fatalf("%s\n\nTrace (replay with the same seed or fuzz input):\n%s", strings.Join(violations, "\n"), strings.Join(w.trace, "\n"))
	}
}

// --- the cluster: users, kube-controller-manager, an admin ---

func (w *gateWorld) createClaim() {
	w.createClaimOf([]string{gateClassDelete, gateClassRetain}[w.ch.intn(2)])
}

func (w *gateWorld) createClaimOf(className string) {
	used := map[string]bool{}
	for _, c := range w.live {
		used[c.Name] = true
	}
	var free []string
	for i := range gateMaxClaims {
		if name := fmt.Sprintf("c%d", i); !used[name] {
			free = append(free, name)
		}
	}
	w.uidSeq++
	pvc := gateClaim(free[w.ch.intn(len(free))], types.UID(fmt.Sprintf("u%d", w.uidSeq)), className)
	created, err := w.client.CoreV1().PersistentVolumeClaims(gateNamespace).Create(w.ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	w.live[created.UID] = created
	w.note(fmt.Sprintf("%s/%s uid %s class %s", gateNamespace, created.Name, created.UID, className))
}

// gateClaim is a claim of the model, as kube-controller-manager leaves it
// for our provisioner.
func gateClaim(name string, uid types.UID, className string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: gateNamespace, UID: uid,
			Annotations: map[string]string{AnnStorageProvisioner: testProvisioner}},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &className,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

func (w *gateWorld) liveClaims() []*corev1.PersistentVolumeClaim {
	claims := slices.Collect(maps.Values(w.live))
	slices.SortFunc(claims, func(a, b *corev1.PersistentVolumeClaim) int { return strings.Compare(string(a.UID), string(b.UID)) })
	return claims
}

func (w *gateWorld) deleteClaim() {
	claims := w.liveClaims()
	c := claims[w.ch.intn(len(claims))]
	if err := w.client.CoreV1().PersistentVolumeClaims(c.Namespace).Delete(w.ctx, c.Name, metav1.DeleteOptions{}); err != nil {
		w.t.Fatal(err)
	}
	delete(w.live, c.UID)
	w.unseenDeletes[c.UID] = true
	w.goneKeys[claimKey(c)] = true
	w.note(fmt.Sprintf("%s uid %s", claimKey(c), c.UID))
}

func (w *gateWorld) volumes() []corev1.PersistentVolume {
	list, err := w.client.CoreV1().PersistentVolumes().List(w.ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b corev1.PersistentVolume) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

// bind is kube-controller-manager's binder, as far as the invariants need:
// a PV and its claim become Bound, a PV whose claim is gone Released.
func (w *gateWorld) bind() {
	for _, pv := range w.volumes() {
		ref := pv.Spec.ClaimRef
		if ref == nil {
			continue
		}
		claim, err := w.client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(w.ctx, ref.Name, metav1.GetOptions{})
		phase := corev1.VolumeReleased
		if err == nil && claim.UID == ref.UID {
			phase = corev1.VolumeBound
			if claim.Spec.VolumeName == "" {
				claim.Spec.VolumeName = pv.Name
				claim.Status.Phase = corev1.ClaimBound
				w.mustUpdateClaim(claim)
				w.note("bound " + claimKey(claim) + " to " + pv.Name)
			}
		}
		if pv.Status.Phase != phase {
			pv.Status.Phase = phase
			if _, err := w.client.CoreV1().PersistentVolumes().Update(w.ctx, &pv, metav1.UpdateOptions{}); err != nil {
				w.t.Fatal(err)
			}
			w.note(fmt.Sprintf("%s %s", pv.Name, phase))
		}
	}
}

func (w *gateWorld) mustUpdateClaim(claim *corev1.PersistentVolumeClaim) {
	updated, err := w.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(w.ctx, claim, metav1.UpdateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	w.live[updated.UID] = updated
}

// adminDeletePV: an admin deletes a Released PV of a Retain class, keeping
// its data on the backend.
func (w *gateWorld) adminDeletePV() {
	var released []string
	for _, pv := range w.volumes() {
		if pv.Status.Phase == corev1.VolumeReleased && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain {
			released = append(released, pv.Name)
		}
	}
	if len(released) == 0 {
		return
	}
	name := released[w.ch.intn(len(released))]
	if err := w.client.CoreV1().PersistentVolumes().Delete(w.ctx, name, metav1.DeleteOptions{}); err != nil {
		w.t.Fatal(err)
	}
	w.note(name)
}

// timePasses: the journal writer's lazy removals reach the server.
func (w *gateWorld) timePasses() {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.pending)
}

// otherProvisioner is another provisioner of the same driver without our
// journal (upstream's sidecar, no Lease shared with ours): it serves a
// waiting claim (CreateVolume by the PV name returns ours if we made it)
// or deletes a Released volume of a Delete class, asset and PV.
func (w *gateWorld) otherProvisioner() {
	pvs := map[string]corev1.PersistentVolume{}
	var released []string
	for _, pv := range w.volumes() {
		pvs[pv.Name] = pv
		if pv.Status.Phase == corev1.VolumeReleased && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete && pv.Spec.CSI != nil {
			released = append(released, pv.Name)
		}
	}
	var waiting []*corev1.PersistentVolumeClaim
	for _, c := range w.liveClaims() {
		if _, ok := pvs[DefaultVolumeNamePrefix+"-"+string(c.UID)]; !ok {
			waiting = append(waiting, c)
		}
	}
	if n := w.ch.intn(len(waiting) + len(released)); n < len(waiting) {
		w.otherServes(waiting[n])
	} else if n -= len(waiting); n < len(released) {
		pv := pvs[released[n]]
		w.be.remove(pv.Spec.CSI.VolumeHandle, pv.Spec.ClaimRef.UID, "other provisioner", "DeleteVolume of "+pv.Name)
		if err := w.client.CoreV1().PersistentVolumes().Delete(w.ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *gateWorld) otherServes(claim *corev1.PersistentVolumeClaim) {
	class, err := w.client.StorageV1().StorageClasses().Get(w.ctx, *claim.Spec.StorageClassName, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	name := DefaultVolumeNamePrefix + "-" + string(claim.UID)
	a := w.be.create(name, claim.UID, classRetains(class), "other provisioner")
	o := ProvisionOptions{StorageClass: class, PVName: name, PVC: claim}
	pv := o.NewVolume(VolumeSpec{Source: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: testProvisioner, VolumeHandle: a.id}}})
	pv.Annotations = map[string]string{AnnProvisionedBy: testProvisioner}
	if _, err := w.client.CoreV1().PersistentVolumes().Create(w.ctx, pv, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	w.note(fmt.Sprintf("served %s with %s (asset %s)", claimKey(claim), name, a.id))
}

// --- our controller ---

// chooseLease says under which Lease the next controller starts: the same
// holder again, another identity taking over, a third identity having held
// it in between, the Lease recreated, or no leader election at all.
func (w *gateWorld) chooseLease() gateLease {
	l := w.lease
	switch w.ch.intn(5) {
	case 0: // the same identity restarts
		l.off = false
	case 1: // the other one of a pair of replicas takes over
		l.off = false
		l.holder = map[string]string{"ours-a": "ours-b", "ours-b": "ours-a"}[l.holder]
		l.transitions++
	case 2: // a third held it in between
		l.off = false
		l.transitions += 2
	case 3: // the Lease was deleted and created again
		l.off = false
		l.transitions = 0
	case 4:
		l.off = true
	}
	return l
}

func (w *gateWorld) start(l gateLease) {
	w.lease = l
	w.started = true
	ctx, cancel := context.WithCancel(w.ctx)
	c, err := NewProvisionController(w.client, testProvisioner, w.be, WithRetryInterval(time.Millisecond, 10*time.Millisecond),
		WithEventFlushInterval(time.Hour), WithIdentity(l.holder))
	if err != nil {
		w.t.Fatal(err)
	}
	inc := &gateIncarnation{c: c, ctx: ctx, cancel: cancel, pump: make(chan struct{})}
	go func() {
		defer close(inc.pump)
		c.journal.Run(ctx)
	}()
	c.journal.Term.Store(l.term())
	w.ctl = inc
	w.note(l.String())
	w.refreshCaches()
	// A controller that cannot read its journal (or refuses its key) keeps
	// retrying and never works: the model takes it as down.
	resumeCtx, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	defer stop()
	w.killAfterStep = false
	if err := c.resumeOperations(resumeCtx); err != nil {
		w.note(fmt.Sprintf("could not start: %v", err))
		w.stop(false)
		return
	}
	c.journal.Flush(ctx)
	var resumed []string
	for pv := range c.operations.byPV {
		resumed = append(resumed, pv)
	}
	slices.Sort(resumed)
	w.note(fmt.Sprintf("resumed %v", resumed))
}

// stop ends the controller: gracefully (its last removals written), or
// killed (anything not yet written is lost, the journal's lazy removals
// too when the model chooses that the kill came within their delay).
func (w *gateWorld) stop(graceful bool) {
	inc := w.ctl
	if inc == nil {
		return
	}
	if graceful {
		if err := inc.c.journal.FlushRemovals(inc.ctx); err != nil {
			w.t.Fatal(err)
		}
		w.timePasses()
	}
	inc.cancel()
	<-inc.pump
	w.ctl = nil
	if graceful {
		w.note("graceful")
		return
	}
	w.note("hard kill")
	w.mu.Lock()
	lost := maps.Clone(w.pending)
	clear(w.pending)
	w.mu.Unlock()
	if len(lost) > 0 && w.ch.intn(2) == 0 {
		w.restoreJournal(lost)
	}
}

// restoreJournal writes back removals that a kill kept from the server.
func (w *gateWorld) restoreJournal(lost map[string]string) {
	keys := slices.Sorted(maps.Keys(lost))
	w.writeJournal(func(data map[string]string) {
		for _, k := range keys {
			data[k] = lost[k]
			if ck := entryClassKey(lost[k]); ck != "" {
				data[ck] = w.classData[ck]
			}
		}
	})
	w.note(fmt.Sprintf("within the journal's removal delay: removals of %v never written", keys))
}

func entryClassKey(value string) string {
	var e struct {
		ClassKey string `json:"classKey"`
	}
	_ = json.Unmarshal([]byte(value), &e)
	return e.ClassKey
}

// writeJournal changes the journal ConfigMap as someone else than the
// controller (the model, the adversary).
func (w *gateWorld) writeJournal(change func(map[string]string)) {
	w.mu.Lock()
	w.modelWrites = true
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.modelWrites = false
		w.mu.Unlock()
	}()
	cms := w.client.CoreV1().ConfigMaps(OutOfClusterNamespace)
	cm, err := cms.Get(w.ctx, JournalName(testProvisioner, ""), metav1.GetOptions{})
	if err != nil {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: JournalName(testProvisioner, ""), Namespace: OutOfClusterNamespace}}
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	change(cm.Data)
	if cm.ResourceVersion == "" && cm.UID == "" && err != nil {
		_, err = cms.Create(w.ctx, cm, metav1.CreateOptions{})
	} else {
		_, err = cms.Update(w.ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		w.t.Fatal(err)
	}
}

// refreshCaches makes the controller's informer caches what the API holds.
func (w *gateWorld) refreshCaches() {
	c := w.ctl.c
	clear(w.unseenDeletes)
	claims, err := w.client.CoreV1().PersistentVolumeClaims("").List(w.ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	classes, err := w.client.StorageV1().StorageClasses().List(w.ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	var objs []any
	for i := range claims.Items {
		objs = append(objs, &claims.Items[i])
	}
	w.replace(c.claimInformer.GetIndexer().Replace, objs)
	objs = nil
	for _, pv := range w.volumes() {
		objs = append(objs, &pv)
	}
	w.replace(c.volumeInformer.GetIndexer().Replace, objs)
	objs = nil
	for i := range classes.Items {
		objs = append(objs, &classes.Items[i])
	}
	w.replace(c.classInformer.GetIndexer().Replace, objs)
}

func (w *gateWorld) replace(replace func([]any, string) error, objs []any) {
	if err := replace(objs, ""); err != nil {
		w.t.Fatal(err)
	}
}

// controllerStep runs one sync of the controller over its caches (now and
// then stale: informers lag), then lets the journal catch up, and carries
// out a kill the backend's fault asked for.
func (w *gateWorld) controllerStep(sync func(ctx context.Context) error) {
	if w.ctl == nil {
		// A scripted step after a start that failed: the gate held.
		w.note("no controller is running")
		return
	}
	if w.ch.intn(6) != 5 {
		w.refreshCaches()
	} else {
		w.note("stale cache")
	}
	err := sync(w.ctl.ctx)
	w.ctl.c.journal.Flush(w.ctl.ctx)
	if err != nil {
		w.note(fmt.Sprintf("sync failed: %v", err))
	}
	if w.killAfterStep {
		w.killAfterStep = false
		w.stop(false)
	}
}

func (w *gateWorld) syncClaim() {
	keys := map[string]bool{}
	for _, c := range w.live {
		keys[claimKey(c)] = true
	}
	maps.Copy(keys, w.goneKeys)
	for k := range w.ctl.c.operations.byClaim {
		keys[k] = true
	}
	sorted := slices.Sorted(maps.Keys(keys))
	if len(sorted) == 0 {
		return
	}
	w.syncClaimKey(sorted[w.ch.intn(len(sorted))])
}

func (w *gateWorld) syncClaimKey(key string) {
	w.note(key)
	w.controllerStep(func(ctx context.Context) error { return w.ctl.c.syncClaim(ctx, key) })
}

func (w *gateWorld) syncVolume() {
	pvs := w.volumes()
	if len(pvs) == 0 {
		return
	}
	name := pvs[w.ch.intn(len(pvs))].Name
	w.note(name)
	w.controllerStep(func(ctx context.Context) error { return w.ctl.c.syncVolume(ctx, name) })
}

func (w *gateWorld) syncSave() {
	names := slices.Sorted(maps.Keys(w.ctl.c.saves.pvs))
	name := names[w.ch.intn(len(names))]
	w.note(name)
	w.controllerStep(func(ctx context.Context) error { return w.ctl.c.syncSave(ctx, name) })
}

// --- quiescence and invariant 4 ---

// settle runs, without faults, a restarted controller (failure thresholds
// re-armed, as a restart does) and the binder until nothing changes, then
// checks that nothing leaked.
func (w *gateWorld) settle() {
	w.step = -1
	w.faults = false
	if w.ctl != nil {
		w.stop(true)
	}
	w.start(w.lease)
	if w.ctl == nil {
		w.violate("invariant 4: without an adversary, the controller could not start to finish its work")
	}
	w.endStep("settle: start")
	for range 12 {
		before := w.fingerprint()
		w.bind()
		w.refreshCaches()
		keys := map[string]bool{}
		for _, c := range w.live {
			keys[claimKey(c)] = true
		}
		maps.Copy(keys, w.goneKeys)
		for k := range w.ctl.c.operations.byClaim {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			w.noteErr(k, w.ctl.c.syncClaim(w.ctl.ctx, k))
		}
		w.refreshCaches()
		for _, pv := range w.volumes() {
			w.noteErr(pv.Name, w.ctl.c.syncVolume(w.ctl.ctx, pv.Name))
		}
		for _, name := range slices.Sorted(maps.Keys(w.ctl.c.saves.pvs)) {
			w.noteErr(name, w.ctl.c.syncSave(w.ctl.ctx, name))
		}
		w.ctl.c.journal.Flush(w.ctl.ctx)
		w.endStep("settle: sync everything")
		if w.fingerprint() == before {
			break
		}
	}
	w.checkNoLeak()
}

func (w *gateWorld) noteErr(key string, err error) {
	if err != nil {
		w.note(fmt.Sprintf("sync of %s failed: %v", key, err))
	}
}

func (w *gateWorld) fingerprint() string {
	var s strings.Builder
	s.WriteString(w.be.fingerprint())
	for _, pv := range w.volumes() {
		fmt.Fprintf(&s, "%s:%s,", pv.Name, pv.Status.Phase)
	}
	for _, c := range w.liveClaims() {
		fmt.Fprintf(&s, "%s:%s,", c.UID, c.Spec.VolumeName)
	}
	w.mu.Lock()
	s.WriteString(strings.Join(slices.Sorted(maps.Keys(w.journalData)), ","))
	w.mu.Unlock()
	return s.String()
}

// checkNoLeak is invariant 4.
func (w *gateWorld) checkNoLeak() {
	perClaim := map[types.UID][]string{}
	for _, a := range sortedAssets(w.be.live()) {
		perClaim[a.claim] = append(perClaim[a.claim], a.id)
		if _, live := w.live[a.claim]; !live && !a.retain {
			w.violate("invariant 4: asset %s of claim %s, which is gone, leaked (Delete class)", a.id, a.claim)
		}
	}
	for _, c := range w.liveClaims() {
		if n := len(perClaim[c.UID]); n != 1 {
			w.violate("invariant 4: live claim %s (uid %s) has %d assets %v, want 1", claimKey(c), c.UID, n, perClaim[c.UID])
		}
	}
	w.endStep("settle: check no leak")
}

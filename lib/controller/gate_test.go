// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
)

// The entry points of the adversarial model test (gatemodel_test.go).
// Each fixed seed is one reproducible run; a failure prints its steps.
// More seeds: go test -run 'TestGateModel' -gate.seeds=500 ./controller.

var gateExtraSeeds = flag.Int("gate.seeds", 0, "run the model tests with seeds 1..N instead of their fixed seeds")

const (
	// gateInputBytes are the choices a seed makes: enough for gateMaxSteps.
	gateInputBytes = 400
	gateMaxSteps   = 60
)

// gateSeedInput is the fuzz input a seed stands for: the mode, then the
// choices.
func gateSeedInput(mode gateMode, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(mode)))
	b := make([]byte, 1+gateInputBytes)
	b[0] = byte(mode)
	for i := 1; i < len(b); i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

func runGate(t testing.TB, input []byte) {
	if len(input) == 0 {
		return
	}
	w := newGateWorld(t, gateMode(input[0]%byte(numGateModes)), input[1:])
	w.run(gateMaxSteps)
}

func testGateSeeds(t *testing.T, mode gateMode, seeds []uint64) {
	if n := *gateExtraSeeds; n > 0 {
		seeds = nil
		for s := range n {
			seeds = append(seeds, uint64(s+1))
		}
	}
	for _, s := range seeds {
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) { runGate(t, gateSeedInput(mode, s)) })
	}
}

// No adversary: kills, restarts under every kind of Lease change, another
// provisioner serving and deleting while ours is down, timeouts and lost
// answers. All four invariants hold, leaks included.
func TestGateModel(t *testing.T) {
	testGateSeeds(t, gateQuiet, []uint64{1, 2, 3, 5, 10})
}

// Issue 36 case 1: an adversary who can read and write the journal keeps
// genuine signed entries and writes them back later (and edits and deletes
// entries, and PV annotations). Nothing of a Retain class and nothing of
// another claim may be deleted on the word of a replayed entry.
func TestGateModelReplayedEntries(t *testing.T) {
	testGateSeeds(t, gateReplay, []uint64{1, 2, 53, 97})
}

// Issue 36 case 2: an adversary who can create Secrets in the provisioner's
// namespace creates the journal's key Secret before the first start, with a
// key it knows, and forges signed entries with it.
func TestGateModelPlantedKey(t *testing.T) {
	testGateSeeds(t, gatePlantedKey, []uint64{1, 2, 3, 4})
}

// FuzzGate explores beyond the fixed seeds: its input is a mode byte and
// the choices (make test-fuzz). A failing input saved under
// testdata/fuzz/FuzzGate replays with go test -run 'FuzzGate/<file>'.
func FuzzGate(f *testing.F) {
	for mode := range numGateModes {
		f.Add(gateSeedInput(mode, 1))
	}
	f.Fuzz(func(t *testing.T, input []byte) { runGate(t, input) })
}

// scripted runs named steps in order, each checked and traced as in a
// random run; the world makes no choices of its own (every one is the
// first option, no fault).
func (w *gateWorld) scripted(name string, step func()) {
	step()
	w.endStep(name)
	w.step++
}

// Issue 36 case 1, as the review found it: a genuine entry, with the ID
// CreateVolume answered, copied while the journal still held it (it
// removes entries lazily); the claim deleted, the Retain PV Released and
// deleted by an admin to keep the data; the copy written back; the next
// start (leader election off, as in the node-local DaemonSet) must not
// delete the kept volume.
func TestGateCase1ReplayedEntryDeletesRetainedVolume(t *testing.T) {
	w := newGateWorld(t, gateReplay, nil)
	w.scripted("create-claim (Retain class)", func() { w.createClaimOf(gateClassRetain) })
	w.scripted("start", func() { w.start(gateLease{off: true}) })
	w.scripted("sync-claim", func() { w.syncClaimKey("ns/c0") })
	w.scripted("ADV-keep-entry", w.keepEntry)
	w.scripted("bind", w.bind)
	w.scripted("delete-claim", w.deleteClaim)
	w.scripted("bind", w.bind)
	w.scripted("sync-volume", func() {
		w.controllerStep(func(ctx context.Context) error { return w.ctl.c.syncVolume(ctx, w.volumes()[0].Name) })
	})
	w.scripted("admin-delete-pv", w.adminDeletePV)
	w.scripted("stop", func() { w.stop(true) })
	w.scripted("ADV-replay-entry", w.replayEntry)
	w.scripted("start", func() { w.start(gateLease{off: true}) })
	w.scripted("sync-claim", func() { w.syncClaimKey("ns/c0") })
}

// Issue 36 case 2: the journal's key Secret created, with a known key,
// before the first start; an entry forged with it for a claim that never
// existed, naming the volume of a live, bound claim (its ID is on its PV).
// The next start must not delete that volume.
func TestGateCase2PlantedKeyForgesDeletion(t *testing.T) {
	w := newGateWorld(t, gatePlantedKey, nil)
	w.scripted("ADV-plant-key", w.plantKey)
	w.scripted("create-claim", func() { w.createClaimOf(gateClassDelete) })
	w.scripted("start", func() { w.start(gateLease{holder: "ours-a"}) })
	w.scripted("sync-claim", func() { w.syncClaimKey("ns/c0") })
	w.scripted("bind", w.bind)
	w.scripted("ADV-forge-entry", func() {
		id := "" // no volume to aim at when the controller refused the key
		if ids := w.knownAssetIDs(); len(ids) > 0 {
			id = ids[0]
		}
		w.forgeEntryFor(id, gateClassDelete, false)
	})
	w.scripted("stop", func() { w.stop(true) })
	w.scripted("start", func() { w.start(gateLease{holder: "ours-a"}) })
	w.scripted("sync-claim", func() { w.syncClaimKey("ns/f1") })
}

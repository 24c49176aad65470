// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
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
	testGateSeeds(t, gateQuiet, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
}

// Issue 36 case 1: an adversary who can read and write the journal keeps
// genuine signed entries and writes them back later (and edits and deletes
// entries, and PV annotations). Nothing of a Retain class and nothing of
// another claim may be deleted on the word of a replayed entry.
func TestGateModelReplayedEntries(t *testing.T) {
	testGateSeeds(t, gateReplay, []uint64{1, 2, 3, 4, 5, 6, 7, 8})
}

// Issue 36 case 2: an adversary who can create Secrets in the provisioner's
// namespace creates the journal's key Secret before the first start, with a
// key it knows, and forges signed entries with it.
func TestGateModelPlantedKey(t *testing.T) {
	testGateSeeds(t, gatePlantedKey, []uint64{1, 2, 3, 4, 5, 6, 7, 8})
}

// FuzzGate explores beyond the fixed seeds: its input is a mode byte and
// the choices (make test-fuzz). A failing input saved under
// testdata/fuzz/FuzzGate replays with go test -run 'FuzzGate/<file>'.
func FuzzGate(f *testing.F) {
	for mode := range numGateModes {
		for seed := range uint64(2) {
			f.Add(gateSeedInput(mode, seed+1))
		}
	}
	f.Fuzz(func(t *testing.T, input []byte) { runGate(t, input) })
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/lib/internal/journal"
)

// JournalKeySecret is the Secret, in the journal's namespace, holding the
// key that signs journal entries. The controller creates it with a random
// key on first use; provisioners in one namespace share it (each entry's
// signature names its journal).
const JournalKeySecret = journal.KeySecret // "kubeprov-journal-key"

// systemClaimAnnotations are set by Kubernetes (or name the class the old
// way) and bounded by what the controller checks before it records: every
// entry keeps them, so that a claim with no other metadata is recorded whole.
var systemClaimAnnotations = []string{AnnStorageProvisioner, AnnBetaStorageProvisioner, AnnSelectedNode, corev1.BetaStorageClassAnnotation}

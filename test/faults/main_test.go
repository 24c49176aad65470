// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package faults

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/kubeprov/external-storage/test/backend/all"
	"github.com/kubeprov/external-storage/test/framework"
)

// Sizes of the suite. The defaults keep the whole suite within a few minutes
// on two cores; the environment enlarges it:
//
//	FAULTS_CLAIMS=200 FAULTS_BACKENDS=hostpath,csi make test-faults
const (
	// defaultClaims is the size of each case's burst (FAULTS_CLAIMS).
	defaultClaims = 12
)

var (
	// cp is the control plane shared by all cases; they run one at a time
	// (one of them restarts kube-apiserver).
	cp *framework.ControlPlane
	// claims is the burst size, backends the backends to run.
	claims   int
	backends []string
)

func TestMain(m *testing.M) {
	var err error
	if claims, err = envInt("FAULTS_CLAIMS", defaultClaims); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(2)
	}
	backends = all.Names
	if list, ok := os.LookupEnv("FAULTS_BACKENDS"); ok {
		if backends, err = all.Parse(list); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: FAULTS_BACKENDS:", err)
			os.Exit(2)
		}
	}
	framework.RunMain(m, framework.Options{}, func(c *framework.ControlPlane) { cp = c })
}

// envInt reads a positive integer from the environment.
func envInt(name string, def int) (int, error) {
	s, ok := os.LookupEnv(name)
	if !ok || s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a positive integer", name, s)
	}
	return n, nil
}

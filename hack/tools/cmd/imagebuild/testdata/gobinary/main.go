// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command gobinary is a small Go program with one module dependency, built
// by the tests as the binary of an image whose SBOM they check.
package main

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
)

func main() {
	fmt.Println(name.DefaultRegistry)
}

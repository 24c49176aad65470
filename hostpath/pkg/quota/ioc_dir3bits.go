// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build ppc64 || ppc64le || mips || mipsle || mips64 || mips64le

package quota

// powerpc's and mips's ioctl encoding (their asm/ioctl.h): 3 direction
// bits above 13 size bits, and write is 4, not 1.
const (
	iocNone     = 1
	iocWrite    = 4
	iocRead     = 2
	iocDirShift = 29
)

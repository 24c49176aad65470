// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !ppc64 && !ppc64le && !mips && !mipsle && !mips64 && !mips64le

package quota

// The generic ioctl encoding (asm-generic/ioctl.h: x86, arm, arm64,
// riscv, s390, loongarch): 2 direction bits above 14 size bits.
const (
	iocNone     = 0
	iocWrite    = 1
	iocRead     = 2
	iocDirShift = 30
)

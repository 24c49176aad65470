// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package capacity turns what claims ask for into sizes a backend
// allocates: bytes of a quantity and rounding up to whole units, without
// overflow.
package capacity

import (
	"fmt"
	"math"
	"math/big"

	"k8s.io/apimachinery/pkg/api/resource"
)

// GiB is the unit most block backends allocate in.
const GiB int64 = 1 << 30

// RoundUp returns how many allocation units of unitBytes hold sizeBytes:
// backends allocate whole units, and a claim must never get less than asked.
// A unit below 1 counts as 1 byte.
func RoundUp(sizeBytes, unitBytes int64) int64 {
	unitBytes = max(unitBytes, 1)
	if sizeBytes <= 0 {
		return 0
	}
	n := sizeBytes / unitBytes
	if sizeBytes%unitBytes != 0 {
		n++
	}
	return n
}

// RoundUpToGiB is RoundUp in GiB, failing when the result does not fit an int.
func RoundUpToGiB(q resource.Quantity) (int, error) { return roundUpToInt(q, GiB, "GiB") }

func roundUpToInt(q resource.Quantity, unit int64, name string) (int, error) {
	bytes, err := Bytes(q)
	if err != nil {
		return 0, err
	}
	n := RoundUp(bytes, unit)
	if n > math.MaxInt32 {
		return 0, fmt.Errorf("size %s is too large: %d %s", q.String(), n, name)
	}
	return int(n), nil
}

// Bytes returns q in bytes, rounding fractions up, or an error for negative
// or absurdly large quantities (beyond int64), instead of overflowing.
func Bytes(q resource.Quantity) (int64, error) {
	if q.Sign() < 0 {
		return 0, fmt.Errorf("size %s is negative", q.String())
	}
	v := q.AsDec()
	// Round fractional bytes up: a request of 1.5 bytes needs 2.
	scaled := new(big.Int)
	unscaled, scale := v.UnscaledBig(), int64(v.Scale())
	if scale <= 0 {
		scaled.Mul(unscaled, new(big.Int).Exp(big.NewInt(10), big.NewInt(-scale), nil))
	} else {
		div := new(big.Int).Exp(big.NewInt(10), big.NewInt(scale), nil)
		var rem big.Int
		scaled.QuoRem(unscaled, div, &rem)
		if rem.Sign() > 0 {
			scaled.Add(scaled, big.NewInt(1))
		}
	}
	// Quantities saturate at MaxInt64 when parsed, so that value means "too large" too.
	if !scaled.IsInt64() || scaled.Int64() == math.MaxInt64 {
		return 0, fmt.Errorf("size %s is too large", q.String())
	}
	return scaled.Int64(), nil
}

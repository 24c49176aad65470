// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package capacity turns what claims and classes ask for into sizes a
// backend allocates: rounding up to whole units without overflow, bytes of
// a claim's request, capacity parameters.
package capacity

import (
	"errors"
	"fmt"
	"math"
	"math/big"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Binary and decimal size units.
const (
	KiB int64 = 1 << 10
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
	TiB int64 = 1 << 40
	GB  int64 = 1000 * 1000 * 1000
)

// ErrNoRequest is returned when a claim requests no storage.
var ErrNoRequest = errors.New("claim has no spec.resources.requests.storage")

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

// RoundUpToMiB is RoundUp in MiB, failing when the result does not fit an int.
func RoundUpToMiB(q resource.Quantity) (int, error) { return roundUpToInt(q, MiB, "MiB") }

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

// RequestedBytes returns the claim's storage request in bytes.
func RequestedBytes(claim *corev1.PersistentVolumeClaim) (int64, error) {
	q, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return 0, ErrNoRequest
	}
	return Bytes(q)
}

// ParseCapacity parses a capacity such as "10Gi" from a parameter, naming
// the parameter in the error.
func ParseCapacity(param, value string) (resource.Quantity, error) {
	q, err := resource.ParseQuantity(value)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("parameter %s: %q is not a quantity such as 10Gi", param, value)
	}
	if q.Sign() < 0 {
		return resource.Quantity{}, fmt.Errorf("parameter %s: %q is negative", param, value)
	}
	return q, nil
}

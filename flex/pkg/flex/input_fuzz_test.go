// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"maps"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// FuzzNewInput feeds a StorageClass of up to three parameters (a key given
// twice keeps its last value) and a claim's storage request. Building the
// driver input either fails naming the class or the request, or passes
// every parameter unchanged beside the reserved keys, with request sizes
// rounded up and never below the request.
func FuzzNewInput(f *testing.F) {
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3, size string) {
		if longExponent.MatchString(size) {
			return // the API server cannot check such a request: Cmp never finishes
		}
		q, err := resource.ParseQuantity(size)
		if err != nil || q.Sign() < 0 {
			return // the API server accepts neither
		}
		params := map[string]string{k1: v1, k2: v2, k3: v3}
		o := testOptions("1", params)
		o.PVC.Spec.Resources.Requests[corev1.ResourceStorage] = q
		in, err := NewInput(o)
		if err != nil {
			if !strings.Contains(err.Error(), `StorageClass "gold"`) && !strings.Contains(err.Error(), "claim apps/data: storage request") {
				t.Fatalf("error %q names neither the class nor the request", err)
			}
			return
		}
		for k, v := range params {
			if isReserved(k) || in[k] != v {
				t.Fatalf("parameter %q=%q became %q", k, v, in[k])
			}
		}
		assertSizes(t, q, in)
		for k, v := range params {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return // API objects are JSON: their strings are valid UTF-8
			}
		}
		back, err := ParseInput(in.JSON())
		if err != nil || !maps.Equal(back, in) {
			t.Fatalf("input %q does not survive its JSON: %q, %v", in, back, err)
		}
	})
}

// longExponent matches quantities with an exponent of three digits or more.
var longExponent = regexp.MustCompile(`[eE][-+]?[0-9]{3}`)

// assertSizes checks that the request keys are the request in bytes, MiB and
// GiB, each rounded up.
func assertSizes(t *testing.T, q resource.Quantity, in Input) {
	t.Helper()
	bytes, err := strconv.ParseInt(in[KeyRequestBytes], 10, 64)
	if err != nil || bytes < 0 || q.Cmp(*resource.NewQuantity(bytes, resource.BinarySI)) > 0 ||
		(q.Sign() > 0 && resource.NewQuantity(bytes-1, resource.BinarySI).Cmp(q) >= 0) {
		t.Fatalf("request %s gives %s bytes", q.String(), in[KeyRequestBytes])
	}
	for key, unit := range map[string]int64{KeyRequestMiB: 1 << 20, KeyRequestGiB: 1 << 30} {
		n, ok := new(big.Int).SetString(in[key], 10)
		lo := new(big.Int).Mul(new(big.Int).Sub(n, big.NewInt(1)), big.NewInt(unit))
		hi := new(big.Int).Mul(n, big.NewInt(unit))
		if !ok || lo.Cmp(big.NewInt(bytes)) >= 0 || hi.Cmp(big.NewInt(bytes)) < 0 {
			t.Fatalf("%d bytes give %s=%s", bytes, key, in[key])
		}
	}
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package capacity

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func TestRoundUpToGiB(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		err  string
	}{
		{"1Gi", 1, ""},
		{"1", 1, ""},
		{"1G", 1, ""},
		{"1025Mi", 2, ""},
		{"10Gi", 10, ""},
		{"0", 0, ""},
		{"1.5Gi", 2, ""},
		{"100Ei", 0, "too large"},
		{"-1Gi", 0, "negative"},
	} {
		got, err := RoundUpToGiB(resource.MustParse(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("RoundUpToGiB(%s) error = %v, want containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("RoundUpToGiB(%s) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestBytesRoundsFractionsUp(t *testing.T) {
	for in, want := range map[string]int64{"1500m": 2, "1k": 1000, "1Ki": 1024, "0.1": 1, "2": 2} {
		got, err := Bytes(resource.MustParse(in))
		if err != nil || got != want {
			t.Errorf("Bytes(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
}

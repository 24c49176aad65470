// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"errors"
	"testing"
)

// maxErrorBytes bounds every error built from driver output: each piece of
// it is cut to MaxMessageBytes, which %q can at most quadruple.
const maxErrorBytes = 4 << 10

// FuzzDriverOutput feeds what a driver prints. Reading it never panics and
// either fails with an error of bounded size (it becomes an event) or gives
// a known status whose error matches it, and, for a volume, exactly one
// source, a named FlexVolume driver and a positive capacity if any.
func FuzzDriverOutput(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := ParseOutput(data)
		if err != nil {
			assertBounded(t, err)
			return
		}
		err = out.Err()
		switch out.Status {
		case StatusSuccess:
			if err != nil {
				t.Fatalf("status %q gives error %v", out.Status, err)
			}
		case StatusNotSupported, StatusFailure:
			if err == nil || errors.Is(err, ErrNotSupported) != (out.Status == StatusNotSupported) {
				t.Fatalf("status %q gives error %v", out.Status, err)
			}
			assertBounded(t, err)
			return
		default:
			t.Fatalf("status %.100q accepted", out.Status)
		}
		for _, flexDriver := range []string{"", "example.com/lvm"} {
			spec, err := out.VolumeSpec(flexDriver, Input{"pool": "a"})
			if err != nil {
				assertBounded(t, err)
				continue
			}
			if sources := setSources(&spec.Source); len(sources) != 1 {
				t.Fatalf("volume with sources %q accepted", sources)
			}
			if f := spec.Source.FlexVolume; f != nil && f.Driver == "" {
				t.Fatal("flexVolume without a driver accepted")
			}
			if spec.Capacity.Sign() < 0 || (!spec.Capacity.IsZero() && spec.Capacity.Value() <= 0) {
				t.Fatalf("capacity %s accepted", spec.Capacity.String())
			}
		}
	})
}

func assertBounded(t *testing.T, err error) {
	t.Helper()
	if n := len(err.Error()); n > maxErrorBytes {
		t.Fatalf("error of %d bytes: %.300q...", n, err)
	}
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubeprov/external-storage/lib/controller"
)

func TestParseOutput(t *testing.T) {
	for _, tc := range []struct {
		in, wantErr string
		status      string
	}{
		{in: "", wantErr: "driver printed nothing"},
		{in: "hello", wantErr: "driver printed invalid JSON"},
		{in: `{"status": "OK"}`, wantErr: `driver printed status "OK"`},
		{in: `{"status": "` + strings.Repeat("x", 1<<20) + `"}`, wantErr: `driver printed status "xxxx`},
		{in: `{"status": "Success", "capabilities": {"attach": false}}`, status: StatusSuccess},
		{in: "  {\"status\": \"Failure\", \"message\": \"m\"}\n", status: StatusFailure},
	} {
		out, err := ParseOutput([]byte(tc.in))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || len(err.Error()) > maxErrorBytes {
				t.Errorf("ParseOutput(%.100q) = %.2000v, want error %q in at most %d bytes", tc.in, err, tc.wantErr, maxErrorBytes)
			}
			continue
		}
		if err != nil || out.Status != tc.status {
			t.Errorf("ParseOutput(%q) = %+v, %v", tc.in, out, err)
		}
	}
}

func TestOutputErr(t *testing.T) {
	if err := (&Output{Status: StatusSuccess}).Err(); err != nil {
		t.Error(err)
	}
	err := (&Output{Status: StatusNotSupported, Message: "no"}).Err()
	if !errors.Is(err, ErrNotSupported) {
		t.Errorf("Not supported: %v does not wrap ErrNotSupported", err)
	}
	err = (&Output{Status: StatusFailure}).Err()
	if err == nil || errors.Is(err, ErrNotSupported) || err.Error() != "Failure: no message" {
		t.Errorf("Failure: %v", err)
	}
}

func TestVolumeSpec(t *testing.T) {
	in := Input{"pool": "a", KeyPVName: "pvc-1"}
	for _, tc := range []struct {
		name, volume, flexDriver, wantErr string
		check                             func(t *testing.T, s controller.VolumeSpec)
	}{
		{name: "no volume makes a FlexVolume of the class parameters", flexDriver: "x~y", check: func(t *testing.T, s controller.VolumeSpec) {
			if f := s.Source.FlexVolume; f == nil || f.Driver != "x~y" || len(f.Options) != 1 || f.Options["pool"] != "a" {
				t.Errorf("flexVolume = %+v", f)
			}
		}},
		{name: "no volume without --flex-driver", wantErr: "--flex-driver is not set"},
		{name: "flexVolume gets the driver name", volume: `{"flexVolume": {"options": {"id": "7"}}}`, flexDriver: "x~y", check: func(t *testing.T, s controller.VolumeSpec) {
			if f := s.Source.FlexVolume; f == nil || f.Driver != "x~y" || f.Options["id"] != "7" {
				t.Errorf("flexVolume = %+v", f)
			}
		}},
		{name: "flexVolume keeps its own driver", volume: `{"flexVolume": {"driver": "a~b"}}`, check: func(t *testing.T, s controller.VolumeSpec) {
			if s.Source.FlexVolume.Driver != "a~b" {
				t.Errorf("driver = %s", s.Source.FlexVolume.Driver)
			}
		}},
		{name: "flexVolume without any driver", volume: `{"flexVolume": {}}`, wantErr: `flexVolume without "driver"`},
		{name: "native source with capacity and affinity", volume: `{"nfs": {"server": "s", "path": "/e"}, "capacity": "5Gi",
			"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}}}`,
			check: func(t *testing.T, s controller.VolumeSpec) {
				if s.Source.NFS == nil || s.Source.NFS.Server != "s" || s.Capacity.Cmp(resource.MustParse("5Gi")) != 0 || s.NodeAffinity == nil {
					t.Errorf("spec = %+v", s)
				}
			}},
		{name: "two sources", volume: `{"nfs": {"server": "s", "path": "/e"}, "hostPath": {"path": "/x"}}`, wantErr: "2 sources (hostPath, nfs)"},
		{name: "no source", volume: `{"capacity": "1Gi"}`, wantErr: "0 sources"},
		{name: "misspelled source", volume: `{"hostPth": {"path": "/x"}}`, wantErr: `unknown field "hostPth"`},
		{name: "bad capacity", volume: `{"hostPath": {"path": "/x"}, "capacity": "lots"}`, wantErr: `invalid "capacity" "lots"`},
		{name: "zero capacity", volume: `{"hostPath": {"path": "/x"}, "capacity": "0"}`, wantErr: `invalid "capacity"`},
		{name: "capacity beyond int64", volume: `{"hostPath": {"path": "/x"}, "capacity": "1e30"}`,
			wantErr: `driver returned an invalid "capacity" "1e30": expected a positive quantity below 8Ei such as 10Gi`},
		{name: "capacity that ParseQuantity never finishes", volume: `{"hostPath": {"path": "/x"}, "capacity": "1e-999999999"}`, wantErr: `invalid "capacity" "1e-999999999"`},
		{name: "capacity that Cmp never finishes", volume: `{"hostPath": {"path": "/x"}, "capacity": "1e999999999"}`, wantErr: `invalid "capacity" "1e999999999"`},
		{name: "huge capacity is cut", volume: `{"hostPath": {"path": "/x"}, "capacity": "` + strings.Repeat("9", 1<<20) + `"}`, wantErr: `...(truncated)": expected a positive quantity`},
		{name: "huge unknown field is cut", volume: `{"` + strings.Repeat("k", 1<<20) + `": 1}`, wantErr: `(json: unknown field "kkkk`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &Output{Status: StatusSuccess, Volume: []byte(tc.volume)}
			spec, err := out.VolumeSpec(tc.flexDriver, in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || len(err.Error()) > maxErrorBytes {
					t.Fatalf("err = %.2000v, want %q in at most %d bytes", err, tc.wantErr, maxErrorBytes)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, spec)
		})
	}
}

func TestTruncateTail(t *testing.T) {
	tail := truncateTail(strings.Repeat("a", 1000) + "END")
	if !strings.HasPrefix(tail, "(truncated)...") || !strings.HasSuffix(tail, "END") || len(tail) != MaxMessageBytes+len("(truncated)...") {
		t.Errorf("truncateTail = %q", tail)
	}
}

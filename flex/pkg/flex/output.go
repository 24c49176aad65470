// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubeprov/external-storage/lib/capacity"
	"github.com/kubeprov/external-storage/lib/controller"
	"github.com/kubeprov/external-storage/lib/podrun"
)

// Statuses a driver reports, as in the FlexVolume convention.
const (
	StatusSuccess      = "Success"
	StatusFailure      = "Failure"
	StatusNotSupported = "Not supported"
)

// MaxMessageBytes bounds each piece of driver output (message, stderr,
// termination message) quoted in an error, so that events stay readable.
const MaxMessageBytes = podrun.MaxMessageBytes

// ErrNotSupported is wrapped by errors of drivers that answered "Not supported".
var ErrNotSupported = errors.New("not supported by the driver")

// unknownOutcome marks a driver answer that cannot be read although the
// driver did not report a failure: it may have created the asset, which is
// then undone with its delete.
type unknownOutcome struct{ error }

func (u unknownOutcome) Unwrap() error { return u.error }

// isUnknownOutcome reports whether err is, or wraps, an unknownOutcome.
func isUnknownOutcome(err error) bool {
	var u unknownOutcome
	return errors.As(err, &u)
}

// Output is what a driver prints (exec launcher) or writes to its termination
// message (container launcher).
type Output struct {
	Status  string          `json:"status"`
	Message string          `json:"message,omitempty"`
	Volume  json.RawMessage `json:"volume,omitempty"`
}

// OutputVolume is the "volume" of a successful provision: exactly one
// PersistentVolumeSource field (flexVolume, nfs, iscsi, hostPath, ...), with
// optional capacity and node affinity.
type OutputVolume struct {
	corev1.PersistentVolumeSource
	// Capacity is a quantity ("10Gi"); empty means the claim's request.
	Capacity string `json:"capacity,omitempty"`
	// NodeAffinity restricts the nodes that can use the volume.
	NodeAffinity *corev1.VolumeNodeAffinity `json:"nodeAffinity,omitempty"`
}

// ParseOutput reads driver output. Unknown top-level fields are allowed, as
// FlexVolume drivers often print more than asked; unknown fields inside
// "volume" are refused, since a misspelled source would otherwise vanish.
func ParseOutput(data []byte) (*Output, error) {
	data = bytes.TrimSpace(data)
	var out Output
	if len(data) == 0 {
		return nil, errors.New("driver printed nothing, expected JSON with a status")
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("driver printed invalid JSON (%w): %s", err, Truncate(string(data)))
	}
	switch out.Status {
	case StatusSuccess, StatusFailure, StatusNotSupported:
	default:
		return nil, fmt.Errorf("driver printed status %q, expected %q, %q or %q", Truncate(out.Status), StatusSuccess, StatusFailure, StatusNotSupported)
	}
	return &out, nil
}

// Err returns nil for Success and otherwise an error carrying the driver's
// message; "Not supported" wraps ErrNotSupported.
func (o *Output) Err() error {
	msg := Truncate(o.Message)
	if msg == "" {
		msg = "no message"
	}
	switch o.Status {
	case StatusSuccess:
		return nil
	case StatusNotSupported:
		return fmt.Errorf("%w (%q): %s", ErrNotSupported, o.Status, msg)
	default:
		return fmt.Errorf("%s: %s", o.Status, msg)
	}
}

// VolumeSpec turns a successful output into what NewVolume needs. Without a
// "volume", the PV gets a FlexVolume source of flexDriver whose options are
// the class parameters (what the old flex provisioner did). A flexVolume
// source without a driver name gets flexDriver.
func (o *Output) VolumeSpec(flexDriver string, in Input) (controller.VolumeSpec, error) {
	if len(o.Volume) == 0 || string(o.Volume) == "null" {
		if flexDriver == "" {
			return controller.VolumeSpec{}, errors.New(`driver returned no "volume" and --flex-driver is not set: return a volume source, or set --flex-driver to make FlexVolume PVs`)
		}
		opts := map[string]string{}
		for k, v := range in {
			if !isReserved(k) {
				opts[k] = v
			}
		}
		return controller.VolumeSpec{Source: corev1.PersistentVolumeSource{
			FlexVolume: &corev1.FlexPersistentVolumeSource{Driver: flexDriver, Options: opts},
		}}, nil
	}
	var v OutputVolume
	dec := json.NewDecoder(bytes.NewReader(o.Volume))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return controller.VolumeSpec{}, fmt.Errorf(`driver returned an invalid "volume" (%s): %s`, Truncate(err.Error()), Truncate(string(o.Volume)))
	}
	sources := setSources(&v.PersistentVolumeSource)
	if len(sources) != 1 {
		return controller.VolumeSpec{}, fmt.Errorf(`driver returned a "volume" with %d sources (%s), expected exactly one such as flexVolume, hostPath, nfs or iscsi`,
			len(sources), strings.Join(sources, ", "))
	}
	if f := v.FlexVolume; f != nil && f.Driver == "" {
		if flexDriver == "" {
			return controller.VolumeSpec{}, errors.New(`driver returned a flexVolume without "driver" and --flex-driver is not set`)
		}
		f.Driver = flexDriver
	}
	spec := controller.VolumeSpec{Source: v.PersistentVolumeSource, NodeAffinity: v.NodeAffinity}
	if v.Capacity != "" {
		q, ok := parseCapacity(v.Capacity)
		if !ok {
			return controller.VolumeSpec{}, fmt.Errorf(`driver returned an invalid "capacity" %q: expected a positive quantity below 8Ei such as 10Gi`, Truncate(v.Capacity))
		}
		spec.Capacity = q
	}
	return spec, nil
}

// capacityFormat is a size in bytes: a whole or decimal number with a
// suffix or a short exponent. ParseQuantity takes forever on some other
// quantities, such as 1e-999999999.
var capacityFormat = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?([KMGTPE]i|[kMGTPE]|[eE][0-9]{1,2})?$`)

// parseCapacity reads a positive size that fits an int64 in bytes.
func parseCapacity(s string) (resource.Quantity, bool) {
	if !capacityFormat.MatchString(s) {
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		return resource.Quantity{}, false
	}
	_, err = capacity.Bytes(q)
	return q, err == nil
}

// setSources names the fields of a PersistentVolumeSource that are set.
func setSources(src *corev1.PersistentVolumeSource) []string {
	var names []string
	v := reflect.ValueOf(src).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// Truncate shortens driver text to MaxMessageBytes on a rune boundary.
func Truncate(s string) string { return podrun.Truncate(s) }

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package mapper turns Cinder's answer to os-initialize_connection into the
// native Kubernetes volume source the kubelet attaches by itself: iSCSI, RBD
// or Fibre Channel. One Mapper per connection type (driver_volume_type).
package mapper

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Connection is the connection info Cinder returned.
type Connection struct {
	// DriverVolumeType is Cinder's driver_volume_type: iscsi, rbd,
	// fibre_channel, ...
	DriverVolumeType string
	// Data is the type-specific "data" object, as decoded from JSON
	// (numbers are float64).
	Data map[string]any
}

// Request is what a Mapper needs besides the connection.
type Request struct {
	Connection Connection
	// PVName names the PersistentVolume; per-volume secrets are named after it.
	PVName string
	// ClaimNamespace is the claim's namespace.
	ClaimNamespace string
	// SecretNamespace is where a per-volume secret (iSCSI CHAP) is created.
	SecretNamespace string
	// InitiatorName is the iSCSI initiator the provisioner sent in its
	// connector; iSCSI PVs carry it so that the node logs in with the
	// identity Cinder granted access to.
	InitiatorName string
	// FSType is the filesystem the kubelet creates; empty means its default.
	FSType string
	// RBDSecretName and RBDSecretNamespace name the cephx Secret (class
	// parameters rbdSecretName, rbdSecretNamespace).
	RBDSecretName      string
	RBDSecretNamespace string
}

// Result is a mapped volume.
type Result struct {
	Source corev1.PersistentVolumeSource
	// Secret, when set, must exist for the volume to attach: the provisioner
	// creates it before the PV is saved and deletes it with the volume.
	Secret *corev1.Secret
}

// Mapper maps one connection type. Errors name the Cinder key or class
// parameter at fault and never contain credentials.
type Mapper interface {
	Map(req Request) (*Result, error)
}

var mappers = map[string]Mapper{
	"iscsi":         ISCSI{},
	"rbd":           RBD{},
	"fibre_channel": FC{},
	// Some drivers, and the old standalone provisioner, say fc.
	"fc": FC{},
}

// Supported lists the connection types that can be mapped, sorted.
func Supported() []string {
	return slices.Sorted(maps.Keys(mappers))
}

// ErrUnsupported is returned (wrapped) for a connection type with no mapper.
type ErrUnsupported struct{ Type string }

func (e *ErrUnsupported) Error() string {
	return fmt.Sprintf("cinder offers this volume over %q, which has no native Kubernetes volume source here; supported connection types are %s: use a volume type whose backend serves one of them",
		e.Type, strings.Join(Supported(), ", "))
}

// Map maps req with the mapper of its connection type.
func Map(req Request) (*Result, error) {
	m, ok := mappers[strings.ToLower(req.Connection.DriverVolumeType)]
	if !ok {
		return nil, &ErrUnsupported{Type: req.Connection.DriverVolumeType}
	}
	return m.Map(req)
}

// data reads typed values out of a connection's data, remembering the first
// key that had the wrong shape.
type data struct {
	kind string
	m    map[string]any
	err  error
}

func (d *data) fail(key, want string) {
	if d.err == nil {
		d.err = fmt.Errorf("the %s connection info from Cinder has %s of an unexpected kind (want %s): the backend driver's answer cannot be mapped", d.kind, key, want)
	}
}

// str reads a string; a number is accepted and printed.
func (d *data) str(key string) string {
	switch v := d.m[key].(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return fmt.Sprintf("%v", v)
	default:
		d.fail(key, "a string")
		return ""
	}
}

// strs reads a list of strings, or a single string as a one-element list.
func (d *data) strs(key string) []string {
	switch v := d.m[key].(type) {
	case nil:
		return nil
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			switch s := e.(type) {
			case string:
				out = append(out, s)
			case float64:
				out = append(out, fmt.Sprintf("%v", s))
			default:
				d.fail(key, "a list of strings")
				return nil
			}
		}
		return out
	default:
		d.fail(key, "a string or a list of strings")
		return nil
	}
}

// integer reads a whole number, also from a string; ok is false when absent.
func (d *data) integer(key string) (n int, ok bool) {
	switch v := d.m[key].(type) {
	case nil:
		return 0, false
	case float64:
		if v != float64(int(v)) {
			d.fail(key, "a whole number")
			return 0, false
		}
		return int(v), true
	case string:
		if _, err := fmt.Sscanf(v, "%d", &n); err != nil {
			d.fail(key, "a whole number")
			return 0, false
		}
		return n, true
	default:
		d.fail(key, "a whole number")
		return 0, false
	}
}

// integers reads a list of whole numbers, or a single one as a list.
func (d *data) integers(key string) []int {
	v, ok := d.m[key].([]any)
	if !ok {
		if n, ok := d.integer(key); ok {
			return []int{n}
		}
		return nil
	}
	out := make([]int, 0, len(v))
	for i := range v {
		sub := data{kind: d.kind, m: map[string]any{key: v[i]}}
		n, ok := sub.integer(key)
		if !ok {
			d.fail(key, "a list of whole numbers")
			return nil
		}
		out = append(out, n)
	}
	return out
}

// boolean reads a boolean (also "true"/"false"); def when absent.
func (d *data) boolean(key string, def bool) bool {
	switch v := d.m[key].(type) {
	case nil:
		return def
	case bool:
		return v
	case string:
		switch strings.ToLower(v) {
		case "true", "1", "yes":
			return true
		case "false", "0", "no":
			return false
		}
	}
	d.fail(key, "a boolean")
	return def
}

func missing(kind, key, hint string) error {
	return fmt.Errorf("the %s connection info from Cinder lacks %s%s: the backend driver's answer cannot be mapped", kind, key, hint)
}

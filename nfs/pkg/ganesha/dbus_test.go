// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package ganesha

import (
	"errors"
	"strings"
	"testing"

	"github.com/godbus/dbus/v5"
)

// When Ganesha is down, users read "not running" in the PVC's events, not the
// bus's jargon; other bus errors keep the method that failed.
func TestCallErrorSaysWhenGaneshaIsDown(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"no owner", dbus.Error{Name: errServiceUnknown, Body: []any{"The name org.ganesha.nfsd was not provided by any .service files"}}, "NFS-Ganesha is not running"},
		{"name lost", dbus.Error{Name: errNameHasNoOwner}, "NFS-Ganesha is not running"},
		{"refused export", dbus.Error{Name: "org.freedesktop.DBus.Error.InvalidArgs", Body: []any{"bad path"}}, "D-Bus " + methodAdd},
		{"bus gone", errors.New("dbus: connection closed by user"), "D-Bus " + methodAdd},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := callError(methodAdd, tt.err)
			if !strings.Contains(got.Error(), tt.want) {
				t.Errorf("error %q does not say %q", got, tt.want)
			}
			if !errors.Is(got, tt.err) && !errors.As(got, new(dbus.Error)) {
				t.Errorf("error %q lost its cause", got)
			}
		})
	}
}

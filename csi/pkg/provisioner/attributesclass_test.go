// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestMutableParameters(t *testing.T) {
	vac := func(name, driver string) *storagev1.VolumeAttributesClass {
		return &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: name}, DriverName: driver,
			Parameters: map[string]string{"iops": "3000"}}
	}
	p, _ := newTestProvisioner(t, Config{}, vac("fast", testDriver), vac("foreign", "other.example.com"))
	tests := []struct {
		vac     *string
		want    map[string]string
		wantErr string
	}{
		{vac: nil},
		{vac: ptr.To("")},
		{vac: ptr.To("fast"), want: map[string]string{"iops": "3000"}},
		{vac: ptr.To("absent"), wantErr: `VolumeAttributesClass "absent" not found`},
		{vac: ptr.To("foreign"), wantErr: "is for driver other.example.com, not " + testDriver},
	}
	for _, tc := range tests {
		claim := newClaim(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeAttributesClassName = tc.vac })
		got, err := p.mutableParameters(testContext(t), claim)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want %q", tc.vac, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !maps.Equal(got, tc.want) || (tc.want == nil) != (got == nil) {
			t.Errorf("%v: got %v, %v; want %v", tc.vac, got, err, tc.want)
		}
	}
}

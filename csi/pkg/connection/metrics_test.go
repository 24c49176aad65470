// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package connection

import (
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsRecordEveryCall: each call to the driver is counted in the CSI
// sidecars' histogram with their labels: the driver (unknown until it said
// its name), the full gRPC method and the gRPC code.
func TestMetricsRecordEveryCall(t *testing.T) {
	path := socketPath(t)
	serve(t, path, &plugin{ready: true})
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := Dial(path, m.Interceptor())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if err := Probe(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	info, err := GetDriverInfo(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	m.SetDriverName(info.Name)
	if _, err := csi.NewControllerClient(conn).CreateVolume(t.Context(), &csi.CreateVolumeRequest{Name: "v"}); err == nil {
		t.Fatal("CreateVolume of a driver without it succeeded")
	}

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range families {
		if f.GetName() != OperationsMetric {
			continue
		}
		if f.GetType().String() != "HISTOGRAM" {
			t.Errorf("%s is a %s, want a histogram", OperationsMetric, f.GetType())
		}
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got = append(got, strings.Join(labels, ","))
			if b := s.GetHistogram().GetBucket(); len(b) != len(operationsBuckets) || b[len(b)-1].GetUpperBound() != 600 {
				t.Errorf("buckets %v, want the CSI sidecars' (up to 600 s)", b)
			}
		}
	}
	slices.Sort(got)
	want := []string{
		"driver_name=test.example.com,grpc_status_code=Unimplemented,method_name=/csi.v1.Controller/CreateVolume",
		"driver_name=unknown-driver,grpc_status_code=OK,method_name=/csi.v1.Controller/ControllerGetCapabilities",
		"driver_name=unknown-driver,grpc_status_code=OK,method_name=/csi.v1.Identity/GetPluginCapabilities",
		"driver_name=unknown-driver,grpc_status_code=OK,method_name=/csi.v1.Identity/GetPluginInfo",
		"driver_name=unknown-driver,grpc_status_code=OK,method_name=/csi.v1.Identity/Probe",
	}
	if !slices.Equal(got, want) {
		t.Errorf("series:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

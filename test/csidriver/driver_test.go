// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csidriver

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

func start(t *testing.T, opts Options) (*Driver, csi.ControllerClient, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "csi.sock")
	d := New(opts)
	if err := d.Start(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)
	return d, dial(t, path), path
}

func dial(t *testing.T, path string) csi.ControllerClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return csi.NewControllerClient(conn)
}

func request(name string, bytes int64) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name:          name,
		CapacityRange: &csi.CapacityRange{RequiredBytes: bytes},
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		}},
	}
}

// TestBehavesLikeARealDriver checks the behavior the provisioner's tests
// rely on.
func TestBehavesLikeARealDriver(t *testing.T) {
	d, c, path := start(t, Options{Name: "test.example.com", Topology: true})
	ctx := t.Context()

	first, err := c.CreateVolume(ctx, request("a", 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.CreateVolume(ctx, request("a", 1<<20))
	if err != nil || again.GetVolume().GetVolumeId() != first.GetVolume().GetVolumeId() {
		t.Fatalf("same name, same size: %v, %v; want the same volume", again, err)
	}
	if _, err := c.CreateVolume(ctx, request("a", 1<<30)); status.Code(err) != codes.AlreadyExists {
		t.Errorf("same name, bigger size: %v, want AlreadyExists", err)
	}

	clone := request("b", 1<<20)
	clone.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: first.GetVolume().GetVolumeId()}}}
	clone.AccessibilityRequirements = &csi.TopologyRequirement{
		Requisite: []*csi.Topology{{Segments: map[string]string{"zone": "a"}}, {Segments: map[string]string{"zone": "b"}}},
		Preferred: []*csi.Topology{{Segments: map[string]string{"zone": "b"}}, {Segments: map[string]string{"zone": "a"}}},
	}
	rsp, err := c.CreateVolume(ctx, clone)
	if err != nil {
		t.Fatal(err)
	}
	if got := rsp.GetVolume().GetAccessibleTopology(); len(got) != 1 || got[0].GetSegments()["zone"] != "b" {
		t.Errorf("accessible topology %v, want the first preferred", got)
	}
	if rsp.GetVolume().GetContentSource().GetVolume().GetVolumeId() != first.GetVolume().GetVolumeId() {
		t.Errorf("the clone has no content source")
	}
	missing := request("c", 1<<20)
	missing.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "nope"}}}
	if _, err := c.CreateVolume(ctx, missing); status.Code(err) != codes.NotFound {
		t.Errorf("restore of a missing snapshot: %v, want NotFound", err)
	}

	// A restarted server has the same volumes. (A new connection: the old
	// one's first call may still go to the closed transport.)
	d.Stop()
	if err := d.Start(path); err != nil {
		t.Fatal(err)
	}
	c = dial(t, path)
	if n := len(d.Volumes()); n != 2 {
		t.Fatalf("%d volumes after a restart, want 2", n)
	}
	for range 2 {
		if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: first.GetVolume().GetVolumeId()}); err != nil {
			t.Errorf("deleting (twice): %v", err)
		}
	}
	if n := len(d.Volumes()); n != 1 {
		t.Errorf("%d volumes, want 1", n)
	}
	if n := len(d.DeleteRequests()); n != 2 {
		t.Errorf("%d recorded deletes, want 2", n)
	}
}

// TestFaults: injected errors, and a blocked call that makes the same name
// Aborted until it is released.
func TestFaults(t *testing.T) {
	d, c, _ := start(t, Options{Name: "test.example.com"})
	ctx := t.Context()
	d.FailCreate(Fault{Code: codes.Unavailable, Message: "down"})
	if _, err := c.CreateVolume(ctx, request("a", 1)); status.Code(err) != codes.Unavailable {
		t.Fatalf("%v, want Unavailable", err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	d.FailCreate(Fault{Started: started, Release: release})
	done := make(chan error, 1)
	go func() {
		_, err := c.CreateVolume(ctx, request("a", 1))
		done <- err
	}()
	<-started
	if _, err := c.CreateVolume(ctx, request("a", 1)); status.Code(err) != codes.Aborted {
		t.Errorf("second call while the first is blocked: %v, want Aborted", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Volume("a"); !ok {
		t.Error("the released call created no volume")
	}
}

// TestGetCapacity: capacity per pool and segment, less the volumes created
// there; the maximum volume size when set; faults.
func TestGetCapacity(t *testing.T) {
	d, c, _ := start(t, Options{Name: "test.example.com", Topology: true})
	ctx := t.Context()
	zoneA, zoneB := map[string]string{"zone": "a"}, map[string]string{"zone": "b"}
	d.SetCapacity("", zoneA, 10<<30)
	d.SetCapacity("", zoneB, 20<<30)
	d.SetCapacity("fast", zoneA, 1<<30)
	capacity := func(pool string, segment map[string]string) *csi.GetCapacityResponse {
		t.Helper()
		req := &csi.GetCapacityRequest{AccessibleTopology: &csi.Topology{Segments: segment}}
		if pool != "" {
			req.Parameters = map[string]string{PoolParameter: pool}
		}
		rsp, err := c.GetCapacity(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return rsp
	}
	for _, tc := range []struct {
		pool    string
		segment map[string]string
		want    int64
	}{{"", zoneA, 10 << 30}, {"", zoneB, 20 << 30}, {"fast", zoneA, 1 << 30}, {"fast", zoneB, 0}, {"", map[string]string{"zone": "c"}, 0}} {
		if got := capacity(tc.pool, tc.segment).GetAvailableCapacity(); got != tc.want {
			t.Errorf("pool %q segment %v: %d bytes, want %d", tc.pool, tc.segment, got, tc.want)
		}
	}
	create := request("v", 3<<30)
	create.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: zoneB}}}
	if _, err := c.CreateVolume(ctx, create); err != nil {
		t.Fatal(err)
	}
	if got := capacity("", zoneB).GetAvailableCapacity(); got != 17<<30 {
		t.Errorf("after a 3 GiB volume in zone b: %d bytes free, want 17 GiB", got)
	}
	if capacity("", zoneA).GetMaximumVolumeSize() != nil {
		t.Error("maximum volume size reported without being set")
	}
	d.SetMaximumVolumeSize(2 << 30)
	if got := capacity("", zoneA).GetMaximumVolumeSize().GetValue(); got != 2<<30 {
		t.Errorf("maximum volume size %d, want 2 GiB", got)
	}
	d.FailGetCapacity(Fault{Code: codes.Unavailable, Message: "backend down"})
	if _, err := c.GetCapacity(ctx, &csi.GetCapacityRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("faulted GetCapacity: %v, want Unavailable", err)
	}
	if n := len(d.CapacityRequests()); n != 9 {
		t.Errorf("%d recorded GetCapacity requests, want 9", n)
	}

	_, c, _ = start(t, Options{Name: "test.example.com", ControllerCapabilities: []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}})
	if _, err := c.GetCapacity(ctx, &csi.GetCapacityRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("GetCapacity without GET_CAPACITY: %v, want Unimplemented", err)
	}
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csidriver

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

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
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
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

// TestValidation: what the CSI spec forbids a CO to send is refused with
// the codes csi-driver-host-path answers, before anything is created.
func TestValidation(t *testing.T) {
	d, c, _ := start(t, Options{Name: "test.example.com", MaxVolumeSize: 1 << 30})
	ctx := t.Context()
	if _, err := c.CreateVolume(ctx, request("existing", 1<<20)); err != nil {
		t.Fatal(err)
	}
	mode := func(m csi.VolumeCapability_AccessMode_Mode) func(*csi.CreateVolumeRequest) {
		return func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities[0].AccessMode.Mode = m }
	}
	for _, tc := range []struct {
		name   string
		mutate func(*csi.CreateVolumeRequest)
		want   codes.Code
	}{
		{"no name", func(r *csi.CreateVolumeRequest) { r.Name = "" }, codes.InvalidArgument},
		{"no capabilities", func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities = nil }, codes.InvalidArgument},
		{"no access type", func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities[0].AccessType = nil }, codes.InvalidArgument},
		{"no access mode", func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities[0].AccessMode = nil }, codes.InvalidArgument},
		{"single-writer mode without SINGLE_NODE_MULTI_WRITER", mode(csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER), codes.InvalidArgument},
		{"block and mount", func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities = append(r.VolumeCapabilities, &csi.VolumeCapability{
				AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
				AccessMode: r.VolumeCapabilities[0].AccessMode,
			})
		}, codes.InvalidArgument},
		{"negative capacity", func(r *csi.CreateVolumeRequest) { r.CapacityRange.RequiredBytes = -1 }, codes.InvalidArgument},
		{"required above limit", func(r *csi.CreateVolumeRequest) { r.CapacityRange.LimitBytes = 1 }, codes.InvalidArgument},
		{"above the maximum size", func(r *csi.CreateVolumeRequest) { r.CapacityRange.RequiredBytes = 2 << 30 }, codes.OutOfRange},
		{"mutable parameters without MODIFY_VOLUME", func(r *csi.CreateVolumeRequest) { r.MutableParameters = map[string]string{"iops": "1"} }, codes.InvalidArgument},
		{"topology requirements without VOLUME_ACCESSIBILITY_CONSTRAINTS", func(r *csi.CreateVolumeRequest) {
			r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{"zone": "a"}}}}
		}, codes.InvalidArgument},
		{"empty content source", func(r *csi.CreateVolumeRequest) { r.VolumeContentSource = &csi.VolumeContentSource{} }, codes.InvalidArgument},
		{"missing source volume", func(r *csi.CreateVolumeRequest) {
			r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "absent"}}}
		}, codes.NotFound},
		{"same name, other size", func(r *csi.CreateVolumeRequest) { r.Name, r.CapacityRange.RequiredBytes = "existing", 2<<20 }, codes.AlreadyExists},
		{"same name, other parameters", func(r *csi.CreateVolumeRequest) { r.Name, r.Parameters = "existing", map[string]string{"type": "fast"} }, codes.AlreadyExists},
		{"same name, block", func(r *csi.CreateVolumeRequest) {
			r.Name = "existing"
			r.VolumeCapabilities[0].AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		}, codes.AlreadyExists},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := request("v-"+tc.name, 1<<20)
			tc.mutate(req)
			if _, err := c.CreateVolume(ctx, req); status.Code(err) != tc.want {
				t.Errorf("%v, want %s", err, tc.want)
			}
		})
	}
	if n := len(d.Volumes()); n != 1 {
		t.Errorf("%d volumes, want only the first", n)
	}
	if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("DeleteVolume without an id: %v, want InvalidArgument", err)
	}
	if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "../not-an-id"}); err != nil {
		t.Errorf("DeleteVolume of an id no volume has: %v, want success", err)
	}
}

// TestStateDir: with a StateDir, the volumes are a state file and a
// directory each; a new driver on that directory (a process started again
// after a kill) has them, and removes what a kill left half done.
func TestStateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	opts := Options{Name: "test.example.com", StateDir: dir}
	d, c, _ := start(t, opts)
	ctx := t.Context()
	src, err := c.CreateVolume(ctx, request("source", 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	srcID := src.GetVolume().GetVolumeId()
	if err := os.WriteFile(filepath.Join(dir, srcID, "data"), []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	clone := request("clone", 1<<20)
	clone.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: srcID}}}
	cloned, err := c.CreateVolume(ctx, clone)
	if err != nil {
		t.Fatal(err)
	}
	cloneID := cloned.GetVolume().GetVolumeId()
	if data, err := os.ReadFile(filepath.Join(dir, cloneID, "data")); err != nil || string(data) != "hello" {
		t.Errorf("the clone's directory has %q (%v), want the source's file", data, err)
	}
	if err := d.AddSnapshot("snap-1", 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := CheckStateDir(dir); err != nil {
		t.Error(err)
	}

	// What a kill can leave: the directory of a creation never recorded,
	// a state file half written.
	orphan := filepath.Join(dir, "00000000-0000-0000-0000-000000000001")
	if err := os.Mkdir(orphan, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, tempPrefix+"123"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckStateDir(dir); err == nil || !strings.Contains(err.Error(), filepath.Base(orphan)) {
		t.Errorf("CheckStateDir: %v, want the orphan named", err)
	}
	again, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Volumes(); len(got) != 2 || got[0].Name != "clone" || got[0].SourceVolumeID != srcID || got[1].ID != srcID {
		t.Errorf("volumes after a restart %+v, want source and its clone", got)
	}
	if err := CheckStateDir(dir); err != nil {
		t.Errorf("after a restart: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, tempPrefix+"123")); !os.IsNotExist(err) {
		t.Errorf("the half-written state file is still there (%v)", err)
	}
	if vols, err := ReadState(dir); err != nil || len(vols) != 2 {
		t.Errorf("ReadState: %v, %v; want both volumes", vols, err)
	}

	// Deleting removes the directory; a directory left by a deletion cut
	// short goes with the next DeleteVolume of its id.
	if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: cloneID}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, cloneID)); !os.IsNotExist(err) {
		t.Errorf("the deleted volume's directory is still there (%v)", err)
	}
	if err := os.Mkdir(orphan, 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: filepath.Base(orphan)}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("DeleteVolume answered OK with the directory still there (%v)", err)
	}

	// A volume whose directory is gone is lost data: the driver refuses
	// to start.
	if err := os.RemoveAll(filepath.Join(dir, srcID)); err != nil {
		t.Fatal(err)
	}
	if _, err := New(opts); err == nil || !strings.Contains(err.Error(), srcID) {
		t.Errorf("New with a volume's directory gone: %v, want an error naming it", err)
	}
}

// TestRequestLog: what a driver in another process was asked, secrets
// included, read back from its log; a line cut short by a kill is left out.
func TestRequestLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "requests.jsonl")
	_, c, _ := start(t, Options{Name: "test.example.com", RequestLog: log})
	ctx := t.Context()
	req := request("a", 1<<20)
	req.Secrets = map[string]string{"password": "s3cret"}
	rsp, err := c.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: rsp.GetVolume().GetVolumeId()}); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"method":"csi.v1.Create`); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	got, err := ReadRequestLog(log)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Create) != 1 || len(got.Delete) != 1 || got.LastCreate("a").GetSecrets()["password"] != "s3cret" ||
		got.Delete[0].GetVolumeId() != rsp.GetVolume().GetVolumeId() {
		t.Errorf("read back %+v", got)
	}
}

// TestFlags: Args and AddFlags agree.
func TestFlags(t *testing.T) {
	for _, want := range []Options{
		{Name: "a.example.com"},
		{Name: "b.example.com", ControllerCapabilities: []csi.ControllerServiceCapability_RPC_Type{}, NoControllerService: true},
		{Name: "c.example.com", ControllerCapabilities: []csi.ControllerServiceCapability_RPC_Type{
			csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME, csi.ControllerServiceCapability_RPC_MODIFY_VOLUME,
		}, Topology: true, MaxVolumeSize: 5 << 30, StateDir: "/state", RequestLog: "/log", OperationDelay: 300 * time.Millisecond},
	} {
		var got Options
		fs := flag.NewFlagSet("csidriver", flag.ContinueOnError)
		got.AddFlags(fs)
		if err := fs.Parse(want.Args()); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v parsed as %+v, want %+v", want.Args(), got, want)
		}
	}
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package csidriver is a CSI controller plugin for tests that behaves like a
// real driver: it keeps its volumes across calls and across restarts of its
// server, answers repeated CreateVolume calls for one name with the same
// volume, refuses a name reused with another size (AlreadyExists) and a
// second call for a name still being created (Aborted), treats deleting a
// missing volume as success, honors topology requirements, clones volumes
// and restores snapshots. Faults (errors, delays, calls that block until
// released) are injected per call, and every request is recorded so tests can
// assert on parameters and secrets.
//
// It is served on a unix socket by csi-test's driver.CSIDriver.
package csidriver

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/driver"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// DefaultCapacityBytes is the size of a volume whose request gives none.
const DefaultCapacityBytes = 1 << 30

// Options describe the driver.
type Options struct {
	// Name is returned by GetPluginInfo.
	Name string
	// ControllerCapabilities default to CREATE_DELETE_VOLUME, CLONE_VOLUME
	// and GET_CAPACITY.
	ControllerCapabilities []csi.ControllerServiceCapability_RPC_Type
	// NoControllerService drops the CONTROLLER_SERVICE plugin capability.
	NoControllerService bool
	// Topology adds the VOLUME_ACCESSIBILITY_CONSTRAINTS plugin capability:
	// volumes are then reachable only from the segment chosen at creation.
	Topology bool
}

// Volume is a volume the driver holds.
type Volume struct {
	ID, Name      string
	CapacityBytes int64
	Parameters    map[string]string
	// SourceVolumeID and SourceSnapshotID say what the volume was filled from.
	SourceVolumeID, SourceSnapshotID string
	// Topology is where the volume is reachable from; nil when anywhere.
	Topology *csi.Topology
	// Block is true when it was created for block access.
	Block bool
}

// Fault changes the answer to one call.
type Fault struct {
	// Started, if not nil, is closed when the call arrives.
	Started chan struct{}
	// Release, if not nil, holds the call until it is closed, whatever the
	// caller does meanwhile: a backend that completes an operation its
	// client has given up on.
	Release <-chan struct{}
	// Delay holds the call this long, also regardless of the caller.
	Delay time.Duration
	// Code, if not OK, is returned (with Message) instead of doing the work.
	Code    codes.Code
	Message string
}

// Driver is the plugin's state; its server can be stopped and started again.
type Driver struct {
	opts Options

	mu           sync.Mutex
	volumes      map[string]*Volume // by name
	snapshots    map[string]int64   // snapshot id -> size
	inProgress   map[string]bool    // names being created
	nextID       int
	notReady     bool
	createFaults []Fault
	deleteFaults []Fault
	creates      []*csi.CreateVolumeRequest
	deletes      []*csi.DeleteVolumeRequest
	capacity     map[capacityKey]int64 // total size of each pool in each segment
	maxVolume    int64                 // 0: not reported
	capFaults    []Fault
	capRequests  []*csi.GetCapacityRequest

	server *driver.CSIDriver
}

// New returns a driver with no volumes; Start serves it.
func New(opts Options) *Driver {
	if opts.ControllerCapabilities == nil {
		opts.ControllerCapabilities = []csi.ControllerServiceCapability_RPC_Type{
			csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
			csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
			csi.ControllerServiceCapability_RPC_GET_CAPACITY,
		}
	}
	return &Driver{opts: opts, volumes: map[string]*Volume{}, snapshots: map[string]int64{}, inProgress: map[string]bool{},
		capacity: map[capacityKey]int64{}}
}

// Start serves the driver on a unix socket at path (removed first if stale).
func (d *Driver) Start(path string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	srv := driver.NewCSIDriver(&driver.CSIDriverServers{Identity: &identity{d: d}, Controller: &controller{d: d}})
	if err := srv.Start(l); err != nil {
		_ = l.Close()
		return err
	}
	d.mu.Lock()
	d.server = srv
	d.mu.Unlock()
	// csi-test starts Serve in a goroutine and panics if Stop comes before
	// it: return only once the server answers, so that Stop is always safe.
	return waitServing(path)
}

// startTimeout bounds the wait for a started server to answer.
const startTimeout = 30 * time.Second

func waitServing(path string) error {
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	_, err = csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true))
	return err
}

// Stop stops serving, as a crashed or restarting driver would; the volumes
// stay, as on a real backend. Calls blocked by a Fault are abandoned.
func (d *Driver) Stop() {
	d.mu.Lock()
	srv := d.server
	d.server = nil
	d.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// SetReady sets what Probe answers.
func (d *Driver) SetReady(ready bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.notReady = !ready
}

// FailCreate queues faults for the next CreateVolume calls, one per call.
func (d *Driver) FailCreate(faults ...Fault) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.createFaults = append(d.createFaults, faults...)
}

// FailDelete queues faults for the next DeleteVolume calls, one per call.
func (d *Driver) FailDelete(faults ...Fault) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deleteFaults = append(d.deleteFaults, faults...)
}

// PoolParameter is the StorageClass parameter naming the storage pool a
// volume comes from; without it, the pool "".
const PoolParameter = "pool"

// capacityKey is a pool in a segment (segmentKey).
type capacityKey struct{ pool, segment string }

// segmentKey is a segment as sorted key=value pairs; "" for none.
func segmentKey(segments map[string]string) string {
	keys := make([]string, 0, len(segments))
	for k := range segments {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+segments[k])
	}
	return strings.Join(parts, ",")
}

// SetCapacity sets the total size of a pool (the class parameter
// PoolParameter, "" without it) in a topology segment (nil for a driver
// without topology). GetCapacity answers it minus the volumes of that pool
// created in that segment; a pool or segment never set has no room.
func (d *Driver) SetCapacity(pool string, segment map[string]string, bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.capacity[capacityKey{pool, segmentKey(segment)}] = bytes
}

// SetMaximumVolumeSize sets the largest volume GetCapacity reports; 0
// reports none.
func (d *Driver) SetMaximumVolumeSize(bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.maxVolume = bytes
}

// FailGetCapacity queues faults for the next GetCapacity calls, one per call.
func (d *Driver) FailGetCapacity(faults ...Fault) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.capFaults = append(d.capFaults, faults...)
}

// CapacityRequests returns copies of every GetCapacity request received.
func (d *Driver) CapacityRequests() []*csi.GetCapacityRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return cloneAll(d.capRequests)
}

// AddSnapshot makes a snapshot of the given size available for restores.
func (d *Driver) AddSnapshot(id string, sizeBytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.snapshots[id] = sizeBytes
}

// Volumes returns copies of the volumes, sorted by name.
func (d *Driver) Volumes() []Volume {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Volume, 0, len(d.volumes))
	for _, v := range d.volumes {
		c := *v
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Volume) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Volume returns the volume of a name.
func (d *Driver) Volume(name string) (Volume, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.volumes[name]
	if !ok {
		return Volume{}, false
	}
	return *v, true
}

// CreateRequests returns copies of every CreateVolume request received.
func (d *Driver) CreateRequests() []*csi.CreateVolumeRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return cloneAll(d.creates)
}

// DeleteRequests returns copies of every DeleteVolume request received.
func (d *Driver) DeleteRequests() []*csi.DeleteVolumeRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return cloneAll(d.deletes)
}

// LastCreateRequest returns the last CreateVolume request for a name.
func (d *Driver) LastCreateRequest(name string) *csi.CreateVolumeRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := len(d.creates) - 1; i >= 0; i-- {
		if d.creates[i].GetName() == name {
			return proto.Clone(d.creates[i]).(*csi.CreateVolumeRequest)
		}
	}
	return nil
}

func cloneAll[T proto.Message](in []T) []T {
	out := make([]T, len(in))
	for i, m := range in {
		out[i] = proto.Clone(m).(T)
	}
	return out
}

// nextFault pops the next queued fault, if any.
func nextFault(q *[]Fault) (Fault, bool) {
	if len(*q) == 0 {
		return Fault{}, false
	}
	f := (*q)[0]
	*q = (*q)[1:]
	return f, true
}

// apply runs the blocking part of a fault (outside the lock) and returns
// its error, if it has one.
func (f Fault) apply() error {
	if f.Started != nil {
		close(f.Started)
	}
	if f.Release != nil {
		<-f.Release
	}
	if f.Delay > 0 {
		time.Sleep(f.Delay)
	}
	if f.Code != codes.OK {
		return status.Error(f.Code, f.Message)
	}
	return nil
}

type identity struct {
	csi.UnimplementedIdentityServer
	d *Driver
}

func (s *identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: s.d.opts.Name, VendorVersion: "test"}, nil
}

func (s *identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	var caps []*csi.PluginCapability
	add := func(t csi.PluginCapability_Service_Type) {
		caps = append(caps, &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}})
	}
	if !s.d.opts.NoControllerService {
		add(csi.PluginCapability_Service_CONTROLLER_SERVICE)
	}
	if s.d.opts.Topology {
		add(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

func (s *identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(!s.d.notReady)}, nil
}

type controller struct {
	csi.UnimplementedControllerServer
	d *Driver
}

func (s *controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range s.d.opts.ControllerCapabilities {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (s *controller) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	d := s.d
	d.mu.Lock()
	d.creates = append(d.creates, proto.Clone(req).(*csi.CreateVolumeRequest))
	if req.GetName() == "" || len(req.GetVolumeCapabilities()) == 0 {
		d.mu.Unlock()
		return nil, status.Error(codes.InvalidArgument, "name and volume capabilities are required")
	}
	if d.inProgress[req.GetName()] {
		d.mu.Unlock()
		return nil, status.Errorf(codes.Aborted, "an operation for volume %s is already in progress", req.GetName())
	}
	fault, faulted := nextFault(&d.createFaults)
	d.inProgress[req.GetName()] = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.inProgress, req.GetName())
		d.mu.Unlock()
	}()
	if faulted {
		if err := fault.apply(); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.create(req)
}

// create does the work of CreateVolume under the lock.
func (d *Driver) create(req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	required, limit := req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes()
	size := required
	if size == 0 {
		size = DefaultCapacityBytes
		if limit > 0 && limit < size {
			size = limit
		}
	}
	if limit > 0 && required > limit {
		return nil, status.Errorf(codes.OutOfRange, "required %d bytes exceeds the limit of %d", required, limit)
	}
	var srcVolume, srcSnapshot string
	if src := req.GetVolumeContentSource(); src != nil {
		switch {
		case src.GetVolume() != nil:
			srcVolume = src.GetVolume().GetVolumeId()
			source := d.byID(srcVolume)
			if source == nil {
				return nil, status.Errorf(codes.NotFound, "source volume %s does not exist", srcVolume)
			}
			if source.CapacityBytes > size {
				return nil, status.Errorf(codes.OutOfRange, "source volume %s has %d bytes, more than the %d requested", srcVolume, source.CapacityBytes, size)
			}
		case src.GetSnapshot() != nil:
			srcSnapshot = src.GetSnapshot().GetSnapshotId()
			snapSize, ok := d.snapshots[srcSnapshot]
			if !ok {
				return nil, status.Errorf(codes.NotFound, "snapshot %s does not exist", srcSnapshot)
			}
			if snapSize > size {
				return nil, status.Errorf(codes.OutOfRange, "snapshot %s has %d bytes, more than the %d requested", srcSnapshot, snapSize, size)
			}
		}
	}
	if v, ok := d.volumes[req.GetName()]; ok {
		if v.CapacityBytes < required || (limit > 0 && v.CapacityBytes > limit) || v.SourceVolumeID != srcVolume || v.SourceSnapshotID != srcSnapshot {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s exists with %d bytes and another content source", v.Name, v.CapacityBytes)
		}
		return &csi.CreateVolumeResponse{Volume: v.csiVolume()}, nil
	}
	d.nextID++
	v := &Volume{
		ID: fmt.Sprintf("%s-vol-%d", d.opts.Name, d.nextID), Name: req.GetName(), CapacityBytes: size,
		Parameters: req.GetParameters(), SourceVolumeID: srcVolume, SourceSnapshotID: srcSnapshot,
		Block: req.GetVolumeCapabilities()[0].GetBlock() != nil,
	}
	if d.opts.Topology {
		v.Topology = chooseTopology(req.GetAccessibilityRequirements())
	}
	d.volumes[v.Name] = v
	return &csi.CreateVolumeResponse{Volume: v.csiVolume()}, nil
}

// chooseTopology picks the first preferred segment, else the first requisite one.
func chooseTopology(r *csi.TopologyRequirement) *csi.Topology {
	if p := r.GetPreferred(); len(p) > 0 {
		return p[0]
	}
	if q := r.GetRequisite(); len(q) > 0 {
		return q[0]
	}
	return nil
}

func (d *Driver) byID(id string) *Volume {
	for _, v := range d.volumes {
		if v.ID == id {
			return v
		}
	}
	return nil
}

func (v *Volume) csiVolume() *csi.Volume {
	out := &csi.Volume{VolumeId: v.ID, CapacityBytes: v.CapacityBytes, VolumeContext: map[string]string{"volumeName": v.Name}}
	if v.Topology != nil {
		out.AccessibleTopology = []*csi.Topology{v.Topology}
	}
	switch {
	case v.SourceVolumeID != "":
		out.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: v.SourceVolumeID}}}
	case v.SourceSnapshotID != "":
		out.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: v.SourceSnapshotID}}}
	}
	return out
}

func (s *controller) GetCapacity(_ context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	d := s.d
	d.mu.Lock()
	d.capRequests = append(d.capRequests, proto.Clone(req).(*csi.GetCapacityRequest))
	if !slices.Contains(d.opts.ControllerCapabilities, csi.ControllerServiceCapability_RPC_GET_CAPACITY) {
		d.mu.Unlock()
		return nil, status.Error(codes.Unimplemented, "GetCapacity is not supported")
	}
	fault, faulted := nextFault(&d.capFaults)
	d.mu.Unlock()
	if faulted {
		if err := fault.apply(); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	pool, segment := req.GetParameters()[PoolParameter], segmentKey(req.GetAccessibleTopology().GetSegments())
	free := d.capacity[capacityKey{pool, segment}]
	for _, v := range d.volumes {
		if v.Parameters[PoolParameter] == pool && segmentKey(v.Topology.GetSegments()) == segment {
			free -= v.CapacityBytes
		}
	}
	rsp := &csi.GetCapacityResponse{AvailableCapacity: max(free, 0)}
	if d.maxVolume > 0 {
		rsp.MaximumVolumeSize = wrapperspb.Int64(d.maxVolume)
	}
	return rsp, nil
}

func (s *controller) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	d := s.d
	d.mu.Lock()
	d.deletes = append(d.deletes, proto.Clone(req).(*csi.DeleteVolumeRequest))
	if req.GetVolumeId() == "" {
		d.mu.Unlock()
		return nil, status.Error(codes.InvalidArgument, "volume id is required")
	}
	fault, faulted := nextFault(&d.deleteFaults)
	d.mu.Unlock()
	if faulted {
		if err := fault.apply(); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if v := d.byID(req.GetVolumeId()); v != nil {
		delete(d.volumes, v.Name)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

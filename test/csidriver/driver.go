// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package csidriver is a CSI controller plugin for tests that behaves like a
// real driver, csi-driver-host-path (the driver Kubernetes' own storage tests
// use) in particular: it keeps its volumes across calls and across restarts
// of its server, answers repeated CreateVolume calls for one name with the
// same volume, refuses a name reused with another size, parameters or
// content source (AlreadyExists) and a second call for a name still being
// created (Aborted), treats deleting a missing volume as success, honors
// topology requirements, clones volumes and restores snapshots. It checks
// requests as strictly as the CSI spec lets a driver (see validateCreate):
// what a provisioner must not send is refused, with the codes and, where
// csi-driver-host-path has one, the message that driver answers.
//
// With Options.StateDir it keeps its volumes on disk as csi-driver-host-path
// does, so that a driver process killed and started again still has them
// (see state.go). Faults (errors, delays, calls that block until released)
// are injected per call in this process, and every request is recorded, in
// memory and, with Options.RequestLog, in a file, so tests can assert on
// parameters and secrets.
//
// It is served on a unix socket by csi-test's driver.CSIDriver; the command
// test/cmd/csidriver serves it as a process of its own.
package csidriver

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/uuid"
	"github.com/kubernetes-csi/csi-test/v5/driver"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const (
	// DefaultCapacityBytes is the size of a volume whose request gives none.
	DefaultCapacityBytes = 1 << 30
	// DefaultMaxVolumeSize is the largest volume CreateVolume makes unless
	// Options.MaxVolumeSize says otherwise: csi-driver-host-path's default
	// for --max-volume-size (1 TiB, inclusive).
	DefaultMaxVolumeSize = 1 << 40
)

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
	// MaxVolumeSize is the largest volume CreateVolume makes (OutOfRange
	// above it), also reported by GetCapacity; 0 makes volumes up to
	// DefaultMaxVolumeSize and reports no maximum.
	MaxVolumeSize int64
	// StateDir, if set, keeps the volumes on disk: a state file, StateFile,
	// replaced atomically at every change, beside a directory per volume
	// named by its id. A driver started on the StateDir of one that was
	// killed has its volumes. Empty keeps them in memory.
	StateDir string
	// RequestLog, if set, is a file every CreateVolume, DeleteVolume and
	// GetCapacity request is appended to, secrets included (ReadRequestLog):
	// what tests read of a driver running in another process.
	RequestLog string
	// OperationDelay holds every CreateVolume between making the volume's
	// directory and recording the volume, and every DeleteVolume between
	// forgetting the volume and removing its directory, as a slow backend
	// would; a crash meanwhile leaves a directory that the driver removes
	// when it starts again.
	OperationDelay time.Duration
	// Logf, if set, logs every CreateVolume and DeleteVolume and its answer
	// (never the secrets).
	Logf func(format string, args ...any)
}

// Volume is a volume the driver holds.
type Volume struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	CapacityBytes int64  `json:"capacityBytes"`
	// Parameters and MutableParameters are those of the request that
	// created it.
	Parameters        map[string]string `json:"parameters,omitempty"`
	MutableParameters map[string]string `json:"mutableParameters,omitempty"`
	// SourceVolumeID and SourceSnapshotID say what the volume was filled from.
	SourceVolumeID   string `json:"sourceVolumeID,omitempty"`
	SourceSnapshotID string `json:"sourceSnapshotID,omitempty"`
	// Topology is the segment the volume is reachable from; nil when anywhere.
	Topology map[string]string `json:"topology,omitempty"`
	// Block is true when it was created for block access.
	Block bool `json:"block,omitempty"`
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
	notReady     bool
	createFaults []Fault
	deleteFaults []Fault
	capacity     map[capacityKey]int64 // total size of each pool in each segment
	capFaults    []Fault
	requests     Requests

	server *driver.CSIDriver
	// node is served beside identity and controller when set: a stub for
	// csi-sanity, which cleans up through the node service.
	node csi.NodeServer
}

// New returns a driver with the volumes of opts.StateDir, none without it;
// Start serves it.
func New(opts Options) (*Driver, error) {
	if opts.ControllerCapabilities == nil {
		opts.ControllerCapabilities = []csi.ControllerServiceCapability_RPC_Type{
			csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
			csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
			csi.ControllerServiceCapability_RPC_GET_CAPACITY,
		}
	}
	d := &Driver{opts: opts, volumes: map[string]*Volume{}, snapshots: map[string]int64{}, inProgress: map[string]bool{},
		capacity: map[capacityKey]int64{}}
	if opts.StateDir != "" {
		if err := d.restore(); err != nil {
			return nil, err
		}
	}
	return d, nil
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
	srv := driver.NewCSIDriver(&driver.CSIDriverServers{Identity: &identity{d: d}, Controller: &controller{d: d}, Node: d.node})
	if err := srv.Start(l); err != nil {
		_ = l.Close()
		return err
	}
	d.mu.Lock()
	d.server = srv
	d.mu.Unlock()
	// csi-test starts Serve in a goroutine and panics if Stop comes before
	// it: return only once the server answers, so that Stop is always safe.
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	return Probe(ctx, path, grpc.WaitForReady(true))
}

// startTimeout bounds the wait for a started server to answer.
const startTimeout = 30 * time.Second

// Probe calls GetPluginInfo on the driver at the unix socket path: nil once
// it answers.
func Probe(ctx context.Context, path string, opts ...grpc.CallOption) error {
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_, err = csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}, opts...)
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

// ClearCreateFaults drops the CreateVolume faults not used yet.
func (d *Driver) ClearCreateFaults() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.createFaults = nil
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
	parts := make([]string, 0, len(segments))
	for _, k := range slices.Sorted(maps.Keys(segments)) {
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

// SetMaximumVolumeSize sets Options.MaxVolumeSize.
func (d *Driver) SetMaximumVolumeSize(bytes int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.opts.MaxVolumeSize = bytes
}

// FailGetCapacity queues faults for the next GetCapacity calls, one per call.
func (d *Driver) FailGetCapacity(faults ...Fault) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.capFaults = append(d.capFaults, faults...)
}

// AddSnapshot makes a snapshot of the given size available for restores.
func (d *Driver) AddSnapshot(id string, sizeBytes int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.snapshots[id] = sizeBytes
	return d.save()
}

// Volumes returns copies of the volumes, sorted by name.
func (d *Driver) Volumes() []Volume {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.volumeList()
}

// volumeList is Volumes under the lock.
func (d *Driver) volumeList() []Volume {
	out := make([]Volume, 0, len(d.volumes))
	for _, v := range d.volumes {
		out = append(out, *v)
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
	return cloneAll(d.requests.Create)
}

// DeleteRequests returns copies of every DeleteVolume request received.
func (d *Driver) DeleteRequests() []*csi.DeleteVolumeRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return cloneAll(d.requests.Delete)
}

// CapacityRequests returns copies of every GetCapacity request received.
func (d *Driver) CapacityRequests() []*csi.GetCapacityRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return cloneAll(d.requests.Capacity)
}

// LastCreateRequest returns the last CreateVolume request for a name.
func (d *Driver) LastCreateRequest(name string) *csi.CreateVolumeRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.requests.LastCreate(name)
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

// logf logs through Options.Logf, if set.
func (d *Driver) logf(format string, args ...any) {
	if d.opts.Logf != nil {
		d.opts.Logf(format, args...)
	}
}

// pause holds a call for Options.OperationDelay with the lock released.
func (d *Driver) pause() {
	d.mu.Unlock()
	defer d.mu.Lock()
	time.Sleep(d.opts.OperationDelay)
}

// hasCapability reports whether the driver advertises a controller capability.
func (d *Driver) hasCapability(c csi.ControllerServiceCapability_RPC_Type) bool {
	return slices.Contains(d.opts.ControllerCapabilities, c)
}

// unsupported is csi-driver-host-path's answer to a call that needs a
// controller capability it does not advertise.
func unsupported(c csi.ControllerServiceCapability_RPC_Type) error {
	return status.Errorf(codes.InvalidArgument, "unsupported capability %s", c)
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
	rsp, err := d.createVolume(req)
	d.logf("CreateVolume %s: %s", req.GetName(), answer(rsp.GetVolume().GetVolumeId(), err))
	return rsp, err
}

func (d *Driver) createVolume(req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	d.mu.Lock()
	d.record(req)
	if err := d.validateCreate(req); err != nil {
		d.mu.Unlock()
		return nil, err
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
	return d.create(req)
}

// answer is an RPC's outcome for the log.
func answer(id string, err error) string {
	if err != nil {
		return status.Code(err).String() + ": " + status.Convert(err).Message()
	}
	return "OK " + id
}

// size is the capacity a valid request gets: what it requires, else the
// default within its limit.
func size(r *csi.CapacityRange) int64 {
	if r.GetRequiredBytes() > 0 {
		return r.GetRequiredBytes()
	}
	if limit := r.GetLimitBytes(); limit > 0 && limit < DefaultCapacityBytes {
		return limit
	}
	return DefaultCapacityBytes
}

// maxVolumeSize is the largest volume the driver makes.
func (d *Driver) maxVolumeSize() int64 {
	if d.opts.MaxVolumeSize > 0 {
		return d.opts.MaxVolumeSize
	}
	return DefaultMaxVolumeSize
}

// validateCreate checks a CreateVolume request before anything else, under
// the lock: what the CSI spec requires of every request, and what it
// forbids a CO to send this driver.
func (d *Driver) validateCreate(req *csi.CreateVolumeRequest) error {
	if !d.hasCapability(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME) {
		return unsupported(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME)
	}
	if req.GetName() == "" {
		return status.Error(codes.InvalidArgument, "Name missing in request")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return status.Error(codes.InvalidArgument, "Volume Capabilities missing in request")
	}
	if err := d.validateCapabilities(req.GetVolumeCapabilities()); err != nil {
		return err
	}
	required, limit := req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes()
	switch {
	case required < 0 || limit < 0:
		return status.Error(codes.InvalidArgument, "cannot have negative capacity")
	case limit > 0 && required > limit:
		return status.Error(codes.InvalidArgument, "capacity cannot exceed limit")
	case size(req.GetCapacityRange()) > d.maxVolumeSize():
		return status.Errorf(codes.OutOfRange, "Requested capacity %d exceeds maximum allowed %d", size(req.GetCapacityRange()), d.maxVolumeSize())
	}
	if len(req.GetMutableParameters()) > 0 && !d.hasCapability(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME) {
		// The spec: mutable_parameters "MUST NOT be specified unless the SP
		// has the MODIFY_VOLUME plugin capability".
		return unsupported(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME)
	}
	if req.GetAccessibilityRequirements() != nil && !d.opts.Topology {
		// The spec: "MUST NOT be specified unless the SP has the
		// VOLUME_ACCESSIBILITY_CONSTRAINTS plugin capability".
		return status.Error(codes.InvalidArgument, "accessibility_requirements given to a driver without the VOLUME_ACCESSIBILITY_CONSTRAINTS capability")
	}
	if src := req.GetVolumeContentSource(); src != nil {
		switch {
		case src.GetVolume() != nil:
			if !d.hasCapability(csi.ControllerServiceCapability_RPC_CLONE_VOLUME) {
				return unsupported(csi.ControllerServiceCapability_RPC_CLONE_VOLUME)
			}
			if src.GetVolume().GetVolumeId() == "" {
				return status.Error(codes.InvalidArgument, "the source volume has no id")
			}
		case src.GetSnapshot() != nil:
			if src.GetSnapshot().GetSnapshotId() == "" {
				return status.Error(codes.InvalidArgument, "the source snapshot has no id")
			}
		default:
			return status.Errorf(codes.InvalidArgument, "%v not a proper volume source", src)
		}
	}
	return nil
}

// validateCapabilities checks each volume capability: an access type and a
// known access mode, one the driver supports, and not block and mount
// together.
func (d *Driver) validateCapabilities(caps []*csi.VolumeCapability) error {
	var block, mount bool
	for i, c := range caps {
		switch {
		case c.GetBlock() != nil:
			block = true
		case c.GetMount() != nil:
			mount = true
		default:
			return status.Errorf(codes.InvalidArgument, "volume capability %d has no access type (block or mount)", i)
		}
		switch mode := c.GetAccessMode().GetMode(); mode {
		case csi.VolumeCapability_AccessMode_UNKNOWN:
			return status.Errorf(codes.InvalidArgument, "volume capability %d has no access mode", i)
		case csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:
			if !d.hasCapability(csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER) {
				return status.Errorf(codes.InvalidArgument, "access mode %s needs the SINGLE_NODE_MULTI_WRITER capability, which this driver does not have", mode)
			}
		}
	}
	if block && mount {
		return status.Error(codes.InvalidArgument, "cannot have both block and mount access type")
	}
	return nil
}

// create does the work of CreateVolume for a valid request whose name no
// other call is creating.
func (d *Driver) create(req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	size := size(req.GetCapacityRange())
	srcVolume := req.GetVolumeContentSource().GetVolume().GetVolumeId()
	srcSnapshot := req.GetVolumeContentSource().GetSnapshot().GetSnapshotId()
	if v, ok := d.volumes[req.GetName()]; ok {
		if err := v.compatible(req, srcVolume, srcSnapshot); err != nil {
			return nil, err
		}
		return &csi.CreateVolumeResponse{Volume: v.csiVolume()}, nil
	}
	var source *Volume
	switch {
	case srcVolume != "":
		if source = d.byID(srcVolume); source == nil {
			return nil, status.Error(codes.NotFound, "source volumeID does not exist, are source/destination in the same storage class?")
		}
		if source.CapacityBytes > size {
			return nil, status.Errorf(codes.OutOfRange, "source volume %s has %d bytes, more than the %d requested", srcVolume, source.CapacityBytes, size)
		}
	case srcSnapshot != "":
		snapSize, ok := d.snapshots[srcSnapshot]
		if !ok {
			return nil, status.Errorf(codes.NotFound, "cannot find snapshot %v", srcSnapshot)
		}
		if snapSize > size {
			return nil, status.Errorf(codes.OutOfRange, "snapshot %s has %d bytes, more than the %d requested", srcSnapshot, snapSize, size)
		}
	}
	v := &Volume{
		ID: uuid.NewString(), Name: req.GetName(), CapacityBytes: size,
		Parameters: req.GetParameters(), MutableParameters: req.GetMutableParameters(),
		SourceVolumeID: srcVolume, SourceSnapshotID: srcSnapshot,
		Block: req.GetVolumeCapabilities()[0].GetBlock() != nil,
	}
	if d.opts.Topology {
		v.Topology = chooseTopology(req.GetAccessibilityRequirements()).GetSegments()
	}
	if err := d.makeDirectory(v, source); err != nil {
		return nil, err
	}
	d.pause()
	d.volumes[v.Name] = v
	if err := d.save(); err != nil {
		delete(d.volumes, v.Name)
		_ = d.removeDirectory(v.ID)
		return nil, err
	}
	return &csi.CreateVolumeResponse{Volume: v.csiVolume()}, nil
}

// compatible answers AlreadyExists unless the volume is what req asks for:
// the spec's "compatible with the specified capacity_range,
// volume_capabilities, parameters and mutable_parameters" and "accessible
// from accessibility_requirements", from the same content source.
func (v *Volume) compatible(req *csi.CreateVolumeRequest, srcVolume, srcSnapshot string) error {
	required, limit := req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes()
	var problem string
	switch {
	case v.CapacityBytes < required || (limit > 0 && v.CapacityBytes > limit):
		// csi-driver-host-path's message.
		return status.Errorf(codes.AlreadyExists, "Volume with the same name: %s but with different size already exist", v.Name)
	case v.SourceVolumeID != srcVolume || v.SourceSnapshotID != srcSnapshot:
		problem = "another content source"
	case !maps.Equal(v.Parameters, req.GetParameters()):
		problem = "other parameters"
	case !maps.Equal(v.MutableParameters, req.GetMutableParameters()):
		problem = "other mutable parameters"
	case v.Block != (req.GetVolumeCapabilities()[0].GetBlock() != nil):
		problem = "another access type"
	case v.Topology != nil && !accessibleFrom(v.Topology, req.GetAccessibilityRequirements()):
		problem = "a topology the requirements exclude"
	default:
		return nil
	}
	return status.Errorf(codes.AlreadyExists, "volume %s exists with %s", v.Name, problem)
}

// accessibleFrom reports whether a volume in segment satisfies r: no
// requisite segments, or segment among them.
func accessibleFrom(segment map[string]string, r *csi.TopologyRequirement) bool {
	requisite := r.GetRequisite()
	return len(requisite) == 0 || slices.ContainsFunc(requisite, func(t *csi.Topology) bool { return maps.Equal(t.GetSegments(), segment) })
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
		out.AccessibleTopology = []*csi.Topology{{Segments: maps.Clone(v.Topology)}}
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
	d.record(req)
	if !d.hasCapability(csi.ControllerServiceCapability_RPC_GET_CAPACITY) {
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
		if v.Parameters[PoolParameter] == pool && segmentKey(v.Topology) == segment {
			free -= v.CapacityBytes
		}
	}
	rsp := &csi.GetCapacityResponse{AvailableCapacity: max(free, 0)}
	if d.opts.MaxVolumeSize > 0 {
		rsp.MaximumVolumeSize = wrapperspb.Int64(d.opts.MaxVolumeSize)
	}
	return rsp, nil
}

func (s *controller) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	d := s.d
	rsp, err := d.deleteVolume(req)
	d.logf("DeleteVolume %s: %s", req.GetVolumeId(), answer("", err))
	return rsp, err
}

func (d *Driver) deleteVolume(req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	d.mu.Lock()
	d.record(req)
	if req.GetVolumeId() == "" {
		d.mu.Unlock()
		return nil, status.Error(codes.InvalidArgument, "Volume ID missing in request")
	}
	if !d.hasCapability(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME) {
		d.mu.Unlock()
		return nil, unsupported(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME)
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
		if err := d.save(); err != nil {
			d.volumes[v.Name] = v
			return nil, err
		}
		d.pause()
	}
	// Success only once nothing of the volume is left: a directory left by
	// an earlier call cut short goes too.
	if err := d.removeDirectory(req.GetVolumeId()); err != nil {
		return nil, err
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (s *controller) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	d := s.d
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "Volume ID cannot be empty")
	case len(req.GetVolumeCapabilities()) == 0:
		return nil, status.Error(codes.InvalidArgument, "Volume Capabilities cannot be empty")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	v := d.byID(req.GetVolumeId())
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume id %s does not exist in the volumes list", req.GetVolumeId())
	}
	if err := d.validateCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	for _, c := range req.GetVolumeCapabilities() {
		if (c.GetBlock() != nil) != v.Block {
			return &csi.ValidateVolumeCapabilitiesResponse{Message: fmt.Sprintf("volume %s was not created for this access type", v.ID)}, nil
		}
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

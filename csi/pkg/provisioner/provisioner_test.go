// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/csi/pkg/connection"
	"github.com/kubeprov/external-storage/lib/controller"
)

const (
	testDriver   = "test.csi.example.com"
	testIdentity = "1700000000000-42-test.csi.example.com"
	// secretValue must never show up in errors or logs.
	secretValue = "s3cr3t-value-never-logged"
)

// fakeController answers CreateVolume and DeleteVolume and records the requests.
type fakeController struct {
	csi.ControllerClient // other methods are not called
	mu                   sync.Mutex
	creates              []*csi.CreateVolumeRequest
	deletes              []*csi.DeleteVolumeRequest
	createErr, deleteErr error
	volume               *csi.Volume
}

func (f *fakeController) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest, _ ...grpc.CallOption) (*csi.CreateVolumeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates = append(f.creates, req)
	if f.createErr != nil {
		return nil, f.createErr
	}
	v := f.volume
	if v == nil {
		v = &csi.Volume{VolumeId: "vol-" + req.Name, CapacityBytes: req.GetCapacityRange().GetRequiredBytes()}
	}
	return &csi.CreateVolumeResponse{Volume: v}, nil
}

func (f *fakeController) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest, _ ...grpc.CallOption) (*csi.DeleteVolumeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, req)
	return &csi.DeleteVolumeResponse{}, f.deleteErr
}

func newTestProvisioner(t *testing.T, cfg Config, objects ...runtime.Object) (*Provisioner, *fakeController) {
	t.Helper()
	fc := &fakeController{}
	if cfg.DriverName == "" {
		cfg.DriverName = testDriver
	}
	cfg.Identity = testIdentity
	cfg.Controller = fc
	client := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(client, 0)
	cfg.Client, cfg.Informers = client, factory
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	return p, fc
}

func secret(ns, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"password": []byte(secretValue)}}
}

func newClaim(mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "team-a", UID: "uid-1",
			Labels: map[string]string{"team": "a", "other": "x"}, Annotations: map[string]string{"cost-center": "42"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("fast"),
			VolumeMode:       ptr.To(corev1.PersistentVolumeFilesystem),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

func options(claim *corev1.PersistentVolumeClaim, params map[string]string, mutate ...func(*storagev1.StorageClass)) controller.ProvisionOptions {
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: testDriver, Parameters: params}
	for _, m := range mutate {
		m(class)
	}
	return controller.ProvisionOptions{StorageClass: class, PVName: "pvc-" + string(claim.UID), PVC: claim}
}

func mount(mode csi.VolumeCapability_AccessMode_Mode, fsType string, flags ...string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: flags}},
	}
}

func block(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
	}
}

// TestCreateRequest checks how a claim and its class become a CreateVolume request.
func TestCreateRequest(t *testing.T) {
	const (
		snw  = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
		snmw = csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
		snsw = csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		mnro = csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
		mnmw = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	)
	modes := func(m ...corev1.PersistentVolumeAccessMode) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) { c.Spec.AccessModes = m }
	}
	tests := []struct {
		name       string
		cfg        Config
		claim      *corev1.PersistentVolumeClaim
		params     map[string]string
		class      func(*storagev1.StorageClass)
		wantCaps   []*csi.VolumeCapability
		wantParams map[string]string
		wantRange  *csi.CapacityRange
		wantErr    string
	}{
		{
			name:      "defaults",
			claim:     newClaim(),
			wantCaps:  []*csi.VolumeCapability{mount(snw, "")},
			wantRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		},
		{
			name:     "every access mode without the single-node capability",
			claim:    newClaim(modes(corev1.ReadWriteOnce, corev1.ReadWriteOncePod, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOnce)),
			wantCaps: []*csi.VolumeCapability{mount(snw, ""), mount(snw, ""), mount(mnro, ""), mount(mnmw, "")},
		},
		{
			name:     "every access mode with the single-node capability",
			cfg:      Config{Capabilities: connection.Capabilities{SingleNodeMultiWriter: true}},
			claim:    newClaim(modes(corev1.ReadWriteOnce, corev1.ReadWriteOncePod, corev1.ReadOnlyMany, corev1.ReadWriteMany)),
			wantCaps: []*csi.VolumeCapability{mount(snmw, ""), mount(snsw, ""), mount(mnro, ""), mount(mnmw, "")},
		},
		{
			name:     "block ignores fsType and mount options",
			claim:    newClaim(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock) }),
			params:   map[string]string{ParamFSType: "xfs"},
			class:    func(c *storagev1.StorageClass) { c.MountOptions = []string{"noatime"} },
			cfg:      Config{DefaultFSType: "ext4"},
			wantCaps: []*csi.VolumeCapability{block(snw)},
		},
		{
			name:       "class fsType wins over the default, mount options passed",
			claim:      newClaim(),
			params:     map[string]string{ParamFSType: "xfs", "type": "fast"},
			class:      func(c *storagev1.StorageClass) { c.MountOptions = []string{"noatime", "discard"} },
			cfg:        Config{DefaultFSType: "ext4"},
			wantCaps:   []*csi.VolumeCapability{mount(snw, "xfs", "noatime", "discard")},
			wantParams: map[string]string{"type": "fast"},
		},
		{
			name:     "default fsType",
			claim:    newClaim(),
			cfg:      Config{DefaultFSType: "ext4"},
			wantCaps: []*csi.VolumeCapability{mount(snw, "ext4")},
		},
		{
			// As upstream: the deprecated key, in any case, is the fsType
			// and still reaches the driver (it has no reserved prefix).
			name:       "deprecated fsType key wins over the default",
			claim:      newClaim(),
			params:     map[string]string{"fsType": "xfs", "type": "fast"},
			cfg:        Config{DefaultFSType: "ext4"},
			wantCaps:   []*csi.VolumeCapability{mount(snw, "xfs")},
			wantParams: map[string]string{"fsType": "xfs", "type": "fast"},
		},
		{
			name:    "deprecated and current fsType keys together",
			claim:   newClaim(),
			params:  map[string]string{"fstype": "xfs", ParamFSType: "ext4"},
			wantErr: `parameters "` + ParamFSType + `" and "fstype" both set the fsType`,
		},
		{
			name:     "controller-modify secret keys are reserved",
			claim:    newClaim(),
			params:   map[string]string{modName: "mod", modNS: "ns", "type": "fast"},
			wantCaps: []*csi.VolumeCapability{mount(snw, "")}, wantParams: map[string]string{"type": "fast"},
		},
		{
			name: "limit",
			claim: newClaim(func(c *corev1.PersistentVolumeClaim) {
				c.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
			}),
			wantRange: &csi.CapacityRange{RequiredBytes: 1 << 30, LimitBytes: 2 << 30},
		},
		{
			name: "limit below the request",
			claim: newClaim(func(c *corev1.PersistentVolumeClaim) {
				c.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}
			}),
			wantErr: "the claim's storage limit 1Mi is less than its request 1Gi",
		},
		{
			// Quantity.Value wraps beyond int64: the driver would get 0, its default size.
			name: "request beyond int64",
			claim: newClaim(func(c *corev1.PersistentVolumeClaim) {
				c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1e30")}
			}),
			wantErr: "the claim's storage request: size 1e30 is too large",
		},
		{
			name:    "no access modes",
			claim:   newClaim(modes()),
			wantErr: "the claim has no access modes",
		},
		{
			name: "extra metadata and forwarded labels and annotations",
			cfg: Config{ExtraCreateMetadata: true, ForwardPVCLabels: []string{"team", "absent"},
				ForwardPVCAnnotations: []string{"cost-center"}},
			claim:  newClaim(),
			params: map[string]string{"type": "fast", provName: "s", provNS: "team-a"},
			wantParams: map[string]string{
				"type": "fast", ParamPVCName: "data", ParamPVCNamespace: "team-a", ParamPVName: "pvc-uid-1",
				ParamPVCLabelPrefix + "team": "a", ParamPVCAnnotationPrefix + "cost-center": "42",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newTestProvisioner(t, tc.cfg)
			var mutate []func(*storagev1.StorageClass)
			if tc.class != nil {
				mutate = append(mutate, tc.class)
			}
			var req *csi.CreateVolumeRequest
			params, err := parseParameters(tc.params)
			if err == nil {
				req, _, err = p.createRequest(options(tc.claim, tc.params, mutate...), params)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.Name != "pvc-uid-1" {
				t.Errorf("name %q", req.Name)
			}
			if tc.wantCaps != nil && !equalMessages(req.VolumeCapabilities, tc.wantCaps) {
				t.Errorf("capabilities %v, want %v", req.VolumeCapabilities, tc.wantCaps)
			}
			if tc.wantParams != nil && !maps.Equal(req.Parameters, tc.wantParams) {
				t.Errorf("parameters %v, want %v", req.Parameters, tc.wantParams)
			}
			if tc.wantRange != nil && !equalMessages([]*csi.CapacityRange{req.CapacityRange}, []*csi.CapacityRange{tc.wantRange}) {
				t.Errorf("capacity %v, want %v", req.CapacityRange, tc.wantRange)
			}
		})
	}
}

func equalMessages[T interface{ String() string }](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].String() != b[i].String() {
			return false
		}
	}
	return true
}

// TestProvisionVolume checks the PV built from a CreateVolume answer and the
// secrets the driver gets.
func TestProvisionVolume(t *testing.T) {
	params := map[string]string{
		ParamSecretName: "shared", ParamSecretNamespace: "${pvc.namespace}",
		provName: "prov-${pvc.name}", provNS: "kube-secrets", ParamFSType: "ext4",
	}
	tests := []struct {
		name         string
		volume       *csi.Volume
		wantCapacity string
		wantAffinity bool
	}{
		{name: "capacity from the driver", volume: &csi.Volume{VolumeId: "v1", CapacityBytes: 2 << 30, VolumeContext: map[string]string{"k": "v"}}, wantCapacity: "2Gi"},
		{name: "no capacity means the request", volume: &csi.Volume{VolumeId: "v1"}, wantCapacity: "1Gi"},
		{name: "topology", volume: &csi.Volume{VolumeId: "v1", AccessibleTopology: []*csi.Topology{
			{Segments: map[string]string{"zone": "a", "rack": "1"}}, {Segments: map[string]string{"zone": "b", "rack": "2"}},
		}}, wantCapacity: "1Gi", wantAffinity: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, fc := newTestProvisioner(t, Config{}, secret("kube-secrets", "prov-data"))
			fc.volume = tc.volume
			ctx := testContext(t)
			pv, _, err := p.Provision(ctx, options(newClaim(), params))
			if err != nil {
				t.Fatal(err)
			}
			if len(fc.creates) != 1 || fc.creates[0].Secrets["password"] != secretValue {
				t.Fatalf("CreateVolume did not get the provisioner secret")
			}
			src := pv.Spec.CSI
			if src == nil || src.Driver != testDriver || src.VolumeHandle != "v1" || src.FSType != "ext4" {
				t.Fatalf("CSI source %+v", src)
			}
			wantAttributes := maps.Clone(tc.volume.VolumeContext)
			if wantAttributes == nil {
				wantAttributes = map[string]string{}
			}
			wantAttributes[AttrProvisionerIdentity] = testIdentity
			if !maps.Equal(src.VolumeAttributes, wantAttributes) {
				t.Errorf("volume attributes %v, want %v", src.VolumeAttributes, wantAttributes)
			}
			shared := corev1.SecretReference{Name: "shared", Namespace: "team-a"}
			for name, r := range map[string]*corev1.SecretReference{
				"controllerPublish": src.ControllerPublishSecretRef, "nodeStage": src.NodeStageSecretRef, "nodePublish": src.NodePublishSecretRef,
				"controllerExpand": src.ControllerExpandSecretRef, "nodeExpand": src.NodeExpandSecretRef,
			} {
				if r == nil || *r != shared {
					t.Errorf("%s secret ref %v, want %v", name, r, shared)
				}
			}
			if pv.Annotations[AnnDeletionSecretName] != "prov-data" || pv.Annotations[AnnDeletionSecretNamespace] != "kube-secrets" {
				t.Errorf("deletion secret annotations %v", pv.Annotations)
			}
			if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.String() != tc.wantCapacity {
				t.Errorf("capacity %s, want %s", got.String(), tc.wantCapacity)
			}
			if tc.wantAffinity {
				terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
				if len(terms) != 2 || terms[0].MatchExpressions[0].Key != "rack" || terms[1].MatchExpressions[1].Values[0] != "b" {
					t.Errorf("node affinity %+v", terms)
				}
			} else if pv.Spec.NodeAffinity != nil {
				t.Errorf("unexpected node affinity %+v", pv.Spec.NodeAffinity)
			}
		})
	}
}

// TestControllerModifySecret: the class's controller-modify secret (else its
// default secret), reserved upstream for VolumeAttributesClass changes, is
// recorded on the PV where the external-resizer reads it, as upstream does;
// the driver never sees the keys.
func TestControllerModifySecret(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]string
		want   map[string]string // the annotations; nil: none
	}{
		{name: "own keys", params: map[string]string{modName: "mod-${pvc.name}", modNS: "${pvc.namespace}"},
			want: map[string]string{AnnModifySecretName: "mod-data", AnnModifySecretNamespace: "team-a"}},
		{name: "default secret", params: map[string]string{ParamSecretName: "shared", ParamSecretNamespace: "kube-secrets"},
			want: map[string]string{AnnModifySecretName: "shared", AnnModifySecretNamespace: "kube-secrets"}},
		{name: "none", params: map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, fc := newTestProvisioner(t, Config{}, secret("kube-secrets", "shared"))
			pv, _, err := p.Provision(testContext(t), options(newClaim(), tc.params))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{AnnModifySecretName, AnnModifySecretNamespace} {
				if got, ok := pv.Annotations[k]; ok != (tc.want != nil) || got != tc.want[k] {
					t.Errorf("annotation %s = %q (set %v), want %q", k, got, ok, tc.want[k])
				}
			}
			for k := range fc.creates[0].Parameters {
				if strings.HasPrefix(k, ReservedPrefix) {
					t.Errorf("CreateVolume got the reserved parameter %q", k)
				}
			}
		})
	}
}

// TestControllerPublishReadOnly: with --controller-publish-readonly, the PV
// of a claim that only reads is read-only, so the driver attaches it so.
func TestControllerPublishReadOnly(t *testing.T) {
	rox, rwo := corev1.ReadOnlyMany, corev1.ReadWriteOnce
	tests := []struct {
		name  string
		flag  bool
		modes []corev1.PersistentVolumeAccessMode
		want  bool
	}{
		{name: "ReadOnlyMany", flag: true, modes: []corev1.PersistentVolumeAccessMode{rox}, want: true},
		{name: "ReadOnlyMany and ReadWriteOnce", flag: true, modes: []corev1.PersistentVolumeAccessMode{rox, rwo}},
		{name: "ReadWriteOnce", flag: true, modes: []corev1.PersistentVolumeAccessMode{rwo}},
		{name: "ReadOnlyMany without the flag", modes: []corev1.PersistentVolumeAccessMode{rox}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newTestProvisioner(t, Config{ControllerPublishReadOnly: tc.flag})
			claim := newClaim(func(c *corev1.PersistentVolumeClaim) { c.Spec.AccessModes = tc.modes })
			pv, _, err := p.Provision(testContext(t), options(claim, nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := pv.Spec.CSI.ReadOnly; got != tc.want {
				t.Errorf("spec.csi.readOnly %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCreateVolumeErrors maps the driver's answers to provisioning states.
func TestCreateVolumeErrors(t *testing.T) {
	tests := []struct {
		err          error
		selectedNode string
		want         controller.ProvisioningState
	}{
		{status.Error(codes.DeadlineExceeded, "slow"), "", controller.ProvisioningInBackground},
		{status.Error(codes.Unavailable, "gone"), "", controller.ProvisioningInBackground},
		{status.Error(codes.Canceled, "canceled"), "", controller.ProvisioningInBackground},
		{status.Error(codes.Aborted, "busy"), "", controller.ProvisioningInBackground},
		{status.Error(codes.ResourceExhausted, "full"), "node-1", controller.ProvisioningReschedule},
		{status.Error(codes.ResourceExhausted, "full"), "", controller.ProvisioningFinished},
		{status.Error(codes.InvalidArgument, "bad parameter type"), "", controller.ProvisioningFinished},
		{status.Error(codes.AlreadyExists, "other size"), "", controller.ProvisioningFinished},
		{status.Error(codes.Internal, "oops"), "node-1", controller.ProvisioningFinished},
		{context.DeadlineExceeded, "", controller.ProvisioningInBackground},
	}
	for _, tc := range tests {
		t.Run(tc.err.Error()+"/"+tc.selectedNode, func(t *testing.T) {
			p, fc := newTestProvisioner(t, Config{})
			fc.createErr = tc.err
			o := options(newClaim(), nil)
			o.SelectedNodeName = tc.selectedNode
			_, state, err := p.Provision(testContext(t), o)
			if state != tc.want {
				t.Errorf("state %s, want %s", state, tc.want)
			}
			if err == nil || !strings.Contains(err.Error(), tc.err.Error()) || !strings.Contains(err.Error(), testDriver) {
				t.Errorf("error %v does not carry the driver's answer", err)
			}
		})
	}
}

// TestProvisionFailsBeforeCreateVolume: problems found before the driver is
// called leave the state unchanged and name what to fix.
func TestProvisionFailsBeforeCreateVolume(t *testing.T) {
	tests := []struct {
		name    string
		params  map[string]string
		wantErr string
	}{
		{name: "missing secret", params: map[string]string{provName: "absent", provNS: "ns"},
			wantErr: `secret ns/absent (from parameters "` + provName + `" and "` + provNS + `") does not exist: create it`},
		{name: "bad parameters", params: map[string]string{ReservedPrefix + "fs-type": "xfs"}, wantErr: "unknown key with the reserved prefix"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, fc := newTestProvisioner(t, Config{})
			_, state, err := p.Provision(testContext(t), options(newClaim(), tc.params))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if state != controller.ProvisioningNoChange {
				t.Errorf("state %s, want NoChange", state)
			}
			if len(fc.creates) != 0 {
				t.Errorf("CreateVolume was called")
			}
		})
	}
}

// TestTooSmallVolumeIsDeleted: a volume smaller than asked for is not used.
func TestTooSmallVolumeIsDeleted(t *testing.T) {
	p, fc := newTestProvisioner(t, Config{})
	fc.volume = &csi.Volume{VolumeId: "small", CapacityBytes: 1 << 20}
	_, state, err := p.Provision(testContext(t), options(newClaim(), nil))
	if err == nil || state != controller.ProvisioningFinished || len(fc.deletes) != 1 || fc.deletes[0].VolumeId != "small" {
		t.Fatalf("state %s, error %v, deletes %v", state, err, fc.deletes)
	}
	fc.deleteErr = status.Error(codes.Unavailable, "down")
	if _, state, _ := p.Provision(testContext(t), options(newClaim(), nil)); state != controller.ProvisioningInBackground {
		t.Errorf("state %s when the cleanup failed, want InBackground", state)
	}
}

// TestDelete checks DeleteVolume's secrets and answers.
func TestDelete(t *testing.T) {
	pv := func(driver string, annotations map[string]string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv-1", Annotations: annotations},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-1"},
			}},
		}
	}
	withSecret := map[string]string{AnnDeletionSecretName: "del", AnnDeletionSecretNamespace: "ns"}
	tests := []struct {
		name        string
		pv          *corev1.PersistentVolume
		driverErr   error
		wantSecrets bool
		wantIgnored bool
		wantErr     string
		wantCalls   int
		attached    bool
	}{
		{name: "no secret", pv: pv(testDriver, nil), wantCalls: 1},
		{name: "still attached", pv: pv(testDriver, nil), attached: true, wantErr: "PersistentVolume pv-1 is still attached to node node-1 (VolumeAttachment csi-123)"},
		{name: "secret from the annotations", pv: pv(testDriver, withSecret), wantSecrets: true, wantCalls: 1},
		{name: "already gone", pv: pv(testDriver, nil), driverErr: status.Error(codes.NotFound, "no such volume"), wantCalls: 1},
		{name: "driver fails", pv: pv(testDriver, nil), driverErr: status.Error(codes.Internal, "backend down"), wantErr: "backend down", wantCalls: 1},
		{name: "another driver's volume", pv: pv("other.example.com", nil), wantIgnored: true},
		{name: "half the annotations", pv: pv(testDriver, map[string]string{AnnDeletionSecretName: "del"}), wantErr: "has a value in only one of the annotations"},
		{name: "half the annotations, other empty", pv: pv(testDriver, map[string]string{AnnDeletionSecretName: "", AnnDeletionSecretNamespace: "ns"}),
			wantErr: "has a value in only one of the annotations"},
		// The CSI external-provisioner's PVs of classes without a secret.
		{name: "empty annotations", pv: pv(testDriver, map[string]string{AnnDeletionSecretName: "", AnnDeletionSecretNamespace: ""}), wantCalls: 1},
		{name: "secret gone", pv: pv(testDriver, map[string]string{AnnDeletionSecretName: "absent", AnnDeletionSecretNamespace: "ns"}),
			wantErr: "secret ns/absent (from annotations " + AnnDeletionSecretName},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objects := []runtime.Object{secret("ns", "del")}
			if tc.attached {
				objects = append(objects, &storagev1.VolumeAttachment{
					ObjectMeta: metav1.ObjectMeta{Name: "csi-123"},
					Spec: storagev1.VolumeAttachmentSpec{Attacher: testDriver, NodeName: "node-1",
						Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-1")}},
				})
			}
			p, fc := newTestProvisioner(t, Config{}, objects...)
			fc.deleteErr = tc.driverErr
			err := p.Delete(testContext(t), tc.pv)
			switch {
			case tc.wantIgnored:
				if !controller.IsIgnored(err) {
					t.Errorf("error %v, want an IgnoredError", err)
				}
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want one containing %q", err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("unexpected error %v", err)
			}
			if len(fc.deletes) != tc.wantCalls {
				t.Fatalf("%d DeleteVolume calls, want %d", len(fc.deletes), tc.wantCalls)
			}
			if tc.wantCalls > 0 {
				if got := fc.deletes[0].Secrets["password"] == secretValue; got != tc.wantSecrets {
					t.Errorf("secrets sent: %v, want %v", got, tc.wantSecrets)
				}
			}
		})
	}
}

// TestSecretsNeverLogged runs provisioning and deletion, failing and
// succeeding, at the highest verbosity and looks for the secret's value in
// every log line and error.
func TestSecretsNeverLogged(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(10), ktesting.BufferLogs(true)))
	ctx := klog.NewContext(context.Background(), logger)
	params := map[string]string{provName: "s", provNS: "ns", "csiNodeStageSecretName": "s", "csiNodeStageSecretNamespace": "ns"}
	p, fc := newTestProvisioner(t, Config{}, secret("ns", "s"))
	var errs []error
	pv, _, err := p.Provision(ctx, options(newClaim(), params))
	errs = append(errs, err)
	fc.createErr = status.Error(codes.InvalidArgument, "rejected")
	_, _, err = p.Provision(ctx, options(newClaim(), params))
	errs = append(errs, err)
	errs = append(errs, p.Delete(ctx, pv))
	fc.deleteErr = status.Error(codes.Internal, "failed")
	errs = append(errs, p.Delete(ctx, pv))
	for _, err := range errs {
		if err != nil && strings.Contains(err.Error(), secretValue) {
			t.Errorf("error shows the secret: %v", err)
		}
	}
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	if strings.Contains(logs, secretValue) {
		t.Errorf("logs show the secret:\n%s", logs)
	}
	if !strings.Contains(logs, "deprecated parameter") {
		t.Errorf("no deprecation notice in the logs:\n%s", logs)
	}
	if n := strings.Count(logs, "deprecated parameter"); n != 2 {
		t.Errorf("%d deprecation notices, want one per key (2), once", n)
	}
}

// testContext logs to the test's output.
func testContext(t *testing.T) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	return ctx
}

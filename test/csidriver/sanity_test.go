// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csidriver

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// TestSanity runs csi-sanity, the conformance suite real CSI drivers (csi-
// driver-host-path among them) pass in their CI, against the identity and
// controller services of a driver keeping its volumes on disk. The node
// service's tests are skipped: this driver has none (sanity only needs one
// to clean up, which nodeStub answers).
func TestSanity(t *testing.T) {
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	d, err := New(Options{Name: "sanity.test.kubeprov.io", StateDir: stateDir, ControllerCapabilities: []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	}})
	if err != nil {
		t.Fatal(err)
	}
	d.node = nodeStub{}
	socket := filepath.Join(dir, "csi.sock")
	if err := d.Start(socket); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Stop)

	cfg := sanity.NewTestConfig()
	cfg.Address = socket
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	sc := sanity.GinkgoTest(&cfg)
	gomega.RegisterFailHandler(ginkgo.Fail)
	suite, reporter := ginkgo.GinkgoConfiguration()
	suite.SkipStrings = []string{"Node Service"}
	ginkgo.RunSpecs(t, "csi-sanity", suite, reporter)
	sc.Finalize()

	// Every volume sanity made, it deleted: none left on disk.
	if n := len(d.Volumes()); n != 0 {
		t.Errorf("%d volumes left after csi-sanity", n)
	}
	if err := CheckStateDir(stateDir); err != nil {
		t.Error(err)
	}
}

// nodeStub is the node service csi-sanity's cleanup calls: no capability,
// nothing published.
type nodeStub struct{ csi.UnimplementedNodeServer }

func (nodeStub) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

func (nodeStub) NodeUnpublishVolume(context.Context, *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

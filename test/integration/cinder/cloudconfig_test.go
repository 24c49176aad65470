// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	cinderprov "github.com/kubeprov/external-storage/cinder/pkg/cinder"
	cinderbackend "github.com/kubeprov/external-storage/test/backend/cinder"
	"github.com/kubeprov/external-storage/test/framework"
)

// TestBinaryCloudNameAndCloudsYAML runs the binary on a cloud config laid
// out as cinder-csi-plugin's and the OpenStack cloud provider's users lay it
// out: a [Global "stack"] section selected with --cloud-name (the plain
// [Global] names a Cinder that does not answer), whose project comes from
// clouds.yaml (use-clouds, clouds-file, cloud). A claim on the real Cinder
// is Bound and its volume deleted with it.
func TestBinaryCloudNameAndCloudsYAML(t *testing.T) {
	const name = "kubeprov.io/cinder-cloud-name-it"
	ctx := framework.TestContext(t, 3*time.Minute)
	ns := cp.CreateTestNamespace(t, "cinder-cloud-name")
	dir := t.TempDir()
	clouds := filepath.Join(dir, "clouds.yaml")
	if err := os.WriteFile(clouds, []byte("clouds:\n  other:\n    auth: {project_name: nobody}\n  stack:\n    auth:\n      username: admin\n      project_id: "+cinderbackend.Project+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "cloud.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`[Global]
cinder-endpoint=http://127.0.0.1:1/v3
tenant-name=%s
[Global "stack"]
cinder-endpoint=%s
use-clouds=true
clouds-file=%s
cloud=stack
`, cinderbackend.Project, cinderAPI.Endpoint, clouds)), 0o600); err != nil {
		t.Fatal(err)
	}
	// startBinary returns once /readyz answers, which needs the Cinder of
	// [Global "stack"].
	p := startBinary(ctx, t, []string{"-kubeconfig", cp.KubeconfigPath, "-provisioner", name, "-cloud-config", conf, "-cloud-name", "stack",
		"-retry-interval-start", "200ms", "-retry-interval-max", "2s", "-v", "2"},
		[]string{"INITIATOR_NAME=" + initiatorName, "POD_NAMESPACE=" + ns})
	sc := createClass(t, ns, name, map[string]string{"type": "iscsi"})
	pvc := createPVC(ctx, t, ns, sc.Name)
	_, pv, err := framework.WaitForPVCBound(ctx, cp.Client, ns, pvc.Name)
	if err != nil {
		t.Fatal(err)
	}
	id := pv.Annotations[cinderprov.AnnVolumeID]
	deleteClaim(ctx, t, pvc, pv.Name)
	assertVolumeGone(ctx, t, id)
	if err := p.Stop(); err != nil {
		t.Errorf("stopping with SIGTERM: %v", err)
	}
}

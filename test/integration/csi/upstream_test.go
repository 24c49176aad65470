// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/csi/app"
	"github.com/kubeprov/external-storage/test/csidriver"
	"github.com/kubeprov/external-storage/test/framework"
)

// upstreamArgs are the csi-provisioner arguments of a driver's Deployment
// written for kubernetes-csi/external-provisioner v6.3, verbatim but for the
// addresses: the socket is this test's driver's, the Lease namespace the
// test's, and --http-endpoint=:8080 is overridden by the harness's own
// loopback port, appended after it.
func upstreamArgs(socket string) []string {
	return []string{
		"--csi-address=" + socket,
		"--v=5",
		"--feature-gates=Topology=true",
		"--leader-election",
		"--leader-election-namespace=" + journalNamespace,
		"--leader-election-labels=app.kubernetes.io/name:csi-provisioner,example.com/driver:test",
		"--timeout=60s",
		"--extra-create-metadata",
		"--http-endpoint=:8080",
		"--enable-capacity=false",
		"--capacity-ownerref-level=0",
		"--default-fstype=ext4",
		"--automaxprocs",
		"--logging-format=json",
	}
}

// upstreamMetrics are the metrics a CSI sidecar's dashboards read, with
// their label names, as kubernetes-csi documents them (csi-lib-utils for
// the CSI calls; sig-storage-lib-external-provisioner for the controller;
// client-go's workqueue metrics; the sidecar's metrics handler counting
// its own scrapes).
var upstreamMetrics = map[string][]string{
	"csi_sidecar_operations_seconds":                              {"driver_name", "grpc_status_code", "method_name"},
	"controller_persistentvolumeclaim_provision_total":            {"class", "source"},
	"controller_persistentvolumeclaim_provision_duration_seconds": {"class", "source"},
	"controller_persistentvolume_delete_total":                    {"class"},
	"controller_persistentvolume_delete_duration_seconds":         {"class"},
	"workqueue_adds_total":                                        {"name"},
	"workqueue_depth":                                             {"name"},
	"promhttp_metric_handler_requests_total":                      {"code"},
}

// TestUpstreamDeploymentArguments: csi-provisioner started with an upstream
// Deployment's arguments becomes ready, leads with the labels asked for,
// provisions and deletes a volume as those arguments say, logs JSON with one
// line per argument it ignores, and serves the upstream metrics.
func TestUpstreamDeploymentArguments(t *testing.T) {
	e := newEnv(t, anyDriver, csidriver.Options{})
	e.prov = e.startProvisioner(upstreamArgs(e.socket)...)
	if err := e.prov.WaitReady(e.ctx, time.Minute); err != nil {
		t.Fatal(err)
	}

	// --leader-election-labels: the leader writes them on its Lease.
	wantLabels := map[string]string{"app.kubernetes.io/name": "csi-provisioner", "example.com/driver": "test"}
	e.eventually("the Lease labeled by --leader-election-labels", func() bool {
		lease, err := cp.Client.CoordinationV1().Leases(journalNamespace).Get(e.ctx, app.UpstreamLeaseName(e.name), metav1.GetOptions{})
		return err == nil && lease.Spec.HolderIdentity != nil && maps.Equal(lease.Labels, wantLabels)
	})

	class := e.createClass(nil)
	claim, pv := e.bound(e.createClaim(class.Name, "1Gi"))
	if pv.Spec.CSI == nil || pv.Spec.CSI.FSType != "ext4" {
		t.Errorf("PV %s: CSI source %+v, want fsType ext4 from --default-fstype", pv.Name, pv.Spec.CSI)
	}
	req := e.driver.LastCreateRequest(pv.Name)
	if req == nil || req.Parameters["csi.storage.k8s.io/pvc/name"] != claim.Name || req.Parameters["csi.storage.k8s.io/pv/name"] != pv.Name {
		t.Errorf("CreateVolume parameters %v, want the claim's and PV's names from --extra-create-metadata", req.GetParameters())
	}
	e.deleteClaim(claim)
	e.pvGone(pv.Name)
	e.noVolumeLeft()

	// Upstream's Deployment probes liveness here (failureThreshold 1): a 404
	// restarts the pod forever.
	t.Run("liveness probe path", func(t *testing.T) {
		resp, err := http.Get("http://" + e.prov.Endpoint + "/healthz/leader-election")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/healthz/leader-election of the leader answered %s, want 200", resp.Status)
		}
	})
	t.Run("JSON log with the ignored arguments", func(t *testing.T) {
		checkJSONLog(t, e.prov.Log())
	})
	t.Run("upstream metrics", func(t *testing.T) {
		families := scrape(t, "http://"+e.prov.Endpoint+"/metrics")
		for name, labels := range upstreamMetrics {
			f := families[name]
			if f == nil || len(f.Metric) == 0 {
				t.Errorf("no metric %s", name)
				continue
			}
			for _, m := range f.Metric {
				var got []string
				for _, l := range m.Label {
					got = append(got, l.GetName())
				}
				slices.Sort(got)
				if !slices.Equal(got, labels) {
					t.Errorf("%s has labels %v, want %v", name, got, labels)
				}
			}
		}
		if f := families["csi_sidecar_operations_seconds"]; f != nil && !hasSeries(f, map[string]string{
			"driver_name": e.name, "method_name": "/csi.v1.Controller/CreateVolume", "grpc_status_code": "OK",
		}) {
			t.Errorf("csi_sidecar_operations_seconds has no series of the successful CreateVolume of driver %s", e.name)
		}
		if f := families["controller_persistentvolumeclaim_provision_total"]; f != nil && !hasSeries(f, map[string]string{"class": class.Name}) {
			t.Errorf("controller_persistentvolumeclaim_provision_total has no series of class %s", class.Name)
		}
		// client-go's leader election gauge, which the sidecars serve: 1
		// on the leader, labeled with the Lease's name.
		if f := families["leader_election_master_status"]; f == nil || len(f.Metric) != 1 ||
			!hasSeries(f, map[string]string{"name": app.UpstreamLeaseName(e.name)}) || f.Metric[0].GetGauge().GetValue() != 1 {
			t.Errorf("leader_election_master_status %v, want one series {name=%q} of value 1", f.GetMetric(), app.UpstreamLeaseName(e.name))
		}
	})
}

// TestUpstreamClassKeys: a class written for upstream provisions here:
// the deprecated fstype key is the fsType, and the controller-modify secret
// keys are reserved, recorded on the PV where the external-resizer reads them.
func TestUpstreamClassKeys(t *testing.T) {
	e := setup(t, anyDriver, csidriver.Options{})
	class := e.createClass(map[string]string{
		"fsType": "xfs", "type": "fast",
		"csi.storage.k8s.io/controller-modify-secret-name":      "modify-${pvc.name}",
		"csi.storage.k8s.io/controller-modify-secret-namespace": "${pvc.namespace}",
	})
	claim, pv := e.bound(e.createClaim(class.Name, "1Gi"))
	if pv.Spec.CSI == nil || pv.Spec.CSI.FSType != "xfs" {
		t.Errorf("PV %s: CSI source %+v, want fsType xfs from the class's fsType key", pv.Name, pv.Spec.CSI)
	}
	if got, want := pv.Annotations["volume.kubernetes.io/controller-modify-secret-name"], "modify-"+claim.Name; got != want {
		t.Errorf("controller-modify secret name annotation %q, want %q", got, want)
	}
	if got := pv.Annotations["volume.kubernetes.io/controller-modify-secret-namespace"]; got != claim.Namespace {
		t.Errorf("controller-modify secret namespace annotation %q, want %q", got, claim.Namespace)
	}
	req := e.driver.LastCreateRequest(pv.Name)
	if want := map[string]string{"fsType": "xfs", "type": "fast"}; !maps.Equal(req.GetParameters(), want) {
		t.Errorf("CreateVolume parameters %v, want %v (upstream passes the unprefixed fsType on)", req.GetParameters(), want)
	}
	if got := req.GetVolumeCapabilities()[0].GetMount().GetFsType(); got != "xfs" {
		t.Errorf("CreateVolume fsType %q, want xfs", got)
	}
	e.deleteClaim(claim)
	e.pvGone(pv.Name)
	e.noVolumeLeft()
}

// checkJSONLog: from its first JSON line on, the log is JSON lines (the
// feature gate parser may warn in text before the logging flags apply, as
// upstream), and the arguments without effect here are each named once,
// with the reason.
func checkJSONLog(t *testing.T, log string) {
	t.Helper()
	ignored := map[string]int{}
	jsonLines := 0
	for i, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			if jsonLines > 0 {
				t.Errorf("line %d is not JSON: %q", i+1, line)
			}
			continue
		}
		jsonLines++
		if entry["msg"] == "Ignoring flag" {
			flag, _ := entry["flag"].(string)
			if reason, _ := entry["reason"].(string); reason == "" {
				t.Errorf("line %d ignores %s without a reason: %q", i+1, flag, line)
			}
			ignored[flag]++
		}
	}
	if jsonLines == 0 {
		t.Fatalf("no JSON line in the log:\n%s", log)
	}
	if want := map[string]int{"--automaxprocs": 1}; !maps.Equal(ignored, want) {
		t.Errorf("flags logged as ignored %v, want %v", ignored, want)
	}
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	families, err := framework.ScrapeMetrics(url)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

func hasSeries(f *dto.MetricFamily, match map[string]string) bool {
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range match {
			ok = ok && labels[k] == v
		}
		if ok {
			return true
		}
	}
	return false
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package charts

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubeprov/external-storage/hostpath/pkg/hostpath"
	"github.com/kubeprov/external-storage/test/framework"
	"github.com/kubeprov/external-storage/test/framework/helm"
	"github.com/kubeprov/external-storage/test/framework/manifests"
)

// upstreamChart is a chart users arrive from, the chart of ours that takes
// its values, and what each of its keys must mean in what ours renders.
type upstreamChart struct {
	name   string // the upstream chart; testdata/<name>.yaml holds its values
	chart  string // ours, under charts/
	checks []upstreamCheck
}

// upstreamCheck is what one upstream key means in the rendered objects.
// with, when set, is merged over the values file first (for keys that
// replace others, or are better seen alone); a nil value removes a key.
type upstreamCheck struct {
	key   string
	with  map[string]any
	check func(t *testing.T, objs []*unstructured.Unstructured)
}

// TestUpstreamValues renders each upstream chart's values file, written
// with that chart's key names and setting every key it documents, with the
// chart of ours that replaces it, creates what it renders on the real API
// server (dry run, strict field validation), and checks, key by key, that
// the objects carry the value's meaning there: the StorageClass's fields
// and parameters, the workload's fields and arguments, the PDB, the
// Service. Every key of the file has a check, and every check's key is in
// the file or set by the check.
func TestUpstreamValues(t *testing.T) {
	client, err := manifests.NewClient(cp)
	if err != nil {
		t.Fatal(err)
	}
	for _, up := range upstreamCharts {
		t.Run(up.name, func(t *testing.T) {
			values := readValues(t, up.name)
			covered := func(key string) bool {
				return slices.ContainsFunc(up.checks, func(c upstreamCheck) bool { return key == c.key || strings.HasPrefix(key, c.key+".") })
			}
			for _, key := range leafKeys(values, "") {
				if !covered(key) {
					t.Errorf("testdata/%s.yaml sets %s, which no check covers", up.name, key)
				}
			}
			ch := loadChart(t, up.chart)
			objs := mustRender(t, ch, "r", testNamespace, values)
			dryRunCreate(t, client, objs)
			for _, c := range up.checks {
				t.Run(c.key, func(t *testing.T) {
					if c.with == nil {
						if _, set := lookup(values, c.key); !set {
							t.Fatalf("testdata/%s.yaml does not set %s", up.name, c.key)
						}
						c.check(t, objs)
						return
					}
					c.check(t, mustRender(t, ch, "r", testNamespace, chartutil.CoalesceTables(copyValues(t, c.with), copyValues(t, values))))
				})
			}
		})
	}
}

// TestUpstreamValuesRefused: an upstream key ours has no meaning for fails
// helm install with an error that names it and what to use instead.
func TestUpstreamValuesRefused(t *testing.T) {
	nfsSubdir := map[string]any{"nfs": map[string]any{"server": "10.0.0.5"}}
	for _, tc := range []struct {
		name, chart string
		values      map[string]any
		wantErr     []string
	}{
		{"nfs-subdir-external-provisioner/podSecurityPolicy.enabled", "nfs-subdir", with(nfsSubdir, map[string]any{"podSecurityPolicy": map[string]any{"enabled": true}}), []string{"podSecurityPolicy.enabled", "pod-security.kubernetes.io/enforce=baseline instead"}},
		{"local-path-provisioner/provisioningRetryCount", "hostpath", map[string]any{"provisioningRetryCount": 15}, []string{"provisioningRetryCount", "--retry-interval-max"}},
		{"local-path-provisioner/deletionRetryCount", "hostpath", map[string]any{"deletionRetryCount": 15}, []string{"deletionRetryCount", "--retry-interval-max"}},
		{"local-path-provisioner/storageClass.userPattern", "hostpath", map[string]any{"storageClass": map[string]any{"userPattern": "{{ .PVC.Annotations.uid }}"}}, []string{"userPattern", "fsGroup"}},
		{"local-path-provisioner/storageClass.groupPattern", "hostpath", map[string]any{"storageClass": map[string]any{"groupPattern": "1000"}}, []string{"groupPattern", "fsGroup"}},
		{"local-path-provisioner/storageClass.permPattern", "hostpath", map[string]any{"storageClass": map[string]any{"permPattern": "{{ .PVC.Annotations.mode }}"}}, []string{"permPattern", "octal", "--dir-mode"}},
		{"local-path-provisioner/storageClass.pathPattern", "hostpath", map[string]any{"storageClass": map[string]any{"pathPattern": `{{ index .PVC.Labels "app" }}`}}, []string{"pathPattern", "${.PVC.labels.<key>}"}},
		{"local-path-provisioner/helperImage.repository", "hostpath", map[string]any{"mode": "helper-pods", "helperImage": map[string]any{"repository": "docker.io/library/busybox"}}, []string{"helperImage.repository", "the provisioner's image"}},
		{"local-path-provisioner/helperImage.repository/node-local", "hostpath", map[string]any{"helperImage": map[string]any{"repository": "example/hostpath"}}, []string{"helperImage.repository", "mode: helper-pods"}},
		{"local-path-provisioner/configmap.helperPod.tolerations", "hostpath", map[string]any{"mode": "helper-pods", "configmap": map[string]any{"helperPod": map[string]any{"tolerations": []any{map[string]any{"operator": "Exists"}}}}}, []string{"configmap.helperPod.tolerations", "name the taint's key"}},
		{"local-path-provisioner/configmap.setup/node-local", "hostpath", map[string]any{"configmap": map[string]any{"setup": "#!/bin/sh\nmkdir -m 0777 -p \"$VOL_DIR\"", "teardown": "#!/bin/sh\nrm -rf \"$VOL_DIR\""}, "helperImage": map[string]any{"repository": "busybox"}}, []string{"configmap.setup and configmap.teardown run in helper pods", "mode: helper-pods"}},
		{"local-path-provisioner/configmap.teardown/missing", "hostpath", map[string]any{"mode": "helper-pods", "configmap": map[string]any{"setup": "#!/bin/sh\nmkdir -m 0777 -p \"$VOL_DIR\""}, "helperImage": map[string]any{"repository": "busybox"}}, []string{"configmap.teardown is empty", "give both"}},
		{"local-path-provisioner/configmap.setup/helperImage", "hostpath", map[string]any{"mode": "helper-pods", "configmap": map[string]any{"setup": "#!/bin/sh\nmkdir -m 0777 -p \"$VOL_DIR\"", "teardown": "#!/bin/sh\nrm -rf \"$VOL_DIR\""}}, []string{"helperImage.repository is empty", "/bin/sh"}},
		{"local-path-provisioner/configmap.helperPod", "hostpath", map[string]any{"mode": "helper-pods", "configmap": map[string]any{"helperPod": map[string]any{"name": "helper-pod", "priorityClassName": "system-node-critical"}}}, []string{"configmap.helperPod.name", "helperPod.yaml, which the setup and teardown scripts run in", "set configmap.setup and configmap.teardown"}},
		{"local-path-provisioner/helperPod.resources", "hostpath", map[string]any{"mode": "helper-pods", "helperPod": map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "64Mi"}}}}, []string{"helperPod.resources", "set configmap.setup and configmap.teardown"}},
		{"local-path-provisioner/sharedFileSystemPath", "hostpath", map[string]any{"sharedFileSystemPath": "/mnt/shared"}, []string{"sharedFileSystemPath", "mode: single-node"}},
		{"nfs-server-provisioner/replicaCount", "nfs", map[string]any{"replicaCount": 2}, []string{"replicaCount", "install another release"}},
		{"nfs-server-provisioner/rbac.serviceAccountName", "nfs", map[string]any{"rbac": map[string]any{"serviceAccountName": "mine"}}, []string{"rbac.serviceAccountName", "serviceAccount.name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := helm.Template(loadChart(t, tc.chart), "r", testNamespace, tc.values)
			if err == nil {
				t.Fatalf("values %v rendered; want an error naming %q", tc.values, tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestUnknownValuesFail: every chart has a values schema, so a misspelled or
// unknown key, at the top or nested, fails helm install naming it instead
// of being dropped.
func TestUnknownValuesFail(t *testing.T) {
	for _, p := range charts() {
		t.Run(p.chart, func(t *testing.T) {
			ch := loadChart(t, p.chart)
			if ch.Schema == nil {
				t.Fatalf("charts/%s has no values.schema.json", p.chart)
			}
			for key, values := range map[string]map[string]any{
				"storageClas":               {"storageClas": map[string]any{"create": true}},
				"storageClass.reclaimPlicy": {"storageClass": map[string]any{"reclaimPlicy": "Retain"}},
				"image.tga":                 {"image": map[string]any{"tga": "v1"}},
			} {
				_, err := helm.Template(ch, "r", testNamespace, with(p.values, values))
				last := key[strings.LastIndex(key, ".")+1:]
				if err == nil || !strings.Contains(err.Error(), last) {
					t.Errorf("%s: error %v, want one naming %s", key, err, last)
				}
			}
			if _, err := helm.Template(ch, "r", testNamespace, with(p.values, map[string]any{"storageClass": map[string]any{"reclaimPolicy": "Recycle"}})); err == nil || !strings.Contains(err.Error(), "reclaimPolicy") {
				t.Errorf("storageClass.reclaimPolicy Recycle: error %v, want one naming reclaimPolicy", err)
			}
		})
	}
}

// TestHelperPodsNamespace: charts/hostpath in helper-pods mode with
// configmap.helperPod.namespaceOverride grants the pod permissions in that
// namespace only, and names the helper image (read from the provisioner's
// own pod otherwise, which is not there).
func TestHelperPodsNamespace(t *testing.T) {
	ch := loadChart(t, "hostpath")
	objs := mustRender(t, ch, "r", testNamespace, map[string]any{"mode": "helper-pods", "configmap": map[string]any{"helperPod": map[string]any{"namespaceOverride": "helpers"}}})
	perms := permissions(t, objs, testNamespace, "r-hostpath-provisioner")
	createPods := grant{verb: "create", group: "", resource: "pods", name: "*"}
	if !slices.Contains(perms["helpers"], createPods) || slices.Contains(perms[testNamespace], createPods) {
		t.Errorf("pods granted %v, want in helpers only", perms)
	}
	if nodes := (grant{verb: "get", group: "", resource: "nodes", name: "*"}); !slices.Contains(perms[clusterScope], nodes) || slices.Contains(perms[clusterScope], grant{verb: "list", group: "", resource: "nodes", name: "*"}) {
		t.Errorf("cluster-wide %v: want get on nodes, no list", perms[clusterScope])
	}
	_, c := pod(t, objs)
	for _, want := range []string{"--helper-pods", "--helper-namespace=helpers", "--helper-image=ghcr.io/kubeprov/hostpath-provisioner:" + ch.Metadata.AppVersion, "--leader-election"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %v lack %s", c.Args, want)
		}
	}
}

// upstreamCharts are the charts users arrive from, and the meaning of
// each key their values.yaml documents.
var upstreamCharts = []upstreamChart{
	{name: "nfs-subdir-external-provisioner", chart: "nfs-subdir", checks: append(sharedUpstreamChecks("storageClass.parameters", "extraArgs"), []upstreamCheck{
		{key: "strategyType", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got, _, _ := unstructured.NestedString(onlyWorkload(t, objs).Object, "spec", "strategy", "type"); got != "RollingUpdate" {
				t.Errorf("strategy %q, want RollingUpdate", got)
			}
		}},
		{key: "nfs.server", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if env := envOf(t, objs); env["NFS_SERVER"] != "10.0.0.5" || env["NFS_PATH"] != "/exports/k8s" {
				t.Errorf("env %v", env)
			}
		}},
		{key: "nfs.path", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if pv := exportPV(t, objs); pv.Spec.NFS.Path != "/exports/k8s" || pv.Spec.NFS.Server != "10.0.0.5" {
				t.Errorf("export PV %+v", pv.Spec.NFS)
			}
		}},
		{key: "nfs.mountOptions", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			want := []string{"nfsvers=4.1", "hard"}
			pv := exportPV(t, objs)
			spec, _ := pod(t, objs)
			if !slices.Equal(pv.Spec.MountOptions, want) || spec.Volumes[0].PersistentVolumeClaim == nil || spec.Volumes[0].PersistentVolumeClaim.ClaimName != "pvc-r-nfs-subdir-provisioner" {
				t.Errorf("the provisioner's mount: PV mount options %v, pod volume %+v; want %v through claim pvc-r-nfs-subdir-provisioner", pv.Spec.MountOptions, spec.Volumes[0], want)
			}
			if got := storageClass(t, objs).MountOptions; !slices.Equal(got, want) {
				t.Errorf("class mountOptions %v, want %v", got, want)
			}
		}},
		{key: "nfs.volumeName", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			spec, c := pod(t, objs)
			if spec.Volumes[0].Name != "nfs-root" || c.VolumeMounts[0].Name != "nfs-root" {
				t.Errorf("volume %s, mount %s; want nfs-root", spec.Volumes[0].Name, c.VolumeMounts[0].Name)
			}
		}},
		{key: "nfs.reclaimPolicy", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if pv := exportPV(t, objs); pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
				t.Errorf("export PV reclaim policy %s, want Delete", pv.Spec.PersistentVolumeReclaimPolicy)
			}
		}},
		{key: "storageClass.provisionerName", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if sc, env := storageClass(t, objs), envOf(t, objs); sc.Provisioner != "example.com/nfs" || env["PROVISIONER_NAME"] != "example.com/nfs" {
				t.Errorf("class provisioner %s, PROVISIONER_NAME %s; want example.com/nfs", sc.Provisioner, env["PROVISIONER_NAME"])
			}
		}},
		{key: "storageClass.onDelete", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			// It wins over archiveOnDelete, as there.
			if got := storageClass(t, objs).Parameters["onDelete"]; got != "retain" {
				t.Errorf("onDelete %q, want retain", got)
			}
		}},
		{key: "storageClass.archiveOnDelete", with: map[string]any{"storageClass": map[string]any{"onDelete": nil}}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got := storageClass(t, objs).Parameters["onDelete"]; got != "delete" {
				t.Errorf("archiveOnDelete false: onDelete %q, want delete", got)
			}
		}},
		{key: "storageClass.pathPattern", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got := storageClass(t, objs).Parameters["pathPattern"]; got != "${.PVC.namespace}/${.PVC.annotations.nfs.io/storage-path}" {
				t.Errorf("pathPattern %q", got)
			}
		}},
		{key: "storageClass.accessModes", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if pv := exportPV(t, objs); !slices.Equal(pv.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}) {
				t.Errorf("export PV access modes %v, want ReadWriteMany", pv.Spec.AccessModes)
			}
		}},
		{key: "leaderElection.enabled", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if _, c := pod(t, objs); slices.Contains(c.Args, "--leader-election") {
				t.Errorf("args %v: leader election on", c.Args)
			}
		}},
		{key: "podSecurityPolicy.enabled", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if len(ofKind(objs, "PodSecurityPolicy")) != 0 {
				t.Error("a PodSecurityPolicy rendered")
			}
		}},
		{key: "labels", check: checkExtraLabels},
		{key: "podDisruptionBudget", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			checkPDB(t, objs, map[string]string{"maxUnavailable": "1"})
		}},
		{key: "replicaCount", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got := field(onlyWorkload(t, objs), "spec", "replicas"); got != "2" {
				t.Errorf("replicas %s, want 2", got)
			}
		}},
		{key: "serviceAccount", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			checkServiceAccount(t, objs, "nfs-client-provisioner", "example.com/role")
		}},
		{key: "rbac.create", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if len(permissions(t, objs, testNamespace, "nfs-client-provisioner")) == 0 {
				t.Error("no RBAC for the ServiceAccount")
			}
		}},
	}...)},

	{name: "local-path-provisioner", chart: "hostpath", checks: append(sharedUpstreamChecks("storageClass.parameters", "storageClass.allowVolumeExpansion"), []upstreamCheck{
		{key: "mode", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if w := onlyWorkload(t, objs); w.GetKind() != "Deployment" || !slices.Contains(containerOf(t, objs).Args, "--helper-pods") {
				t.Errorf("%s with args %v, want a Deployment with --helper-pods", w.GetKind(), containerOf(t, objs).Args)
			}
		}},
		{key: "replicaCount", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got := field(onlyWorkload(t, objs), "spec", "replicas"); got != "2" || !slices.Contains(containerOf(t, objs).Args, "--leader-election") {
				t.Errorf("replicas %s (want 2), args %v (want --leader-election)", got, containerOf(t, objs).Args)
			}
		}},
		{key: "commonLabels", check: checkExtraLabels},
		{key: "namespaceOverride", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, o := range objs {
				if o.GetNamespace() != "" && o.GetNamespace() != "local-path-storage" && o.GetNamespace() != "local-path-helpers" {
					t.Errorf("%s %s in namespace %s, want local-path-storage", o.GetKind(), o.GetName(), o.GetNamespace())
				}
			}
			if onlyWorkload(t, objs).GetNamespace() != "local-path-storage" {
				t.Error("the Deployment is not in local-path-storage")
			}
		}},
		{key: "helperImage", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if args := containerOf(t, objs).Args; !slices.Contains(args, "--helper-image=mirror.example.com/example/hostpath-helper:v9.9.8") {
				t.Errorf("args %v lack --helper-image=mirror.example.com/example/hostpath-helper:v9.9.8", args)
			}
		}},
		{key: "privateRegistry", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if img := containerOf(t, objs).Image; img != "mirror.example.com/example/hostpath-provisioner:v9.9.9" {
				t.Errorf("image %s, want mirror.example.com/example/hostpath-provisioner:v9.9.9", img)
			}
		}},
		{key: "defaultSettings.registrySecret", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			secrets := ofKind(objs, "Secret")
			if len(secrets) != 1 || secrets[0].GetName() != "registry-login" || secrets[0].Object["type"] != string(corev1.SecretTypeDockerConfigJson) {
				t.Fatalf("Secrets %v, want registry-login of type dockerconfigjson", secrets)
			}
			encoded, _, _ := unstructured.NestedString(secrets[0].Object, "data", ".dockerconfigjson")
			raw, err := base64.StdEncoding.DecodeString(encoded)
			if err != nil {
				t.Fatal(err)
			}
			var cfg struct {
				Auths map[string]struct{ Auth string } `json:"auths"`
			}
			if err := json.Unmarshal(raw, &cfg); err != nil {
				t.Fatal(err)
			}
			want := base64.StdEncoding.EncodeToString([]byte("robot:not-a-real-password"))
			if cfg.Auths["mirror.example.com"].Auth != want {
				t.Errorf("the Secret does not log in to mirror.example.com as robot")
			}
			if spec, _ := pod(t, objs); !slices.Contains(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: "registry-login"}) {
				t.Errorf("imagePullSecrets %v lack registry-login", spec.ImagePullSecrets)
			}
		}},
		{key: "nameOverride", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got := onlyWorkload(t, objs).GetLabels()["app.kubernetes.io/name"]; got != "lp" {
				t.Errorf("app.kubernetes.io/name %q, want lp", got)
			}
		}},
		{key: "fullnameOverride", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got := onlyWorkload(t, objs).GetName(); got != "local-path" {
				t.Errorf("Deployment %s, want local-path", got)
			}
		}},
		{key: "storageClass.provisionerName", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if sc := storageClass(t, objs); sc.Provisioner != "rancher.io/local-path" || !slices.Contains(containerOf(t, objs).Args, "--provisioner=rancher.io/local-path") {
				t.Errorf("class provisioner %s, args %v; want rancher.io/local-path", sc.Provisioner, containerOf(t, objs).Args)
			}
		}},
		{key: "storageClass.defaultVolumeType", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got := storageClass(t, objs).Annotations["defaultVolumeType"]; got != "local" {
				t.Errorf("class annotation defaultVolumeType %q, want local", got)
			}
		}},
		{key: "storageClass.allowedTopologies", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if at := storageClass(t, objs).AllowedTopologies; len(at) != 1 || at[0].MatchLabelExpressions[0].Key != "topology.kubernetes.io/zone" {
				t.Errorf("allowedTopologies %+v", at)
			}
		}},
		{key: "storageClass.pathPattern", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got := storageClass(t, objs).Parameters["pathPattern"]; got != "${.PVC.namespace}/${.PVC.name}" {
				t.Errorf("pathPattern %q, want ${.PVC.namespace}/${.PVC.name}", got)
			}
		}},
		{key: "storageClass.nodeAffinityKey", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if !slices.Contains(containerOf(t, objs).Args, "--node-label-key=example.com/stable-node-id") {
				t.Errorf("args %v lack --node-label-key", containerOf(t, objs).Args)
			}
			// The Node cache reading the label's value.
			if perms := permissions(t, objs, "local-path-storage", "local-path-sa"); !slices.Contains(perms[clusterScope], grant{verb: "watch", resource: "nodes", name: "*"}) {
				t.Errorf("cluster-wide %v: no watch on nodes", perms[clusterScope])
			}
		}},
		// Empty, as their defaults (set, they are refused: TestUpstreamValuesRefused).
		{key: "storageClass.userPattern", check: checkNoOwnerPatterns},
		{key: "storageClass.groupPattern", check: checkNoOwnerPatterns},
		{key: "storageClass.permPattern", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if !slices.Contains(containerOf(t, objs).Args, "--dir-mode=0770") {
				t.Errorf("args %v lack --dir-mode=0770", containerOf(t, objs).Args)
			}
		}},
		{key: "nodePathMap", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			cfg := configJSON(t, objs)
			if nm, _ := cfg["nodePathMap"].([]any); len(nm) != 2 {
				t.Errorf("config.json nodePathMap %v, want both entries", cfg["nodePathMap"])
			}
			// helper-pods mode: the helper pods mount the paths, the provisioner none.
			if spec, _ := pod(t, objs); slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.HostPath != nil }) {
				t.Errorf("the provisioner mounts a node path: %+v", spec.Volumes)
			}
			if !slices.Contains(containerOf(t, objs).Args, "--config=/etc/hostpath-provisioner/config.json") {
				t.Errorf("args %v lack --config", containerOf(t, objs).Args)
			}
		}},
		{key: "sharedFileSystemPath", with: map[string]any{"mode": "single-node", "nodePathMap": nil, "sharedFileSystemPath": "/mnt/shared", "helperImage": nil, "configmap": map[string]any{"helperPod": nil}}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got := configJSON(t, objs)["sharedFileSystemPath"]; got != "/mnt/shared" {
				t.Errorf("config.json sharedFileSystemPath %v", got)
			}
			if spec, _ := pod(t, objs); !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.HostPath != nil && v.HostPath.Path == "/mnt/shared" }) {
				t.Errorf("/mnt/shared not mounted: %+v", spec.Volumes)
			}
		}},
		{key: "storageClassConfigs", with: map[string]any{"storageClassConfigs": map[string]any{
			"fast": map[string]any{"storageClass": map[string]any{"create": true, "defaultClass": false, "defaultVolumeType": "hostPath", "reclaimPolicy": "Delete"}, "nodePathMap": []any{map[string]any{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": []any{"/mnt/fast"}}}},
			"bulk": map[string]any{"storageClass": map[string]any{"create": true, "reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer"}, "nodePathMap": []any{map[string]any{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": []any{"/mnt/bulk"}}}},
		}}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			classes := map[string]string{}
			for _, o := range ofKind(objs, "StorageClass") {
				classes[o.GetName()], _, _ = unstructured.NestedString(o.Object, "reclaimPolicy")
			}
			if len(classes) != 2 || classes["fast"] != "Delete" || classes["bulk"] != "Retain" {
				t.Errorf("classes %v, want fast (Delete) and bulk (Retain) only", classes)
			}
			configs, _ := configJSON(t, objs)["storageClassConfigs"].(map[string]any)
			fast, _ := configs["fast"].(map[string]any)
			if len(configs) != 2 || fast["nodePathMap"] == nil || fast["storageClass"] != nil {
				t.Errorf("config.json storageClassConfigs %v, want fast and bulk with their nodePathMap only", configs)
			}
		}},
		{key: "hostUsers", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if spec, _ := pod(t, objs); spec.HostUsers == nil || !*spec.HostUsers {
				t.Errorf("hostUsers %v, want true", spec.HostUsers)
			}
		}},
		{key: "serviceAccount", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			checkServiceAccount(t, objs, "local-path-sa", "")
		}},
		{key: "rbac.create", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			// helper-pods mode: the helper pods in their namespace, one node at a time.
			perms := permissions(t, objs, "local-path-storage", "local-path-sa")
			if !slices.Contains(perms["local-path-helpers"], grant{verb: "create", resource: "pods", name: "*"}) || !slices.Contains(perms[clusterScope], grant{verb: "get", resource: "nodes", name: "*"}) {
				t.Errorf("grants %v: want pods in local-path-helpers, get on nodes", perms)
			}
		}},
		{key: "podDisruptionBudget", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			checkPDB(t, objs, map[string]string{"minAvailable": "1", "unhealthyPodEvictionPolicy": "AlwaysAllow"})
		}},
		{key: "configmap.name", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if cms := ofKind(objs, "ConfigMap"); len(cms) != 1 || cms[0].GetName() != "local-path-config" {
				t.Errorf("ConfigMaps %v, want local-path-config", cms)
			}
		}},
		{key: "configmap.setup", with: localPathScripts, check: checkLocalPathScripts},
		{key: "configmap.helperPod.namespaceOverride", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if args := containerOf(t, objs).Args; !slices.Contains(args, "--helper-namespace=local-path-helpers") {
				t.Errorf("args %v lack --helper-namespace=local-path-helpers", args)
			}
		}},
		{key: "configmap.helperPod.tolerations", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if args := containerOf(t, objs).Args; !slices.Contains(args, "--helper-toleration=node-role.kubernetes.io/control-plane:NoSchedule") {
				t.Errorf("args %v lack the toleration", args)
			}
		}},
		{key: "workerThreads", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if !slices.Contains(containerOf(t, objs).Args, "--worker-threads=8") {
				t.Errorf("args %v lack --worker-threads=8", containerOf(t, objs).Args)
			}
		}},
		{key: "debug", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if !slices.Contains(containerOf(t, objs).Args, "-v=4") {
				t.Errorf("args %v lack -v=4", containerOf(t, objs).Args)
			}
		}},
		{key: "health", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			c := containerOf(t, objs)
			if !slices.Contains(c.Args, "--http-endpoint=:9090") || c.Ports[0].ContainerPort != 9090 {
				t.Errorf("args %v, ports %v: want the endpoint on 9090", c.Args, c.Ports)
			}
			for name, p := range map[string]*corev1.Probe{"/healthz": c.StartupProbe, "/healthz ": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
				if p == nil || p.HTTPGet.Path != strings.TrimSpace(name) || p.HTTPGet.Port.String() != "http" {
					t.Errorf("probe %+v, want %s on port http", p, name)
				}
			}
			if c.StartupProbe.FailureThreshold != 30 || c.LivenessProbe.PeriodSeconds != 20 || c.ReadinessProbe.PeriodSeconds != 7 {
				t.Error("the probes' timings are not the ones given")
			}
		}},
	}...)},

	{name: "nfs-server-provisioner", chart: "nfs", checks: append(sharedUpstreamChecks("podAnnotations", "podSecurityContext", "securityContext", "priorityClassName", "storageClass.volumeBindingMode", "storageClass.annotations", "extraArgs"), []upstreamCheck{
		{key: "replicaCount", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got := field(onlyWorkload(t, objs), "spec", "replicas"); got != "1" {
				t.Errorf("replicas %s, want 1", got)
			}
		}},
		{key: "image.digest", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if img := containerOf(t, objs).Image; img != "registry.example.com/nfs-provisioner@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" {
				t.Errorf("image %s, want the digest", img)
			}
		}},
		{key: "extraArgs", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			args := containerOf(t, objs).Args
			if !slices.Contains(args, "--grace-period=10") || !slices.Contains(args, "--export-subnet=10.0.0.0/8") {
				t.Errorf("args %v lack --grace-period=10 --export-subnet=10.0.0.0/8", args)
			}
		}},
		{key: "service", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			svc := theOne[corev1.Service](t, objs, "Service")
			if svc.Spec.Type != corev1.ServiceTypeNodePort || !slices.Equal(svc.Spec.ExternalIPs, []string{"192.0.2.10"}) {
				t.Errorf("Service type %s, externalIPs %v", svc.Spec.Type, svc.Spec.ExternalIPs)
			}
			want := map[string][2]int32{"nfs": {12049, 32049}, "nlockmgr": {32804, 32050}, "mountd": {20049, 32051}, "rquotad": {876, 32052}, "rpcbind": {112, 32053}, "statd": {663, 32054}}
			for _, p := range svc.Spec.Ports {
				w := want[strings.TrimSuffix(p.Name, "-udp")]
				if p.Port != w[0] || p.NodePort != w[1] || p.TargetPort.String() != p.Name {
					t.Errorf("port %s: %d -> %s, node port %d; want %d -> %s, node port %d", p.Name, p.Port, p.TargetPort.String(), p.NodePort, w[0], p.Name, w[1])
				}
			}
			if len(svc.Spec.Ports) != 12 {
				t.Errorf("%d ports, want 12", len(svc.Spec.Ports))
			}
		}},
		{key: "service.clusterIP", with: map[string]any{"service": map[string]any{"clusterIP": "10.96.0.50"}}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got, _, _ := unstructured.NestedString(ofKind(objs, "Service")[0].Object, "spec", "clusterIP"); got != "10.96.0.50" {
				t.Errorf("clusterIP %q", got)
			}
		}},
		{key: "persistence", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			vct, _, _ := unstructured.NestedSlice(onlyWorkload(t, objs).Object, "spec", "volumeClaimTemplates")
			if len(vct) != 1 {
				t.Fatalf("%d claim templates, want 1", len(vct))
			}
			var claim corev1.PersistentVolumeClaim
			fromUnstructured(t, &unstructured.Unstructured{Object: vct[0].(map[string]any)}, &claim)
			if claim.Spec.StorageClassName == nil || *claim.Spec.StorageClassName != "" || !slices.Equal(claim.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}) || claim.Spec.Resources.Requests.Storage().String() != "5Gi" {
				t.Errorf("claim template %+v: want class \"\" (storageClass -), ReadWriteMany, 5Gi", claim.Spec)
			}
		}},
		{key: "persistence.enabled", with: map[string]any{"persistence": map[string]any{"enabled": false}}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			spec, _ := pod(t, objs)
			vct, _, _ := unstructured.NestedSlice(onlyWorkload(t, objs).Object, "spec", "volumeClaimTemplates")
			if len(vct) != 0 || !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "export" && v.EmptyDir != nil }) {
				t.Errorf("persistence.enabled false: claim templates %v, volumes %+v; want an emptyDir export", vct, spec.Volumes)
			}
		}},
		{key: "persistence.existingClaim", with: map[string]any{"persistence": map[string]any{"existingClaim": "{{ .Release.Name }}-exports"}}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			spec, _ := pod(t, objs)
			vct, _, _ := unstructured.NestedSlice(onlyWorkload(t, objs).Object, "spec", "volumeClaimTemplates")
			if len(vct) != 0 || !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool {
				return v.Name == "export" && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "r-exports"
			}) {
				t.Errorf("existingClaim: claim templates %v, volumes %+v; want claim r-exports", vct, spec.Volumes)
			}
		}},
		{key: "storageClass.provisionerName", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if sc := storageClass(t, objs); sc.Provisioner != "cluster.local/nfs-server" || !slices.Contains(containerOf(t, objs).Args, "--provisioner=cluster.local/nfs-server") {
				t.Errorf("class provisioner %s, args %v", sc.Provisioner, containerOf(t, objs).Args)
			}
		}},
		{key: "storageClass.mountOptions", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got := storageClass(t, objs).MountOptions; !slices.Equal(got, []string{"vers=4.1", "hard"}) {
				t.Errorf("mountOptions %v", got)
			}
		}},
		{key: "rbac", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			spec, _ := pod(t, objs)
			if spec.ServiceAccountName != "nfs-server" || len(ofKind(objs, "ServiceAccount", "ClusterRole", "Role")) != 0 {
				t.Errorf("pods run as %s with %d ServiceAccounts/roles rendered; want the existing nfs-server, none", spec.ServiceAccountName, len(ofKind(objs, "ServiceAccount", "ClusterRole", "Role")))
			}
		}},
		{key: "securityContext", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			sc := containerOf(t, objs).SecurityContext
			if sc == nil || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"DAC_READ_SEARCH", "SYS_RESOURCE"}) {
				t.Errorf("securityContext %+v", sc)
			}
		}},
		{key: "priorityClass", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			pcs := ofKind(objs, "PriorityClass")
			spec, _ := pod(t, objs)
			if len(pcs) != 1 || pcs[0].GetName() != "nfs-server-critical" || field(pcs[0], "value") != "1000000" || spec.PriorityClassName != "nfs-server-critical" {
				t.Errorf("PriorityClasses %v, pod's %q", pcs, spec.PriorityClassName)
			}
		}},
	}...)},
}

// sharedUpstreamChecks are the keys the upstream charts share, named as
// ours names them (image, scheduling, the class's common fields), but
// those in except, which that chart lacks or checks its own way.
func sharedUpstreamChecks(except ...string) []upstreamCheck {
	return slices.DeleteFunc([]upstreamCheck{
		{key: "image.repository", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if img := containerOf(t, objs).Image; !strings.Contains(img, "example") {
				t.Errorf("image %s, want the one given", img)
			}
		}},
		{key: "image.tag", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if img := containerOf(t, objs).Image; !strings.Contains(img, ":v9.9.9") && !strings.Contains(img, "@sha256:") {
				t.Errorf("image %s, want tag v9.9.9 (or the digest, which wins)", img)
			}
		}},
		{key: "image.pullPolicy", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if p := containerOf(t, objs).ImagePullPolicy; p != corev1.PullAlways {
				t.Errorf("pull policy %s, want Always", p)
			}
		}},
		{key: "imagePullSecrets", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if spec, _ := pod(t, objs); !slices.Contains(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: "pull"}) {
				t.Errorf("imagePullSecrets %v lack pull", spec.ImagePullSecrets)
			}
		}},
		{key: "podAnnotations", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got, _, _ := unstructured.NestedString(onlyWorkload(t, objs).Object, "spec", "template", "metadata", "annotations", "prometheus.io/scrape"); got != "true" {
				t.Error("pod annotation prometheus.io/scrape missing")
			}
		}},
		{key: "podSecurityContext", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if spec, _ := pod(t, objs); spec.SecurityContext == nil || (spec.SecurityContext.FSGroup == nil && len(spec.SecurityContext.SupplementalGroups) == 0) {
				t.Errorf("pod securityContext %+v", spec.SecurityContext)
			}
		}},
		{key: "securityContext", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if sc := containerOf(t, objs).SecurityContext; sc == nil || (sc.RunAsGroup == nil && sc.RunAsUser == nil) || (sc.RunAsUser != nil && *sc.RunAsUser != 0 && *sc.RunAsUser != 65534) {
				t.Errorf("container securityContext %+v", sc)
			}
		}},
		{key: "priorityClassName", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if spec, _ := pod(t, objs); spec.PriorityClassName != "system-cluster-critical" {
				t.Errorf("priorityClassName %q", spec.PriorityClassName)
			}
		}},
		{key: "resources", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if r := containerOf(t, objs).Resources; r.Limits == nil {
				t.Errorf("resources %+v: no limits", r)
			}
		}},
		{key: "nodeSelector", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if spec, _ := pod(t, objs); spec.NodeSelector["storage"] != "yes" {
				t.Errorf("nodeSelector %v", spec.NodeSelector)
			}
		}},
		{key: "tolerations", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if spec, _ := pod(t, objs); len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "storage" {
				t.Errorf("tolerations %v", spec.Tolerations)
			}
		}},
		{key: "affinity", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if spec, _ := pod(t, objs); spec.Affinity == nil || spec.Affinity.NodeAffinity == nil {
				t.Errorf("affinity %+v", spec.Affinity)
			}
		}},
		{key: "storageClass.create", check: func(t *testing.T, objs []*unstructured.Unstructured) { storageClass(t, objs) }},
		{key: "storageClass.name", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if name := storageClass(t, objs).Name; !strings.HasPrefix(name, "nfs-") && !strings.HasPrefix(name, "local-path") {
				t.Errorf("class %s, want the name given", name)
			}
		}},
		{key: "storageClass.defaultClass", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if storageClass(t, objs).Annotations["storageclass.kubernetes.io/is-default-class"] != "true" {
				t.Error("the class is not the default")
			}
		}},
		{key: "storageClass.allowVolumeExpansion", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if sc := storageClass(t, objs); sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
				t.Error("allowVolumeExpansion not true")
			}
		}},
		{key: "storageClass.reclaimPolicy", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if p := storageClass(t, objs).ReclaimPolicy; p == nil || *p != corev1.PersistentVolumeReclaimRetain {
				t.Errorf("reclaimPolicy %v, want Retain", p)
			}
		}},
		{key: "storageClass.volumeBindingMode", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if m := storageClass(t, objs).VolumeBindingMode; m == nil || *m != "WaitForFirstConsumer" {
				t.Errorf("volumeBindingMode %v", m)
			}
		}},
		{key: "storageClass.annotations", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if storageClass(t, objs).Annotations["example.com/team"] != "storage" {
				t.Error("class annotation missing")
			}
		}},
		{key: "storageClass.parameters", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if storageClass(t, objs).Parameters["gid"] != "1000" {
				t.Error("parameter gid missing")
			}
		}},
		{key: "extraArgs", check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if !slices.Contains(containerOf(t, objs).Args, "--retry-interval-max=10m") {
				t.Errorf("args %v lack --retry-interval-max=10m", containerOf(t, objs).Args)
			}
		}},
	}, func(c upstreamCheck) bool { return slices.Contains(except, c.key) })
}

// readValues reads testdata/<name>.yaml.
func readValues(t *testing.T, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	return values
}

// copyValues is a deep copy of values, which Helm's coalescing changes.
func copyValues(t *testing.T, values map[string]any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// leafKeys are the dotted paths of values' scalars and lists, sorted.
func leafKeys(values map[string]any, prefix string) []string {
	var keys []string
	for k, v := range values {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			keys = append(keys, leafKeys(m, prefix+k+".")...)
			continue
		}
		keys = append(keys, prefix+k)
	}
	sort.Strings(keys)
	return keys
}

// lookup finds the dotted key in values.
func lookup(values map[string]any, key string) (any, bool) {
	var cur any = values
	for _, part := range strings.Split(key, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// dryRunCreate creates objs on the real API server, dry run, with strict
// field validation, in namespaces made for them: the values' meaning must
// also be valid objects.
func dryRunCreate(t *testing.T, client *manifests.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := framework.TestContext(t, time.Minute)
	for _, obj := range objs {
		if ns := obj.GetNamespace(); ns != "" {
			ensureNamespace(ctx, t, ns)
		}
		r, err := client.Resource(obj)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict}); err != nil {
			t.Errorf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// ensureNamespace creates namespace ns unless it exists.
func ensureNamespace(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	_, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// containerOf is the provisioner's container of the one workload of objs.
func containerOf(t *testing.T, objs []*unstructured.Unstructured) corev1.Container {
	t.Helper()
	_, c := pod(t, objs)
	return c
}

// envOf is the provisioner container's literal environment.
func envOf(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range containerOf(t, objs).Env {
		env[e.Name] = e.Value
	}
	return env
}

// theOne is the one object of kind among objs, decoded.
func theOne[T any](t *testing.T, objs []*unstructured.Unstructured, kind string) T {
	t.Helper()
	found := ofKind(objs, kind)
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(found), kind)
	}
	var out T
	fromUnstructured(t, found[0], &out)
	return out
}

// storageClass is the one StorageClass of objs.
func storageClass(t *testing.T, objs []*unstructured.Unstructured) storagev1.StorageClass {
	t.Helper()
	return theOne[storagev1.StorageClass](t, objs, "StorageClass")
}

// exportPV is the PV through which the nfs-subdir provisioner mounts the
// export when nfs.mountOptions is set.
func exportPV(t *testing.T, objs []*unstructured.Unstructured) corev1.PersistentVolume {
	t.Helper()
	pv := theOne[corev1.PersistentVolume](t, objs, "PersistentVolume")
	if pv.Spec.NFS == nil {
		t.Fatalf("PV %s is not an nfs volume", pv.Name)
	}
	return pv
}

// configMapData is the data of the one ConfigMap of objs.
func configMapData(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	return theOne[corev1.ConfigMap](t, objs, "ConfigMap").Data
}

// configJSON is config.json of the one ConfigMap of objs.
func configJSON(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal([]byte(configMapData(t, objs)["config.json"]), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// field is the value at path in obj, printed (numbers decode as float64
// or int64 depending on the decoder; their text does not).
func field(obj *unstructured.Unstructured, path ...string) string {
	v, found, err := unstructured.NestedFieldNoCopy(obj.Object, path...)
	if !found || err != nil {
		return ""
	}
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// checkExtraLabels: the label example.com/team=storage is on every object
// and on the pods.
func checkExtraLabels(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if o.GetLabels()["example.com/team"] != "storage" {
			t.Errorf("%s %s lacks label example.com/team=storage", o.GetKind(), o.GetName())
		}
	}
	if got, _, _ := unstructured.NestedString(onlyWorkload(t, objs).Object, "spec", "template", "metadata", "labels", "example.com/team"); got != "storage" {
		t.Error("the pods lack label example.com/team=storage")
	}
}

// checkNoOwnerPatterns: empty owner patterns reach no class parameter.
func checkNoOwnerPatterns(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for k := range storageClass(t, objs).Parameters {
		if strings.HasSuffix(k, "Pattern") && k != "pathPattern" {
			t.Errorf("class parameter %s rendered", k)
		}
	}
}

// checkPDB: one PodDisruptionBudget over the workload's pods with spec.
func checkPDB(t *testing.T, objs []*unstructured.Unstructured, spec map[string]string) {
	t.Helper()
	pdbs := ofKind(objs, "PodDisruptionBudget")
	if len(pdbs) != 1 {
		t.Fatalf("%d PodDisruptionBudgets, want 1", len(pdbs))
	}
	selector, _, _ := unstructured.NestedStringMap(pdbs[0].Object, "spec", "selector", "matchLabels")
	podLabels, _, _ := unstructured.NestedStringMap(onlyWorkload(t, objs).Object, "spec", "template", "metadata", "labels")
	for k, v := range selector {
		if podLabels[k] != v {
			t.Errorf("PDB selector %v does not select the pods (%v)", selector, podLabels)
		}
	}
	for k, want := range spec {
		if got := field(pdbs[0], "spec", k); got != want {
			t.Errorf("PDB %s %s, want %s", k, got, want)
		}
	}
}

// checkServiceAccount: the pods run as name, which the chart creates with
// the annotation annotation (unless empty).
func checkServiceAccount(t *testing.T, objs []*unstructured.Unstructured, name, annotation string) {
	t.Helper()
	spec, _ := pod(t, objs)
	sas := ofKind(objs, "ServiceAccount")
	if spec.ServiceAccountName != name || len(sas) != 1 || sas[0].GetName() != name {
		t.Errorf("pods run as %s; want %s, created by the chart", spec.ServiceAccountName, name)
	}
	if annotation != "" && len(sas) == 1 && sas[0].GetAnnotations()[annotation] == "" {
		t.Errorf("ServiceAccount lacks annotation %s", annotation)
	}
}

// localPathScripts are local-path's chart values for its setup and
// teardown scripts and the helperPod.yaml they run in (its defaults' shape,
// with every key of the template set).
var localPathScripts = map[string]any{
	"configmap": map[string]any{
		"setup":    "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"",
		"teardown": "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"",
		"helperPod": map[string]any{
			"name": "helper-pod", "annotations": map[string]any{"example.com/audit": "storage"}, "priorityClassName": "system-node-critical",
		},
	},
	"helperImage": map[string]any{"repository": "library/busybox", "tag": "1.37"},
	"helperPod":   map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "32Mi"}}},
}

// checkLocalPathScripts: the ConfigMap holds the scripts and a
// helperPod.yaml carrying every template value, which hostpath-provisioner
// in helper-pods mode accepts as it is mounted; the provisioner's own
// image stays the helper image of its other pods.
func checkLocalPathScripts(t *testing.T, objs []*unstructured.Unstructured) {
	data := configMapData(t, objs)
	dir := t.TempDir()
	for name, content := range data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m, _, err := hostpath.LoadConfig(filepath.Join(dir, "config.json"), true)
	if err != nil {
		t.Fatalf("hostpath-provisioner --helper-pods refuses the rendered ConfigMap: %v", err)
	}
	s := m.Scripts
	if s == nil || !strings.Contains(s.Setup[2], `mkdir -m 0777 -p "$VOL_DIR"`) || !strings.Contains(s.Teardown[2], `rm -rf "$VOL_DIR"`) {
		t.Fatalf("scripts %+v, want configmap.setup and configmap.teardown", s)
	}
	tmpl, c := s.Template, s.Template.Spec.Containers[0]
	if c.Image != "mirror.example.com/library/busybox:1.37" || tmpl.Name != "helper-pod" || tmpl.Annotations["example.com/audit"] != "storage" ||
		tmpl.Spec.PriorityClassName != "system-node-critical" || c.Resources.Limits.Memory().String() != "32Mi" ||
		len(tmpl.Spec.ImagePullSecrets) != 1 || tmpl.Spec.ImagePullSecrets[0].Name != "registry-login" {
		t.Errorf("helperPod.yaml: image %s, name %s, annotations %v, priority %q, limits %v, pull secrets %v",
			c.Image, tmpl.Name, tmpl.Annotations, tmpl.Spec.PriorityClassName, c.Resources.Limits, tmpl.Spec.ImagePullSecrets)
	}
	if !slices.ContainsFunc(tmpl.Spec.Tolerations, func(tl corev1.Toleration) bool { return tl.Key == "node-role.kubernetes.io/control-plane" }) {
		t.Errorf("helperPod.yaml tolerations %v lack configmap.helperPod.tolerations", tmpl.Spec.Tolerations)
	}
	if args := containerOf(t, objs).Args; !slices.Contains(args, "--helper-image=mirror.example.com/example/hostpath-provisioner:v9.9.9") {
		t.Errorf("args %v: want the provisioner's own image for --helper-image (helperImage runs the scripts)", args)
	}
}

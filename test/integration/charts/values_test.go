// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package charts

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/kubeprov/external-storage/hostpath/pkg/hostpath"
	"github.com/kubeprov/external-storage/test/framework/helm"
	"github.com/kubeprov/external-storage/test/framework/manifests"
	"github.com/kubeprov/external-storage/test/integration/release"
)

// charts are the chart directories, each with the values it requires (the
// first pairing's).
func charts() []pairing {
	var out []pairing
	for _, p := range pairings {
		if !slices.ContainsFunc(out, func(o pairing) bool { return o.chart == p.chart }) {
			out = append(out, p)
		}
	}
	return out
}

// with is base with the top-level keys of extra set.
func with(base map[string]any, extra map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// pod is the pod template of the one workload of objs, and its first
// container, the provisioner.
func pod(t *testing.T, objs []*unstructured.Unstructured) (corev1.PodSpec, corev1.Container) {
	t.Helper()
	ws, err := manifests.Workloads(objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 {
		t.Fatalf("%d workloads, want 1", len(ws))
	}
	return ws[0].Pod.Spec, ws[0].Pod.Spec.Containers[0]
}

const testNamespace = "storage"

// TestValues sets each value every chart shares and checks what it changes
// in the rendered objects.
func TestValues(t *testing.T) {
	for _, p := range charts() {
		t.Run(p.chart, func(t *testing.T) {
			ch := loadChart(t, p.chart)
			defaults := mustRender(t, ch, "r", testNamespace, p.values)
			_, defaultContainer := pod(t, defaults)

			t.Run("image", func(t *testing.T) {
				objs := mustRender(t, ch, "r", testNamespace, with(p.values, map[string]any{
					"image": map[string]any{"repository": "registry.example.com/mirror/provisioner", "tag": "v9.9.9", "pullPolicy": "Always"},
				}))
				_, c := pod(t, objs)
				if c.Image != "registry.example.com/mirror/provisioner:v9.9.9" || c.ImagePullPolicy != corev1.PullAlways {
					t.Errorf("image %s, pull policy %s; want registry.example.com/mirror/provisioner:v9.9.9, Always", c.Image, c.ImagePullPolicy)
				}
				wantDefault := "ghcr.io/kubeprov/" + ch.Name() + ":" + ch.Metadata.AppVersion
				if strings.HasPrefix(ch.Name(), "nfs") {
					wantDefault = "ghcr.io/kubeprov/nfs-provisioner:" + ch.Metadata.AppVersion
				}
				if defaultContainer.Image != wantDefault {
					t.Errorf("default image %s, want %s (the chart's appVersion)", defaultContainer.Image, wantDefault)
				}
			})

			t.Run("scheduling", func(t *testing.T) {
				toleration := map[string]any{"key": "storage", "operator": "Exists", "effect": "NoSchedule"}
				objs := mustRender(t, ch, "r", testNamespace, with(p.values, map[string]any{
					"tolerations":       []any{toleration},
					"nodeSelector":      map[string]any{"storage": "yes"},
					"affinity":          map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "zone", "operator": "In", "values": []any{"a"}}}}}}}},
					"resources":         map[string]any{"limits": map[string]any{"memory": "1Gi"}},
					"priorityClassName": "system-cluster-critical",
					"imagePullSecrets":  []any{map[string]any{"name": "pull"}},
				}))
				spec, c := pod(t, objs)
				if len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "storage" || spec.Tolerations[0].Effect != corev1.TaintEffectNoSchedule {
					t.Errorf("tolerations %+v, want the one set", spec.Tolerations)
				}
				if spec.NodeSelector["storage"] != "yes" {
					t.Errorf("nodeSelector %v, want storage=yes", spec.NodeSelector)
				}
				if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil {
					t.Errorf("affinity %+v, want the node affinity set", spec.Affinity)
				}
				// Helm merges maps: the default requests stay.
				if got := c.Resources.Limits.Memory().String(); got != "1Gi" || !apiequality.Semantic.DeepEqual(c.Resources.Requests, defaultContainer.Resources.Requests) {
					t.Errorf("resources %+v, want a 1Gi memory limit and the default requests", c.Resources)
				}
				if spec.PriorityClassName != "system-cluster-critical" || len(spec.ImagePullSecrets) != 1 {
					t.Errorf("priorityClassName %q, imagePullSecrets %v", spec.PriorityClassName, spec.ImagePullSecrets)
				}
			})

			t.Run("extraArgs", func(t *testing.T) {
				objs := mustRender(t, ch, "r", testNamespace, with(p.values, map[string]any{"extraArgs": []any{"-v=5", "--worker-threads=8"}}))
				_, c := pod(t, objs)
				if want := append(slices.Clone(defaultContainer.Args), "-v=5", "--worker-threads=8"); !slices.Equal(c.Args, want) {
					t.Errorf("args %v, want %v", c.Args, want)
				}
			})

			t.Run("rbac.create=false", func(t *testing.T) {
				objs := mustRender(t, ch, "r", testNamespace, with(p.values, map[string]any{"rbac": map[string]any{"create": false}}))
				if rbac := ofKind(objs, "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"); len(rbac) != 0 {
					t.Errorf("%d RBAC objects rendered, want none", len(rbac))
				}
				if len(ofKind(objs, "ServiceAccount")) != 1 {
					t.Error("no ServiceAccount: rbac.create=false must keep it")
				}
			})

			t.Run("serviceAccount", func(t *testing.T) {
				objs := mustRender(t, ch, "r", testNamespace, with(p.values, map[string]any{"serviceAccount": map[string]any{"create": false, "name": "existing"}}))
				if sa := ofKind(objs, "ServiceAccount"); len(sa) != 0 {
					t.Errorf("ServiceAccount %s rendered with serviceAccount.create=false", sa[0].GetName())
				}
				spec, _ := pod(t, objs)
				if spec.ServiceAccountName != "existing" {
					t.Errorf("pods run as %q, want existing", spec.ServiceAccountName)
				}
				if got, want := permissions(t, objs, testNamespace, "existing"), permissions(t, defaults, testNamespace, "r-"+ch.Name()); len(got) == 0 || len(got) != len(want) {
					t.Errorf("ServiceAccount existing is granted %v, want what the chart's own gets: %v", got, want)
				}
				if _, err := helm.Template(ch, "r", testNamespace, with(p.values, map[string]any{"serviceAccount": map[string]any{"create": false}})); err == nil || !strings.Contains(err.Error(), "serviceAccount.name") {
					t.Errorf("serviceAccount.create=false without a name: error %v, want one naming serviceAccount.name", err)
				}
				objs = mustRender(t, ch, "r", testNamespace, with(p.values, map[string]any{"serviceAccount": map[string]any{"create": true, "annotations": map[string]any{"iam.example.com/role": "storage"}}}))
				if sa := ofKind(objs, "ServiceAccount"); len(sa) != 1 || sa[0].GetAnnotations()["iam.example.com/role"] != "storage" {
					t.Error("serviceAccount.annotations not on the ServiceAccount")
				}
			})

			t.Run("leaderElection", func(t *testing.T) {
				values, elects := p.values, slices.Contains(defaultContainer.Args, "--leader-election")
				if p.chart == "hostpath" {
					// node-local instances never elect (values.yaml says so).
					objs := mustRender(t, ch, "r", testNamespace, map[string]any{"leaderElection": map[string]any{"enabled": true}})
					if _, c := pod(t, objs); slices.Contains(c.Args, "--leader-election") {
						t.Errorf("node-local mode with leader election: args %v", c.Args)
					}
					values, elects = map[string]any{"mode": "single-node"}, true
				}
				objs := mustRender(t, ch, "r", testNamespace, with(values, map[string]any{"leaderElection": map[string]any{"enabled": !elects}}))
				_, c := pod(t, objs)
				if elects == slices.Contains(c.Args, "--leader-election") {
					t.Errorf("leaderElection.enabled=%v: args %v", !elects, c.Args)
				}
				if !elects {
					return
				}
				objs = mustRender(t, ch, "r", testNamespace, with(values, map[string]any{"leaderElection": map[string]any{"enabled": true, "namespace": "elections"}}))
				_, c = pod(t, objs)
				if !slices.Contains(c.Args, "--leader-election-namespace=elections") {
					t.Errorf("args %v lack --leader-election-namespace=elections", c.Args)
				}
				perms := permissions(t, objs, testNamespace, "r-"+ch.Name())
				lease := grant{verb: "update", group: "coordination.k8s.io", resource: "leases", name: "*"}
				if !slices.Contains(perms["elections"], lease) || slices.Contains(perms[testNamespace], lease) {
					t.Errorf("leases granted in %v, want in elections only", perms)
				}
			})

			t.Run("storageClass", func(t *testing.T) {
				sc := map[string]any{"create": true, "name": "fast", "defaultClass": true, "reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer", "parameters": map[string]any{"tier": "gold"}}
				vals := with(p.values, map[string]any{"storageClass": sc})
				if p.chart == "csi" {
					vals["driver"] = map[string]any{"name": "example.csi.k8s.io"}
				}
				objs := mustRender(t, ch, "r", testNamespace, vals)
				scs := ofKind(objs, "StorageClass")
				if len(scs) != 1 {
					t.Fatalf("%d StorageClasses, want 1", len(scs))
				}
				got := scs[0]
				if got.GetName() != "fast" || got.GetAnnotations()["storageclass.kubernetes.io/is-default-class"] != "true" ||
					got.Object["reclaimPolicy"] != "Retain" || got.Object["volumeBindingMode"] != "WaitForFirstConsumer" {
					t.Errorf("StorageClass %v", got.Object)
				}
				if params, _ := got.Object["parameters"].(map[string]any); params["tier"] != "gold" {
					t.Errorf("parameters %v lack tier=gold", params)
				}
				objs = mustRender(t, ch, "r", testNamespace, with(p.values, map[string]any{"storageClass": map[string]any{"create": false}}))
				if len(ofKind(objs, "StorageClass")) != 0 {
					t.Error("StorageClass rendered with storageClass.create=false")
				}
			})
		})
	}
}

// TestChartSpecificValues checks the values only some charts have.
func TestChartSpecificValues(t *testing.T) {
	nfsSubdir := map[string]any{"nfs": map[string]any{"server": "10.0.0.5", "path": "/exports/k8s"}}
	for _, tc := range []struct {
		chart   string
		values  map[string]any
		wantErr string                                                // the rendering fails, naming this
		check   func(t *testing.T, objs []*unstructured.Unstructured) // else
	}{
		{chart: "hostpath", values: map[string]any{"nodePathMap": []any{
			map[string]any{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": []any{"/opt/local-path-provisioner"}},
			map[string]any{"node": "worker-1", "paths": []any{"/mnt/disk1", "/opt/local-path-provisioner"}},
		}}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			spec, c := pod(t, objs)
			if !slices.Contains(c.Args, "--config=/etc/hostpath-provisioner/config.json") || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--pv-dir") }) {
				t.Errorf("nodePathMap: args %v, want --config instead of --pv-dir", c.Args)
			}
			mounted := map[string]bool{}
			for _, m := range c.VolumeMounts {
				mounted[m.MountPath] = true
			}
			hostPaths := map[string]bool{}
			for _, v := range spec.Volumes {
				if v.HostPath != nil {
					hostPaths[v.HostPath.Path] = true
				}
			}
			for _, p := range []string{"/opt/local-path-provisioner", "/mnt/disk1"} {
				if !mounted[p] || !hostPaths[p] {
					t.Errorf("nodePathMap path %s: mounted %v, hostPath volume %v", p, mounted[p], hostPaths[p])
				}
			}
			// The binary reads what the chart writes.
			for _, o := range objs {
				if o.GetKind() != "ConfigMap" {
					continue
				}
				data, _, _ := unstructured.NestedString(o.Object, "data", "config.json")
				m, err := hostpath.ParseConfig([]byte(data))
				if err != nil {
					t.Fatalf("config.json the chart renders:\n%s\nis refused: %v", data, err)
				}
				if got := m.AllPaths(); !slices.Equal(got, []string{"/mnt/disk1", "/opt/local-path-provisioner"}) {
					t.Errorf("config.json paths %v", got)
				}
				return
			}
			t.Error("nodePathMap: no ConfigMap rendered")
		}},
		{chart: "hostpath", values: map[string]any{"nodePathMap": []any{
			map[string]any{"node": "worker-1", "paths": []any{"/mnt/disk1", "/mnt/disk2"}, "pathCapacity": map[string]any{"/mnt/disk1": "500Gi"}},
		}}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			// The budget reaches the binary as it reads config.json.
			m := renderedConfig(t, objs)
			if got, ok := m.CapacityOf("worker-1", "/mnt/disk1"); !ok || got != 500<<30 {
				t.Errorf("pathCapacity of /mnt/disk1: %d %v, want 500Gi", got, ok)
			}
			if _, ok := m.CapacityOf("worker-1", "/mnt/disk2"); ok {
				t.Error("/mnt/disk2 has a budget none was given")
			}
		}},
		{chart: "hostpath", values: map[string]any{"nodePathMap": []any{
			map[string]any{"node": "worker-1", "paths": []any{"/mnt/disk1"}, "pathCapacity": map[string]any{"/mnt/disk1": "500 gigs"}},
		}}, wantErr: "pathCapacity"},
		{chart: "hostpath", values: map[string]any{"mode": "single-node", "nodePathMap": nil, "sharedFileSystemPath": "/mnt/shared", "sharedFileSystemCapacity": "2Ti"}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if got, ok := renderedConfig(t, objs).CapacityOf("any", "/mnt/shared"); !ok || got != 2<<40 {
				t.Errorf("sharedFileSystemCapacity: %d %v, want 2Ti", got, ok)
			}
		}},
		{chart: "hostpath", values: map[string]any{"sharedFileSystemCapacity": "lots"}, wantErr: "sharedFileSystemCapacity"},
		{chart: "hostpath", values: map[string]any{"capacity": map[string]any{"enabled": true}, "provisionerName": "hostpath.kubeprov.io"}, check: checkCapacityValues(true)},
		{chart: "hostpath", values: map[string]any{"capacity": map[string]any{"enabled": true, "csiDriver": map[string]any{"create": false}}, "provisionerName": "hostpath.kubeprov.io"}, check: checkCapacityValues(false)},
		{chart: "hostpath", values: map[string]any{"capacity": map[string]any{"enabled": true}}, wantErr: `capacity.enabled needs a provisioner name that can name a CSIDriver object (a DNS subdomain such as hostpath.kubeprov.io), got "kubeprov.io/hostpath": set provisionerName`},
		{chart: "hostpath", values: map[string]any{"mode": "everywhere"}, wantErr: "mode"},
		{chart: "hostpath", values: map[string]any{"pvDir": "/mnt/volumes"}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			spec, c := pod(t, objs)
			if !slices.Contains(c.Args, "--pv-dir=/mnt/volumes") || spec.Volumes[0].HostPath.Path != "/mnt/volumes" || c.VolumeMounts[0].MountPath != "/mnt/volumes" {
				t.Errorf("pvDir: args %v, volume %+v, mount %+v", c.Args, spec.Volumes[0], c.VolumeMounts[0])
			}
		}},
		{chart: "nfs-subdir", values: nil, wantErr: "nfs.server"},
		{chart: "nfs-subdir", values: nfsSubdir, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			spec, c := pod(t, objs)
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			if env["NFS_SERVER"] != "10.0.0.5" || env["NFS_PATH"] != "/exports/k8s" || spec.Volumes[0].NFS.Server != "10.0.0.5" || spec.Volumes[0].NFS.Path != "/exports/k8s" {
				t.Errorf("nfs.server/path: env %v, volume %+v", env, spec.Volumes[0].NFS)
			}
		}},
		{chart: "cinder", values: map[string]any{"topologyKey": "topology.kubernetes.io/zone"}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			_, c := pod(t, objs)
			if !slices.Contains(c.Args, "--topology-key=topology.kubernetes.io/zone") {
				t.Errorf("topologyKey: args %v", c.Args)
			}
			var nodes bool
			for _, o := range objs {
				if o.GetKind() != "ClusterRole" {
					continue
				}
				rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
				for _, r := range rules {
					res, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
					nodes = nodes || slices.Contains(res, "nodes")
				}
			}
			if !nodes {
				t.Error("topologyKey: the ClusterRole grants nothing on nodes, which topology reads")
			}
		}},
		{chart: "cinder", values: map[string]any{"cloudConfig": map[string]any{"existingSecret": "my-cloud"}}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			spec, _ := pod(t, objs)
			if len(ofKind(objs, "Secret")) != 0 || spec.Volumes[0].Secret.SecretName != "my-cloud" {
				t.Errorf("cloudConfig.existingSecret: %d Secrets rendered, volume %+v", len(ofKind(objs, "Secret")), spec.Volumes[0])
			}
		}},
		{chart: "csi", values: map[string]any{"storageClass": map[string]any{"create": true}}, wantErr: "driver.name"},
		{chart: "csi", values: map[string]any{"driver": map[string]any{"image": "registry.example.com/my-driver:v2", "args": []any{"--endpoint=unix:///run/csi/socket", "--v=4"}}}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			spec, _ := pod(t, objs)
			d := spec.Containers[1]
			if d.Image != "registry.example.com/my-driver:v2" || !slices.Equal(d.Args, []string{"--endpoint=unix:///run/csi/socket", "--v=4"}) {
				t.Errorf("driver container %s %v", d.Image, d.Args)
			}
		}},
		{chart: "csi", values: map[string]any{"driver": map[string]any{
			"env":          []any{map[string]any{"name": "CLOUD_TOKEN", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "cloud", "key": "token"}}}},
			"volumes":      []any{map[string]any{"name": "state", "emptyDir": map[string]any{}}},
			"volumeMounts": []any{map[string]any{"name": "state", "mountPath": "/var/lib/driver"}},
		}}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			spec, provisioner := pod(t, objs)
			d := spec.Containers[1]
			if len(d.Env) != 1 || d.Env[0].ValueFrom == nil || d.Env[0].ValueFrom.SecretKeyRef.Name != "cloud" {
				t.Errorf("driver.env: driver container env %+v", d.Env)
			}
			if len(d.VolumeMounts) != 2 || d.VolumeMounts[1].Name != "state" || d.VolumeMounts[1].MountPath != "/var/lib/driver" {
				t.Errorf("driver.volumeMounts: driver container mounts %+v, want the socket and state", d.VolumeMounts)
			}
			if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "state" && v.EmptyDir != nil }) {
				t.Errorf("driver.volumes: pod volumes %+v lack state", spec.Volumes)
			}
			// The driver's env and volumes are its own, never csi-provisioner's.
			if slices.ContainsFunc(provisioner.Env, func(e corev1.EnvVar) bool { return e.Name == "CLOUD_TOKEN" }) ||
				slices.ContainsFunc(provisioner.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "state" }) {
				t.Errorf("csi-provisioner got the driver's env or mounts: %+v %+v", provisioner.Env, provisioner.VolumeMounts)
			}
		}},
		{chart: "nfs", values: map[string]any{"persistence": map[string]any{"storageClass": "ssd", "size": "20Gi"}}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			sts := ofKind(objs, "StatefulSet")[0]
			vct, _, _ := unstructured.NestedSlice(sts.Object, "spec", "volumeClaimTemplates")
			spec := vct[0].(map[string]any)["spec"].(map[string]any)
			if spec["storageClassName"] != "ssd" || spec["resources"].(map[string]any)["requests"].(map[string]any)["storage"] != "20Gi" {
				t.Errorf("persistence: claim template %v", spec)
			}
		}},
		{chart: "flex", values: map[string]any{"launcher": "exec", "provisionerName": "example.com/flex"}, check: func(t *testing.T, objs []*unstructured.Unstructured) {
			_, c := pod(t, objs)
			if !slices.Contains(c.Args, "--launcher=exec") || !slices.Contains(c.Args, "--provisioner=example.com/flex") {
				t.Errorf("args %v", c.Args)
			}
		}},
	} {
		t.Run(tc.chart, func(t *testing.T) {
			objs, err := helm.Template(loadChart(t, tc.chart), "r", testNamespace, tc.values)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("values %v: error %v, want one naming %s", tc.values, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, objs)
		})
	}
}

// checkCapacityValues checks charts/hostpath with capacity.enabled: the
// flag, the Role's rule on CSIStorageCapacity objects, and the CSIDriver
// (when it is to be created) named after the provisioner with what the
// README says it holds.
func checkCapacityValues(driver bool) func(t *testing.T, objs []*unstructured.Unstructured) {
	return func(t *testing.T, objs []*unstructured.Unstructured) {
		t.Helper()
		if _, c := pod(t, objs); !slices.Contains(c.Args, "--enable-capacity") || !slices.Contains(c.Args, "--provisioner=hostpath.kubeprov.io") {
			t.Errorf("capacity.enabled: args %v, want --enable-capacity and --provisioner=hostpath.kubeprov.io", c.Args)
		}
		sa := serviceAccountOf(t, onlyWorkload(t, objs))
		var got []string
		for _, g := range permissions(t, objs, testNamespace, sa)[testNamespace] {
			if g.group == "storage.k8s.io" && g.resource == "csistoragecapacities" {
				got = append(got, g.verb)
			}
		}
		slices.Sort(got)
		if want := []string{"create", "delete", "list", "update", "watch"}; !slices.Equal(got, want) {
			t.Errorf("capacity.enabled: verbs on csistoragecapacities in the release namespace %v, want %v", got, want)
		}
		drivers := ofKind(objs, "CSIDriver")
		if !driver {
			if len(drivers) != 0 {
				t.Errorf("capacity.csiDriver.create false: %d CSIDriver rendered", len(drivers))
			}
			return
		}
		if len(drivers) != 1 {
			t.Fatalf("%d CSIDriver rendered, want 1", len(drivers))
		}
		var d storagev1.CSIDriver
		fromUnstructured(t, drivers[0], &d)
		s := d.Spec
		if d.Name != "hostpath.kubeprov.io" || !ptr.Deref(s.StorageCapacity, false) || ptr.Deref(s.AttachRequired, true) || ptr.Deref(s.PodInfoOnMount, true) ||
			!slices.Equal(s.VolumeLifecycleModes, []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}) {
			t.Errorf("CSIDriver %s: %+v, want storageCapacity true, attachRequired false, podInfoOnMount false, volumeLifecycleModes [Persistent]", d.Name, s)
		}
	}
}

// TestLint runs Helm's chart linter over every chart: no warning or error
// (helm lint --strict).
func TestLint(t *testing.T) {
	root := repoRoot(t)
	for _, p := range charts() {
		t.Run(p.chart, func(t *testing.T) {
			kv, err := chartcommon.ParseKubeVersion("v1.36.3")
			if err != nil {
				t.Fatal(err)
			}
			linter := lint.RunAll(filepath.Join(root, "charts", p.chart), p.values, testNamespace, lint.WithKubeVersion(kv))
			for _, m := range linter.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				}
			}
		})
	}
}

// TestChartsShareHelpers: the helpers every chart uses live once, in the
// library chart charts/common, which each chart declares as its
// file://../common dependency and links at charts/kubeprov-common (so helm
// install from the directory needs no helm dependency build); no chart
// defines a kubeprov.* helper of its own. And each Chart.yaml names the
// next release of its module in versions.yaml.
func TestChartsShareHelpers(t *testing.T) {
	root := repoRoot(t)
	library, err := loader.LoadDir(filepath.Join(root, "charts", "common"))
	if err != nil {
		t.Fatal(err)
	}
	if library.Metadata.Type != "library" {
		t.Fatalf("charts/common is a %q chart, want a library", library.Metadata.Type)
	}
	for _, p := range charts() {
		ch := loadChart(t, p.chart)
		deps := ch.Metadata.Dependencies
		if len(deps) != 1 || deps[0].Name != library.Name() || deps[0].Repository != "file://../common" || deps[0].Version != library.Metadata.Version {
			t.Errorf("charts/%s/Chart.yaml dependencies %+v, want only %s %s from file://../common", p.chart, deps, library.Name(), library.Metadata.Version)
		}
		if subs := ch.Dependencies(); len(subs) != 1 || subs[0].Name() != library.Name() {
			t.Errorf("charts/%s loads %d subcharts, want the library (charts/%s/charts/%s -> ../../common)", p.chart, len(subs), p.chart, library.Name())
		}
		for _, tpl := range ch.Templates {
			if bytes.Contains(tpl.Data, []byte(`define "kubeprov.`)) {
				t.Errorf("charts/%s/%s defines a kubeprov.* helper: move it to charts/common", p.chart, tpl.Name)
			}
		}
		module := strings.Split(p.kustomize, "/")[0]
		version, err := release.Version(root, module)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Metadata.AppVersion != version || "v"+ch.Metadata.Version != version {
			t.Errorf("charts/%s/Chart.yaml: version %s, appVersion %s; want %s and %s (versions.yaml's %s)", p.chart, ch.Metadata.Version, ch.Metadata.AppVersion, strings.TrimPrefix(version, "v"), version, module)
		}
	}
}

// renderedConfig is the config.json a render holds, as the binary reads it.
func renderedConfig(t *testing.T, objs []*unstructured.Unstructured) *hostpath.PathMap {
	t.Helper()
	maps := ofKind(objs, "ConfigMap")
	if len(maps) == 0 {
		t.Fatal("no ConfigMap rendered")
	}
	data, _, _ := unstructured.NestedString(maps[0].Object, "data", "config.json")
	m, err := hostpath.ParseConfig([]byte(data))
	if err != nil {
		t.Fatalf("config.json the chart renders:\n%s\nis refused: %v", data, err)
	}
	return m
}

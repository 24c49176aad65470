// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package lib

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kubeprov/external-storage/test/framework"
)

// updateCorpusEnv, set to 1, also writes the live encodings into lib's
// committed corpus (lib/internal/cachedecode/testdata/fuzz/FuzzSettledDecoding).
const updateCorpusEnv = "KUBEPROV_UPDATE_CORPUS"

// TestSettledDecodingOfLiveEncodings runs lib's differential fuzz target
// (FuzzSettledDecoding: the informers' fast protobuf reader against the
// real decoder) on what this kube-apiserver actually sends: claims and PVs
// in every state the reader tells apart — bound by the real binder,
// pending, released, being deleted — with most of their optional fields
// set, alone and in lists. A Kubernetes version that encodes one of them in
// a way the reader misreads fails here.
func TestSettledDecodingOfLiveEncodings(t *testing.T) {
	ctx := framework.TestContext(t, 5*time.Minute)
	ns, err := framework.CreateNamespace(ctx, client, "decoding")
	if err != nil {
		t.Fatal(err)
	}
	label := map[string]string{"decoding.test.kubeprov.io": ns}

	bound := liveVolume(ns+"-bound", label, &corev1.ObjectReference{Namespace: ns, Name: "bound"})
	released := liveVolume(ns+"-released", label, &corev1.ObjectReference{Namespace: ns, Name: "gone", UID: "0000-gone"})
	deleting := liveVolume(ns+"-deleting", label, nil)
	deleting.Finalizers = []string{"decoding.test.kubeprov.io/hold"}
	for _, pv := range []*corev1.PersistentVolume{bound, released, deleting} {
		if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteVolume(t, pv.Name) })
	}
	claims := []*corev1.PersistentVolumeClaim{
		liveClaim("bound", label, func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = bound.Name }),
		liveClaim("pending", label, func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"none": "matches"}}
			c.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "source"}
		}),
		liveClaim("deleting", label, func(c *corev1.PersistentVolumeClaim) {
			c.Finalizers = []string{"decoding.test.kubeprov.io/hold"}
		}),
	}
	for _, c := range claims {
		if _, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, del := range []func() error{
		func() error {
			return client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "deleting", metav1.DeleteOptions{})
		},
		func() error {
			return client.CoreV1().PersistentVolumes().Delete(ctx, deleting.Name, metav1.DeleteOptions{})
		},
	} {
		if err := del(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { dropFinalizers(t, ns) })
	// The binder's work: the bound pair, and the released PV.
	if _, _, err := framework.WaitForPVCBound(ctx, client, ns, "bound"); err != nil {
		t.Fatal(err)
	}
	for name, phase := range map[string]corev1.PersistentVolumePhase{bound.Name: corev1.VolumeBound, released.Name: corev1.VolumeReleased} {
		if _, err := framework.WaitForPVPhase(ctx, client, name, phase); err != nil {
			t.Fatalf("PV %s: %v", name, err)
		}
	}

	paths := map[string]string{
		"claim-bound":    "/api/v1/namespaces/" + ns + "/persistentvolumeclaims/bound",
		"claim-pending":  "/api/v1/namespaces/" + ns + "/persistentvolumeclaims/pending",
		"claim-deleting": "/api/v1/namespaces/" + ns + "/persistentvolumeclaims/deleting",
		"claim-list":     "/api/v1/namespaces/" + ns + "/persistentvolumeclaims",
		"pv-bound":       "/api/v1/persistentvolumes/" + bound.Name,
		"pv-released":    "/api/v1/persistentvolumes/" + released.Name,
		"pv-deleting":    "/api/v1/persistentvolumes/" + deleting.Name,
		"pv-list":        "/api/v1/persistentvolumes?labelSelector=decoding.test.kubeprov.io%3D" + ns,
	}
	corpus := t.TempDir()
	update := os.Getenv(updateCorpusEnv) == "1"
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join(root, "lib", "internal", "cachedecode", "testdata", "fuzz", "FuzzSettledDecoding")
	for name, path := range paths {
		data := getProtobuf(ctx, t, path)
		file := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(data)))
		if err := os.WriteFile(filepath.Join(corpus, name), []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		if update {
			if err := os.MkdirAll(committed, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(committed, "live-"+name), []byte(file), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", "^FuzzSettledDecoding$", "-v", "./internal/cachedecode")
	cmd.Dir = filepath.Join(root, "lib")
	cmd.Env = append(os.Environ(), "KUBEPROV_LIVE_ENCODINGS="+corpus)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("FuzzSettledDecoding on this kube-apiserver's encodings: %v\n%s", err, out)
	}
	if m := regexp.MustCompile(`live encodings: (\d+)`).FindSubmatch(out); m == nil || string(m[1]) != strconv.Itoa(len(paths)) {
		t.Fatalf("FuzzSettledDecoding did not read the %d live encodings:\n%s", len(paths), out)
	}
}

// liveVolume is a PV with most optional fields set, as a provisioner and
// the binder leave them.
func liveVolume(name string, labels map[string]string, claim *corev1.ObjectReference) *corev1.PersistentVolume {
	fs := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": "decoding.test.kubeprov.io", "other": "x"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "decoding",
			MountOptions:                  []string{"noatime"},
			VolumeMode:                    &fs,
			ClaimRef:                      claim,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: "decoding.test.kubeprov.io", VolumeHandle: name, FSType: "ext4",
				VolumeAttributes: map[string]string{"a": "b"},
			}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}},
			}}}},
		},
	}
}

func liveClaim(name string, labels map[string]string, mutate func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	class := "decoding"
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{"note": name}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
			},
		},
	}
	mutate(c)
	return c
}

// getProtobuf reads path as the informers' client does: protobuf.
func getProtobuf(ctx context.Context, t *testing.T, path string) []byte {
	t.Helper()
	cfg := cp.RestConfig()
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.kubernetes.protobuf")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", path, resp.Status, err)
	}
	if resp.Header.Get("Content-Type") != "application/vnd.kubernetes.protobuf" {
		t.Fatalf("GET %s answered %s, not protobuf", path, resp.Header.Get("Content-Type"))
	}
	return data
}

// dropFinalizers lets the objects held for being deleted go.
func dropFinalizers(t *testing.T, ns string) {
	ctx := context.Background()
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, "deleting", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Logf("claim deleting: %v", err)
	}
	if _, err := client.CoreV1().PersistentVolumes().Patch(ctx, ns+"-deleting", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Logf("PV %s-deleting: %v", ns, err)
	}
}

func deleteVolume(t *testing.T, name string) {
	err := client.CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Logf("deleting PV %s: %v", name, err)
	}
}

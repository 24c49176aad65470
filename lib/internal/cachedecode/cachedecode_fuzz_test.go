// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cachedecode

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// LiveEncodingsEnv names a directory of corpus files (Go's fuzz corpus
// format, one []byte each) that FuzzSettledDecoding adds to its seeds: the
// integration suite fills it with what a live kube-apiserver sends
// (test/integration/lib TestSettledDecodingOfLiveEncodings), so that a
// Kubernetes version whose encoding the reader misreads fails there.
const liveEncodingsEnv = "KUBEPROV_LIVE_ENCODINGS"

// FuzzSettledDecoding: for any bytes the informers' client may receive, the
// settled decoder (for a watch event's object) or the list readers (for a
// list, read one item at a time) and the scheme's protobuf decoder agree on
// everything the caches keep (a claim's settledness and resource version;
// a bound PV's name, uid, resource version, provisioned-by, phase and claim
// reference; a list's items and metadata); a list of another kind is
// refused. On an encoding as kube-apiserver writes it
// (the input encoded again), the reader also takes its shortcut exactly
// for settled claims and bound PVs: falling back to a whole decode is
// correct but would let the shortcut silently stop working.
func FuzzSettledDecoding(f *testing.F) {
	for _, obj := range decodingSeeds() {
		f.Add(encodeProtobuf(f, obj))
	}
	if dir := os.Getenv(liveEncodingsEnv); dir != "" {
		n, err := addCorpusDir(f, dir)
		if err != nil {
			f.Fatalf("%s: %v", liveEncodingsEnv, err)
		}
		if n == 0 {
			f.Fatalf("%s=%s holds no corpus file", liveEncodingsEnv, dir)
		}
		f.Logf("live encodings: %d", n)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, into := range decodeTargets() {
			whole, wholeErr := decodeWith(false, data, into())
			fast, fastErr := decodeWith(true, data, into())
			if wholeErr != nil {
				// Nothing the scheme refuses reaches a cache through the
				// shortcut but a settled claim or bound PV whose other fields
				// are malformed: kube-apiserver never sends such bytes.
				continue
			}
			if into() != nil && fmt.Sprintf("%T", whole) != fmt.Sprintf("%T", into()) {
				// Another kind in answer to a list: the scheme's decoder
				// returns it, the list readers refuse it.
				if fastErr == nil {
					t.Fatalf("into %T: the list reader accepted a %T", into(), whole)
				}
				continue
			}
			if fastErr != nil {
				t.Fatalf("into %T: the settled decoder failed (%v) where the scheme's decoded %T", into(), fastErr, whole)
			}
			if diff := cmp.Diff(cachedView(t, whole), cachedView(t, fast)); diff != "" {
				t.Fatalf("into %T: what the cache keeps (-whole decoding +settled decoder):\n%s", into(), diff)
			}
			canonical := encodeAgain(t, whole)
			if canonical == nil {
				continue
			}
			fast, err := decodeWith(true, canonical, into())
			if err != nil {
				t.Fatalf("into %T: the settled decoder failed on the encoding kube-apiserver writes: %v", into(), err)
			}
			if diff := cmp.Diff(cachedView(t, whole), cachedView(t, fast)); diff != "" {
				t.Fatalf("into %T, encoded again: what the cache keeps (-whole decoding +settled decoder):\n%s", into(), diff)
			}
			if m := shortcutMismatch(whole, fast); m != "" && informerDecodes(into(), whole) {
				t.Fatalf("into %T, encoded again: %s", into(), m)
			}
		}
	})
}

// decodeTargets are the informers' three ways of decoding: a watch event's
// object, and the two lists (readClaimList and readVolumeList).
func decodeTargets() []func() runtime.Object {
	return []func() runtime.Object{
		func() runtime.Object { return nil },
		func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
		func() runtime.Object { return &corev1.PersistentVolumeList{} },
	}
}

// informerDecodes: the informers decode a single object with no target and
// a list into its own type; the shortcut is promised only for those.
func informerDecodes(into, decoded runtime.Object) bool {
	switch decoded.(type) {
	case *corev1.PersistentVolumeClaimList, *corev1.PersistentVolumeList:
		return into != nil && fmt.Sprintf("%T", into) == fmt.Sprintf("%T", decoded)
	}
	return into == nil
}

// decodeWith decodes as the informers' client does (see decodeAsClient),
// returning the error instead of failing.
func decodeWith(settled bool, data []byte, into runtime.Object) (obj runtime.Object, err error) {
	if settled {
		switch into.(type) {
		case *corev1.PersistentVolumeClaimList:
			return asTyped(&corev1.PersistentVolumeClaimList{}, readClaimList, bytes.NewReader(data))
		case *corev1.PersistentVolumeList:
			return asTyped(&corev1.PersistentVolumeList{}, readVolumeList, bytes.NewReader(data))
		}
	}
	codecs := scheme.Codecs.WithoutConversion()
	infos := codecs.SupportedMediaTypes()
	if settled {
		infos = settledDecoding{codecs}.SupportedMediaTypes()
	}
	info, _ := runtime.SerializerInfoForMediaType(infos, runtime.ContentTypeProtobuf)
	obj, _, err = codecs.DecoderToVersion(info.Serializer, corev1.SchemeGroupVersion).Decode(data, nil, into)
	return obj, err
}

// asTyped sets list, a typed list, to what readClaimList or readVolumeList
// read, for comparing with the scheme's decoding.
func asTyped(list runtime.Object, read func(io.Reader) (runtime.Object, error), body io.Reader) (runtime.Object, error) {
	obj, err := read(body)
	if err != nil {
		return nil, err
	}
	l, ok := obj.(*metainternalversion.List)
	if !ok { // not protobuf: the scheme decoded it
		return obj, nil
	}
	items := make([]runtime.Object, len(l.Items))
	for i, item := range l.Items {
		items[i] = item.DeepCopyObject()
	}
	if err := meta.SetList(list, items); err != nil {
		return nil, err
	}
	switch typed := list.(type) {
	case *corev1.PersistentVolumeClaimList:
		typed.ListMeta = l.ListMeta
	case *corev1.PersistentVolumeList:
		typed.ListMeta = l.ListMeta
	}
	return list, nil
}

// cachedView is what the caches keep of a decoded object: Trim's
// result for PVs, settledness and resource version for a claim (a settled
// claim never reaches the cache; an unsettled one is kept whole), the
// unsettled claims of a claim list.
func cachedView(t *testing.T, obj runtime.Object) any {
	t.Helper()
	switch o := obj.(type) {
	case *settledClaim:
		return claimView{Settled: true, ResourceVersion: o.resourceVersion}
	case *corev1.PersistentVolumeClaim:
		if ClaimSettled(o) {
			return claimView{Settled: true, ResourceVersion: o.ResourceVersion}
		}
		return o
	case *corev1.PersistentVolumeClaimList:
		list := &corev1.PersistentVolumeClaimList{ListMeta: o.ListMeta}
		for i := range o.Items {
			if !ClaimSettled(&o.Items[i]) {
				list.Items = append(list.Items, o.Items[i])
			}
		}
		return list
	case *corev1.PersistentVolume:
		return trimmed(t, o)
	case *corev1.PersistentVolumeList:
		list := &corev1.PersistentVolumeList{ListMeta: o.ListMeta}
		for i := range o.Items {
			list.Items = append(list.Items, *trimmed(t, &o.Items[i]))
		}
		return list
	}
	return obj
}

type claimView struct {
	Settled         bool
	ResourceVersion string
}

func trimmed(t *testing.T, pv *corev1.PersistentVolume) *corev1.PersistentVolume {
	t.Helper()
	out, err := Trim(pv.DeepCopy(), nil)
	if err != nil {
		t.Fatalf("trimming %s: %v", pv.Name, err)
	}
	return out.(*corev1.PersistentVolume)
}

// encodeAgain encodes a decoded claim, PV or list as kube-apiserver would;
// nil for what it never sends so (a settled claim is only a resource
// version here).
func encodeAgain(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	switch obj.(type) {
	case *corev1.PersistentVolumeClaim, *corev1.PersistentVolume, *corev1.PersistentVolumeClaimList, *corev1.PersistentVolumeList:
	default:
		return nil
	}
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	data, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), obj)
	if err != nil {
		t.Fatalf("encoding %T again: %v", obj, err)
	}
	return data
}

// shortcutMismatch says where the settled decoder decoded whole what it
// should have read from the cached fields alone, or the other way round:
// a claim is read so when settled, a PV (alone or in a list) when bound and
// not being deleted. A list's settled claims are dropped either way.
func shortcutMismatch(whole, fast runtime.Object) string {
	switch w := whole.(type) {
	case *corev1.PersistentVolumeClaim:
		_, took := fast.(*settledClaim)
		if took != ClaimSettled(w) {
			return fmt.Sprintf("claim read from its cached fields only: %v, settled: %v", took, ClaimSettled(w))
		}
	case *corev1.PersistentVolume:
		return volumeShortcutMismatch(w, fast.(*corev1.PersistentVolume))
	case *corev1.PersistentVolumeList:
		items := fast.(*corev1.PersistentVolumeList).Items
		for i := range w.Items {
			if m := volumeShortcutMismatch(&w.Items[i], &items[i]); m != "" {
				return fmt.Sprintf("item %d: %s", i, m)
			}
		}
	}
	return ""
}

func volumeShortcutMismatch(whole, fast *corev1.PersistentVolume) string {
	want := whole.Status.Phase == corev1.VolumeBound && whole.DeletionTimestamp == nil
	if took := holdsOnlyCachedFields(fast); took != want {
		return fmt.Sprintf("PV %s read from its cached fields only: %v, bound and not being deleted: %v", whole.Name, took, want)
	}
	return ""
}

// holdsOnlyCachedFields: a PV with nothing beyond what readBoundVolume
// fills in, as only the shortcut leaves a bound PV (kube-apiserver always
// writes a bound PV's spec: capacity, access modes, source).
func holdsOnlyCachedFields(pv *corev1.PersistentVolume) bool {
	light := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pv.Name, UID: pv.UID, ResourceVersion: pv.ResourceVersion,
			Annotations: provisionedByAnnotations(pv.Annotations[AnnProvisionedBy])},
		Spec:   corev1.PersistentVolumeSpec{ClaimRef: pv.Spec.ClaimRef},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	return cmp.Equal(light, pv)
}

// decodingSeeds: claims and PVs in each state the shortcut distinguishes,
// and lists of them.
func decodingSeeds() []runtime.Object {
	now := metav1.Now()
	pending := settledTestClaim(func(c *corev1.PersistentVolumeClaim) {
		c.Spec.VolumeName = ""
		c.Status.Phase = corev1.ClaimPending
	})
	deleting := settledTestClaim(func(c *corev1.PersistentVolumeClaim) { c.DeletionTimestamp = &now })
	released := settledTestVolume(func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeReleased })
	noClaim := settledTestVolume(func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef = nil })
	return []runtime.Object{
		settledTestClaim(), pending, deleting,
		settledTestVolume(), released, noClaim,
		&corev1.PersistentVolumeClaimList{ListMeta: metav1.ListMeta{ResourceVersion: "40"},
			Items: []corev1.PersistentVolumeClaim{*settledTestClaim(), *pending, *deleting}},
		&corev1.PersistentVolumeList{ListMeta: metav1.ListMeta{ResourceVersion: "41", Continue: "next"},
			Items: []corev1.PersistentVolume{*settledTestVolume(), *released, *noClaim}},
	}
}

// addCorpusDir adds each file of dir written in Go's fuzz corpus format
// with a single []byte value.
func addCorpusDir(f *testing.F, dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		content, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return n, err
		}
		data, err := parseCorpusFile(string(content))
		if err != nil {
			return n, fmt.Errorf("%s: %w", e.Name(), err)
		}
		f.Add(data)
		n++
	}
	return n, nil
}

// parseCorpusFile reads "go test fuzz v1" followed by one []byte("...").
func parseCorpusFile(content string) ([]byte, error) {
	lines := strings.Split(strings.TrimSpace(content), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" {
		return nil, fmt.Errorf("not a corpus file with one value")
	}
	quoted, hasPrefix := strings.CutPrefix(lines[1], "[]byte(")
	quoted, hasSuffix := strings.CutSuffix(quoted, ")")
	if !hasPrefix || !hasSuffix {
		return nil, fmt.Errorf("the value is not a []byte")
	}
	s, err := strconv.Unquote(quoted)
	return []byte(s), err
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cachedecode is what the controller's informer caches keep of
// claims and PVs, and the protobuf decoder that reads a settled claim's or a
// bound PV's few kept fields straight from kube-apiserver's encoding. The
// controller calls CoreV1 for the client its claim and PV informers list
// and watch with, UnsettledClaimEvent as the claim watch's filter, and Trim
// as the informers' transform.
package cachedecode

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kubeprov/external-storage/lib/internal/ownclient"
)

// The claim and PV informers of NewInformerFactory receive every claim and
// PV of the cluster, nearly all of them settled, and keep little or nothing
// of those; decoding them whole was most of a restart's work, and all of it
// garbage at once. So these informers list and watch through a client of
// their own whose protobuf decoder reads a settled claim's or bound PV's few
// cached fields straight from the wire and decodes everything else whole.
// BenchmarkSettledDecoding compares the two.
//
// What the caches keep (trim.go) is this package's too: the differential
// fuzz target holds the decoder to it.

// AnnProvisionedBy is the annotation of a bound PV that the cache keeps:
// lib/controller's AnnProvisionedBy.
const AnnProvisionedBy = "pv.kubernetes.io/provisioned-by"

// CoreV1 returns the core/v1 client the claim and PV informers
// list and watch with: client's connection, credentials and rate limit,
// protobuf always, and settledDecoder. Nil when client has no REST client
// to share (a fake clientset): the informers then use client itself.
func CoreV1(client kubernetes.Interface) corev1client.CoreV1Interface {
	content := ownclient.Protobuf(settledDecoding{scheme.Codecs.WithoutConversion()})
	c, ok := ownclient.CoreV1(client, content, ownclient.Limiter(client))
	if !ok {
		return nil
	}
	return c
}

// settledDecoding is the scheme's serializers with settledDecoder in place
// of the protobuf decoder.
type settledDecoding struct {
	runtime.NegotiatedSerializer
}

func (s settledDecoding) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := slices.Clone(s.NegotiatedSerializer.SupportedMediaTypes())
	for i := range infos {
		if infos[i].MediaType == runtime.ContentTypeProtobuf {
			infos[i].Serializer = settledDecoder{infos[i].Serializer}
		}
	}
	return infos
}

// settledDecoder decodes a watch event's settled claim as a settledClaim
// and bound PV as what the cache keeps of it. Everything else (lists are
// read by ListClaims and ListVolumes), and anything it cannot read, goes to
// the scheme's decoder, which decodes it whole (or says what is wrong).
type settledDecoder struct {
	runtime.Serializer
}

var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00} // "k8s\x00", before a runtime.Unknown

func (d settledDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	apiVersion, kind, raw, ok := protobufEnvelope(data)
	if !ok || apiVersion != "v1" {
		return d.Serializer.Decode(data, defaults, into)
	}
	gvk := corev1.SchemeGroupVersion.WithKind(kind)
	if into != nil {
		return d.Serializer.Decode(data, defaults, into)
	}
	switch kind {
	case "PersistentVolumeClaim":
		if resourceVersion, settled := readSettledClaim(raw); settled {
			return &settledClaim{resourceVersion: string(resourceVersion), encoded: raw}, &gvk, nil
		}
	case "PersistentVolume":
		if pv, ok := readBoundVolume(raw); ok {
			return pv, &gvk, nil
		}
	}
	return d.Serializer.Decode(data, defaults, into)
}

// settledClaim is a settled claim as settledDecoder leaves it: its
// resource version, and its encoding for when the whole claim is needed
// (the claim informer's watch filter passes on its binding and its deletion
// whole). It never reaches a cache. The encoding is not copied: the watch
// decoder gives each event's object bytes of its own.
type settledClaim struct {
	metav1.TypeMeta
	resourceVersion string
	encoded         []byte
}

func (s *settledClaim) DeepCopyObject() runtime.Object {
	c := *s
	return &c
}

func (s *settledClaim) whole() (*corev1.PersistentVolumeClaim, error) {
	claim := &corev1.PersistentVolumeClaim{}
	if err := claim.Unmarshal(s.encoded); err != nil {
		return nil, fmt.Errorf("decoding a bound claim: %w", err)
	}
	return claim, nil
}

// readSettledClaim is ClaimSettled on a claim's encoding: true when the
// claim is bound and not being deleted, with its resource version; false
// too when the encoding is not one this reader is sure of.
func readSettledClaim(raw []byte) (resourceVersion []byte, settled bool) {
	fields, ok := readOnce(raw, 1, 2) // metadata, spec
	if !ok {
		return nil, false
	}
	meta, ok := readOnce(fields[1], 6, 9) // resourceVersion, deletionTimestamp
	if !ok || meta[9] != nil {
		return nil, false
	}
	spec, ok := readOnce(fields[2], 3) // volumeName
	if !ok || len(spec[3]) == 0 {
		return nil, false
	}
	return meta[6], true
}

// readBoundVolume reads a PV and returns it as Trim leaves it when
// it is bound (and not being deleted); false when it is not, or its
// encoding is not one this reader is sure of. The informer's transform
// still runs on it and stores what many PVs share (namespaces, the
// annotation) once.
func readBoundVolume(raw []byte) (*corev1.PersistentVolume, bool) {
	fields, ok := readOnce(raw, 1, 2, 3) // metadata, spec, status
	if !ok {
		return nil, false
	}
	status, ok := readOnce(fields[3], 1) // phase
	if !ok || string(status[1]) != string(corev1.VolumeBound) {
		return nil, false
	}
	meta, ok := readOnce(fields[1], 1, 5, 6, 9) // name, uid, resourceVersion, deletionTimestamp
	if !ok || meta[9] != nil {
		return nil, false
	}
	provisionedBy, ok := readProvisionedBy(fields[1])
	if !ok {
		return nil, false
	}
	spec, ok := readOnce(fields[2], 4) // claimRef
	if !ok {
		return nil, false
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: string(meta[1]), UID: types.UID(meta[5]), ResourceVersion: string(meta[6]),
			Annotations: provisionedByAnnotations(provisionedBy)},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	if spec[4] != nil {
		ref, ok := readOnce(spec[4], 2, 3, 4) // namespace, name, uid
		if !ok {
			return nil, false
		}
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: string(ref[2]), Name: string(ref[3]), UID: types.UID(ref[4])}
	}
	return pv, true
}

// readProvisionedBy reads the AnnProvisionedBy annotation of an ObjectMeta.
func readProvisionedBy(meta []byte) (string, bool) {
	var value []byte
	ok := readMessage(meta, func(num protowire.Number, field []byte) bool {
		if num != 12 { // annotations
			return true
		}
		entry, ok := readOnce(field, 1, 2) // key, value
		if ok && string(entry[1]) == AnnProvisionedBy {
			value = entry[2] // the last entry wins, as in a map
		}
		return ok
	})
	return string(value), ok
}

// fieldValues holds the values of a message's length-delimited fields by field
// number: nil for a field that is absent, empty but not nil for one that is
// present and empty.
type fieldValues [13][]byte

// readOnce returns the values of the length-delimited fields nums (each
// below 13) of a message. False when the message is malformed, or one of
// these fields has another wire type or appears twice (which a whole decode
// merges or overwrites; kube-apiserver never encodes so).
func readOnce(raw []byte, nums ...protowire.Number) (fieldValues, bool) {
	var values fieldValues
	ok := readMessage(raw, func(num protowire.Number, value []byte) bool {
		if !slices.Contains(nums, num) {
			return true
		}
		if values[num] != nil || value == nil {
			return false
		}
		values[num] = value
		return true
	})
	return values, ok
}

// readMessage calls field for each field of a message in order, with the
// value of a length-delimited field (never nil) and nil for other wire
// types, until field returns false. False when the message is malformed
// or field returned false.
func readMessage(raw []byte, field func(num protowire.Number, value []byte) bool) bool {
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return false
		}
		raw = raw[n:]
		var value []byte
		if typ == protowire.BytesType {
			value, n = protowire.ConsumeBytes(raw)
			if n >= 0 && value == nil {
				value = raw[:0]
			}
		} else {
			n = protowire.ConsumeFieldValue(num, typ, raw)
		}
		if n < 0 {
			return false
		}
		raw = raw[n:]
		if !field(num, value) {
			return false
		}
	}
	return true
}

// protobufEnvelope reads the type and encoded object of kube-apiserver's
// protobuf envelope (a runtime.Unknown after protobufPrefix).
func protobufEnvelope(data []byte) (apiVersion, kind string, raw []byte, ok bool) {
	if len(data) < len(protobufPrefix) || string(data[:len(protobufPrefix)]) != string(protobufPrefix) {
		return "", "", nil, false
	}
	fields, ok := readOnce(data[len(protobufPrefix):], 1, 2, 3) // typeMeta, raw, contentEncoding
	if !ok || len(fields[3]) != 0 {
		return "", "", nil, false
	}
	typeMeta, ok := readOnce(fields[1], 1, 2)
	if !ok {
		return "", "", nil, false
	}
	return string(typeMeta[1]), string(typeMeta[2]), fields[2], true
}

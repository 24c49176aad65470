// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/lib/recordkey"
)

// sign binds an entry to this journal, its key (the PV name), its class and
// the journal's generation; j.mu is held.
func (j *Journal) sign(key []byte, pvName, entry, classData string) string {
	return recordkey.Sign(key, j.signedFields(j.gen, pvName, entry, classData)...)
}

// signedFields are what a signature covers. Generation 0 adds nothing, so
// that the entries of a journal whose generation never moved (those of
// earlier versions) verify as they were signed.
func (j *Journal) signedFields(gen uint64, pvName, entry, classData string) []string {
	fields := []string{journalSignatureDomain, j.namespace, j.name, pvName, entry, classData}
	if gen > 0 {
		fields = append(fields, strconv.FormatUint(gen, 10))
	}
	return fields
}

// signedEntry appends the signature to an entry as its last JSON field.
func signedEntry(entry []byte, signature string) string {
	return string(entry[:len(entry)-1]) + journalSignatureField + signature + `"}`
}

// SignedEntry is an encoded entry as journal namespace/name stores it under
// pvName, signed with key: what a controller wrote, for tests.
func SignedEntry(key []byte, namespace, name, pvName string, entry []byte, classData string) string {
	j := &Journal{namespace: namespace, name: name}
	return signedEntry(entry, j.sign(key, pvName, string(entry), classData))
}

// splitSignedEntry returns the entry as it was signed and its signature;
// ok is false when data carries none.
func splitSignedEntry(data string) (entry, signature string, ok bool) {
	n := len(journalSignatureField) + journalSignatureHex + len(`"}`)
	if len(data) <= n {
		return data, "", false
	}
	head, tail := data[:len(data)-n], data[len(data)-n:]
	if !strings.HasPrefix(tail, journalSignatureField) || !strings.HasSuffix(tail, `"}`) {
		return data, "", false
	}
	return head + "}", tail[len(journalSignatureField) : len(journalSignatureField)+journalSignatureHex], true
}

// IsClassKey tells the keys of classes from those of entries.
func IsClassKey(key string) bool { return strings.HasPrefix(key, journalClassKeyPrefix) }

// ClassKey names a class by its content: entries recorded with the same
// class share one copy in their ConfigMap.
func ClassKey(classData []byte) string {
	sum := sha256.Sum256(classData)
	return journalClassKeyPrefix + hex.EncodeToString(sum[:8])
}

// encodeClass returns class as entries refer to it, reusing the last
// encoding while the class is the same: objects from the informers' cache
// are never changed in place, so the same object at the same version
// encodes the same.
func (j *Journal) encodeClass(class *storagev1.StorageClass) (*encodedClass, error) {
	if enc := j.lastClass.Load(); enc != nil && enc.class == class && (class == nil || enc.resourceVersion == class.ResourceVersion) {
		return enc, nil
	}
	data, err := json.Marshal(StrippedClass(class))
	if err != nil {
		return nil, fmt.Errorf("encoding in-flight journal entry: %w", err)
	}
	enc := &encodedClass{class: class, data: data, key: ClassKey(data)}
	if class != nil {
		enc.resourceVersion = class.ResourceVersion
	}
	j.lastClass.Store(enc)
	return enc, nil
}

// StrippedClaim keeps what Provision may read: the claim's identity, its
// spec, the system annotations (set by Kubernetes, kept in every entry) and the labels and annotations the
// provisioner declares.
func StrippedClaim(c *corev1.PersistentVolumeClaim, labels, annotations, systemAnnotations []string) *corev1.PersistentVolumeClaim {
	if c == nil {
		return nil
	}
	return &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{Kind: "PersistentVolumeClaim", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, UID: c.UID,
			Labels: pick(c.Labels, labels), Annotations: pick(c.Annotations, slices.Concat(annotations, systemAnnotations))},
		Spec: *c.Spec.DeepCopy(),
	}
}

// metadataDropped reports whether stripped lacks a label or annotation of
// the claim. kubectl's last-applied-configuration does not count: it is
// kubectl's record of the claim, not something a provisioner reads.
func metadataDropped(claim, stripped *corev1.PersistentVolumeClaim) bool {
	annotations := len(claim.Annotations)
	if _, ok := claim.Annotations[lastAppliedAnnotation]; ok {
		annotations--
	}
	return len(stripped.Labels) < len(claim.Labels) || len(stripped.Annotations) < annotations
}

// pick returns the entries of m under keys; nil when there are none.
func pick(m map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// StrippedClass is what an entry keeps of a class: all but its metadata
// beyond name, UID, labels and annotations (less kubectl's).
func StrippedClass(c *storagev1.StorageClass) *storagev1.StorageClass {
	if c == nil {
		return nil
	}
	out := c.DeepCopy()
	out.ObjectMeta = metav1.ObjectMeta{Name: c.Name, UID: c.UID, Labels: c.Labels, Annotations: withoutLastApplied(c.Annotations)}
	return out
}

func withoutLastApplied(a map[string]string) map[string]string {
	if _, ok := a[lastAppliedAnnotation]; !ok {
		return a
	}
	out := maps.Clone(a)
	delete(out, lastAppliedAnnotation)
	return out
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// RecordKeySecret is the Secret, in the provisioner's namespace, holding the
// key that signs the pod configuration recorded on PVs (AnnPodSignature).
// It is created with a random key on first start.
const RecordKeySecret = "flex-provisioner-record-key"

const recordKeyField = "key"

// LoadRecordKey reads the record key, creating it when it does not exist.
func LoadRecordKey(ctx context.Context, client kubernetes.Interface, namespace string) ([]byte, error) {
	secrets := client.CoreV1().Secrets(namespace)
	for range 2 {
		s, err := secrets.Get(ctx, RecordKeySecret, metav1.GetOptions{})
		if err == nil {
			if key := s.Data[recordKeyField]; len(key) >= 32 {
				return key, nil
			}
			return nil, fmt.Errorf("secret %s/%s has no key of at least 32 bytes in %q", namespace, RecordKeySecret, recordKeyField)
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading the record key secret %s/%s: %w", namespace, RecordKeySecret, err)
		}
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: RecordKeySecret, Namespace: namespace,
				Labels: map[string]string{LabelManagedBy: ManagedBy}},
			Data: map[string][]byte{recordKeyField: key},
		}, metav1.CreateOptions{})
		if err == nil {
			return key, nil
		}
		if !apierrors.IsAlreadyExists(err) { // another replica won: read its key
			return nil, fmt.Errorf("creating the record key secret %s/%s: %w", namespace, RecordKeySecret, err)
		}
	}
	return nil, errors.New("the record key secret keeps changing")
}

// signRecord signs a PV's recorded pod configuration, bound to the PV's name
// so that a record cannot be copied from one PV to another.
func signRecord(key []byte, pvName, record string) string {
	if len(key) == 0 {
		// A launcher built without its key must not produce signatures
		// anyone could compute; verifyRecord then refuses every record.
		return ""
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(pvName))
	mac.Write([]byte{0})
	mac.Write([]byte(record))
	return hex.EncodeToString(mac.Sum(nil))
}

// signPod signs a pod as built (its JSON), bound to its namespace and name.
// A PV name has no "/", so no pod's signature is a PV record's.
func signPod(key []byte, namespace, name string, pod []byte) string {
	return signRecord(key, "pod/"+namespace+"/"+name, string(pod))
}

// verifyRecord checks a PV's recorded pod configuration against its signature.
func verifyRecord(key []byte, pvName string, ann map[string]string) error {
	if len(key) == 0 {
		return errors.New("the provisioner has no record key (PodLauncher.RecordKey)")
	}
	want := signRecord(key, pvName, ann[AnnPod])
	got, ok := ann[AnnPodSignature]
	if !ok {
		return fmt.Errorf("annotation %s is missing, so annotation %s cannot be trusted", AnnPodSignature, AnnPod)
	}
	if !hmac.Equal([]byte(got), []byte(want)) {
		return fmt.Errorf("annotation %s does not match its signature %s: it was not written by this provisioner", AnnPod, AnnPodSignature)
	}
	return nil
}

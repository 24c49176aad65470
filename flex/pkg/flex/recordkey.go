// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/kubeprov/external-storage/lib/recordkey"
)

// RecordKeySecret is the Secret, in the provisioner's namespace, holding the
// key that signs the pod configuration recorded on PVs (AnnPodSignature).
// It is created with a random key on first start.
const RecordKeySecret = "flex-provisioner-record-key"

// LoadRecordKey reads the record key, creating it when it does not exist.
func LoadRecordKey(ctx context.Context, client kubernetes.Interface, namespace string) ([]byte, error) {
	return recordkey.Load(ctx, client.CoreV1().Secrets(namespace), RecordKeySecret, map[string]string{LabelManagedBy: ManagedBy})
}

// signRecord signs a PV's recorded pod configuration, bound to the PV's name
// so that a record cannot be copied from one PV to another.
func signRecord(key []byte, pvName, record string) string {
	return recordkey.Sign(key, pvName, record)
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
	got, ok := ann[AnnPodSignature]
	if !ok {
		return fmt.Errorf("annotation %s is missing, so annotation %s cannot be trusted", AnnPodSignature, AnnPod)
	}
	if !recordkey.Verify(key, got, pvName, ann[AnnPod]) {
		return fmt.Errorf("annotation %s does not match its signature %s: it was not written by this provisioner", AnnPod, AnnPodSignature)
	}
	return nil
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package flex

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubeprov/external-storage/lib/capacity"
	"github.com/kubeprov/external-storage/lib/controller"
)

// Keys of the driver input that the provisioner fills in. Every other key is a
// StorageClass parameter (or, for the container launcher, a property of the
// provisioner ConfigMap). The kubernetes.io/ keys follow the FlexVolume
// convention that driver authors already know (kubernetes.io/pvOrVolumeName);
// requestBytes, requestMiB and requestGiB are the old flex provisioner's keys.
const (
	KeyPVName         = "kubernetes.io/pvOrVolumeName"
	KeyPVCName        = "kubernetes.io/pvc/name"
	KeyPVCNamespace   = "kubernetes.io/pvc/namespace"
	KeyPVCUID         = "kubernetes.io/pvc/uid"
	KeyStorageClass   = "kubernetes.io/storageClassName"
	KeyReclaimPolicy  = "kubernetes.io/reclaimPolicy"
	KeyAccessModes    = "kubernetes.io/accessModes"
	KeyVolumeMode     = "kubernetes.io/volumeMode"
	KeySelectedNode   = "kubernetes.io/selectedNode"
	KeyRequestBytes   = "requestBytes"
	KeyRequestMiB     = "requestMiB"
	KeyRequestGiB     = "requestGiB"
	reservedKeyPrefix = "kubernetes.io/"
)

// reservedEnv names the environment variable each reserved key becomes in a
// provisioning pod; other keys become FLEX_PARAM_<KEY> (see EnvName).
var reservedEnv = map[string]string{
	KeyPVName:        "FLEX_PV_NAME",
	KeyPVCName:       "FLEX_PVC_NAME",
	KeyPVCNamespace:  "FLEX_PVC_NAMESPACE",
	KeyPVCUID:        "FLEX_PVC_UID",
	KeyStorageClass:  "FLEX_STORAGE_CLASS",
	KeyReclaimPolicy: "FLEX_RECLAIM_POLICY",
	KeyAccessModes:   "FLEX_ACCESS_MODES",
	KeyVolumeMode:    "FLEX_VOLUME_MODE",
	KeySelectedNode:  "FLEX_SELECTED_NODE",
	KeyRequestBytes:  "FLEX_REQUEST_BYTES",
	KeyRequestMiB:    "FLEX_REQUEST_MIB",
	KeyRequestGiB:    "FLEX_REQUEST_GIB",
}

// isReserved reports whether a parameter key would shadow a key the
// provisioner fills in.
func isReserved(key string) bool {
	_, ok := reservedEnv[key]
	return ok || strings.HasPrefix(key, reservedKeyPrefix)
}

// Input is what a driver receives: a flat JSON object of strings, so that a
// shell script reads any key with `jq -r '.key'`.
type Input map[string]string

// NewInput builds the provision input of a claim: the class parameters plus
// the reserved keys. A parameter that uses a reserved key is refused, since
// the driver could not tell which of the two it got.
func NewInput(o controller.ProvisionOptions) (Input, error) {
	in := Input{}
	if o.StorageClass != nil {
		var bad []string
		for k, v := range o.StorageClass.Parameters {
			if isReserved(k) {
				bad = append(bad, k)
				continue
			}
			in[k] = v
		}
		if len(bad) > 0 {
			slices.Sort(bad)
			return nil, fmt.Errorf("StorageClass %q: parameters %s are reserved for what the provisioner passes to the driver (keys starting with %s, and %s, %s, %s): rename them",
				o.StorageClass.Name, strings.Join(bad, ", "), reservedKeyPrefix, KeyRequestBytes, KeyRequestMiB, KeyRequestGiB)
		}
		in[KeyStorageClass] = o.StorageClass.Name
		policy := corev1.PersistentVolumeReclaimDelete
		if o.StorageClass.ReclaimPolicy != nil {
			policy = *o.StorageClass.ReclaimPolicy
		}
		in[KeyReclaimPolicy] = string(policy)
	}
	in[KeyPVName] = o.PVName
	in[KeyPVCName] = o.PVC.Name
	in[KeyPVCNamespace] = o.PVC.Namespace
	in[KeyPVCUID] = string(o.PVC.UID)
	modes := make([]string, 0, len(o.PVC.Spec.AccessModes))
	for _, m := range o.PVC.Spec.AccessModes {
		modes = append(modes, string(m))
	}
	in[KeyAccessModes] = strings.Join(modes, ",")
	mode := corev1.PersistentVolumeFilesystem
	if o.PVC.Spec.VolumeMode != nil {
		mode = *o.PVC.Spec.VolumeMode
	}
	in[KeyVolumeMode] = string(mode)
	if o.SelectedNodeName != "" {
		in[KeySelectedNode] = o.SelectedNodeName
	}
	// Bytes rounds a fractional request up, and refuses one beyond int64
	// that Value would wrap around.
	bytes, err := capacity.Bytes(o.PVC.Spec.Resources.Requests[corev1.ResourceStorage])
	if err != nil {
		return nil, fmt.Errorf("claim %s/%s: storage request: %w: request less", o.PVC.Namespace, o.PVC.Name, err)
	}
	in[KeyRequestBytes] = fmt.Sprint(bytes)
	in[KeyRequestMiB] = strconv.FormatInt(capacity.RoundUp(bytes, 1<<20), 10)
	in[KeyRequestGiB] = strconv.FormatInt(capacity.RoundUp(bytes, capacity.GiB), 10)
	return in, nil
}

// JSON is the input as the driver gets it; keys are sorted, so the same
// input always gives the same text.
func (in Input) JSON() string {
	b, _ := json.Marshal(map[string]string(in)) // a map of strings always marshals
	return string(b)
}

// ParseInput reads an input recorded on a PV.
func ParseInput(s string) (Input, error) {
	var in Input
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		return nil, err
	}
	if in == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	return in, nil
}

// Clone returns a copy that can be changed freely.
func (in Input) Clone() Input { return maps.Clone(in) }

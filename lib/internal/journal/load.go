// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/gate"
	"github.com/kubeprov/external-storage/lib/recordkey"
)

// Load reads the journal and returns its entries by PV name, and apart
// the entries whose signature does not verify (or that cannot be read):
// those stay on the server as they are and are never acted upon. A second
// entry of one PV name is dropped (the next write of its ConfigMap removes
// it).
func (j *Journal) Load(ctx context.Context) (map[string]Entry, map[string]Unverified, error) {
	key, err := j.signingKey(ctx, true)
	if err != nil {
		return nil, nil, err
	}
	objects, err := j.readShards(ctx)
	if err != nil {
		return nil, nil, err
	}
	out, unverified := map[string]Entry{}, map[string]Unverified{}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.reset()
	j.shardsInUse = shardsRecorded(objects[0])
	for i, cm := range objects {
		s := j.shards[i]
		s.object = cm
		if cm == nil {
			continue
		}
		maps.Copy(s.committed, cm.Data)
		for pvName, data := range cm.Data {
			if !IsClassKey(pvName) {
				j.loadEntry(ctx, key, i, pvName, data, out, unverified)
			}
		}
	}
	return out, unverified, nil
}

// readShards reads the ConfigMaps the first one says are in use (nil for
// one that does not exist).
func (j *Journal) readShards(ctx context.Context) ([]*corev1.ConfigMap, error) {
	objects := make([]*corev1.ConfigMap, Shards)
	for i := range Shards {
		if i > 0 && i >= shardsRecorded(objects[0]) {
			break
		}
		name := ShardName(j.name, i)
		cm, err := j.client.CoreV1().ConfigMaps(j.namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm, err = nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading in-flight journal %s/%s: %w", j.namespace, name, err)
		}
		objects[i] = cm
	}
	return objects, nil
}

// loadEntry adds one entry of shard i to out, or to unverified (and keeps
// it as it is) when it cannot be acted upon; j.mu is held.
func (j *Journal) loadEntry(ctx context.Context, key []byte, i int, pvName, data string, out map[string]Entry, unverified map[string]Unverified) {
	e, classData, reason := j.verify(key, pvName, data, j.shards[i].object.Data)
	if reason != "" {
		unverified[pvName] = Unverified{Claim: e.Claim, Reason: reason}
		j.keepRaw(i, pvName, data, e.ClassKey, classData)
		return
	}
	if _, dup := j.shardOf[pvName]; dup {
		klog.FromContext(ctx).Error(nil, "Dropping a second in-flight journal entry of one volume", "pv", pvName, "configMap", j.shards[i].name)
		return
	}
	out[pvName] = e
	j.add(i, pvName, e.Claim.Namespace, data, e.ClassKey, classData)
}

// verify reads one entry and checks its signature; reason says why it cannot
// be acted upon ("" if it can). What could be read is returned either way.
func (j *Journal) verify(key []byte, pvName, data string, configMap map[string]string) (e Entry, classData, reason string) {
	entry, signature, signed := splitSignedEntry(data)
	if err := json.Unmarshal([]byte(entry), &e); err != nil {
		return Entry{}, "", fmt.Sprintf("it cannot be read: %v", err)
	}
	if e.ClassKey != "" && IsClassKey(e.ClassKey) {
		classData = configMap[e.ClassKey]
	}
	check := gate.Entry{Signed: signed, Generation: j.gen, KeySecret: j.namespace + "/" + KeySecret}
	if signed {
		check.Current = recordkey.Verify(key, signature, j.signedFields(j.gen, pvName, entry, classData)...)
		check.Earlier = !check.Current && j.gen > 0 && recordkey.Verify(key, signature, j.signedFields(j.gen-1, pvName, entry, classData)...)
	}
	if err := gate.FreshEntry(check); err != nil {
		return e, classData, err.(*gate.Refusal).Reason //nolint:errorlint // FreshEntry returns only Refusals
	}
	switch {
	case e.Claim == nil || classData == "":
		return e, classData, "it names no claim or no class"
	}
	var class storagev1.StorageClass
	if err := json.Unmarshal([]byte(classData), &class); err != nil {
		return e, classData, fmt.Sprintf("its class cannot be read: %v", err)
	}
	e.Class = &class
	return e, classData, ""
}

// shardsRecorded is how many ConfigMaps the first one says are in use: 0
// without it, 1 when it does not say (the format before shards), all when
// what it says cannot be read.
func shardsRecorded(first *corev1.ConfigMap) int {
	if first == nil {
		return 0
	}
	v, ok := first.Annotations[ShardsAnnotation]
	if !ok {
		return 1
	}
	var n int
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil || n < 1 || n > Shards {
		return Shards
	}
	return n
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"encoding/json"
	"fmt"
)

// Record makes the entry durable before it returns: only then may an asset
// be created for pvName.
func (j *Journal) Record(ctx context.Context, pvName string, e Entry) error {
	signingKey, err := j.signingKey(ctx, false)
	if err != nil {
		return err
	}
	var labels, annotations []string
	declared := j.MetadataKeys != nil
	if declared {
		labels, annotations = j.MetadataKeys(e.Class)
	}
	enc, err := j.encodeClass(e.Class)
	if err != nil {
		return err
	}
	classData, key := enc.data, enc.key
	stripped := StrippedClaim(e.Claim, labels, annotations, j.systemAnnotations)
	unsigned, err := json.Marshal(Entry{Claim: stripped, ClassKey: key, SelectedNode: e.SelectedNode,
		ClaimIncomplete: !declared && metadataDropped(e.Claim, stripped), Lease: j.Term.Load()})
	if err != nil {
		return fmt.Errorf("encoding in-flight journal entry: %w", err)
	}
	if len(unsigned)+len(journalSignatureField)+journalSignatureHex+len(`"`) > EntryMaxBytes {
		return ErrEntrySize
	}
	namespace := e.Claim.Namespace
	j.mu.Lock()
	// Signed under the lock: the generation must not move between signing
	// and adding, or the entry would be written over an old one.
	data := signedEntry(unsigned, j.sign(signingKey, pvName, string(unsigned), string(classData)))
	// An entry kept for this PV name (unverified, or left to an admin) is
	// replaced by this one, which the claim itself vouches for.
	j.unkeep(pvName)
	if shard, ok := j.shardOf[pvName]; ok && j.shards[shard].entries[pvName] == string(data) {
		if s := j.shards[shard]; s.committed[pvName] == string(data) && s.committed[key] == string(classData) {
			j.mu.Unlock()
			return nil // recorded already (a retry, or an operation resumed at start)
		}
		return j.waitForWrite(ctx, shard) // recorded by an attempt whose write failed
	}
	// A removal not yet written: the server still has this very entry.
	for i, s := range j.shards {
		if s.committed[pvName] == string(data) && s.committed[key] == string(classData) {
			j.drop(pvName)
			room := s.size + len(data)
			if s.classRefs[key] == 0 {
				room += len(classData)
			}
			if j.nsSize[namespace]+len(data) > j.namespaceMaxBytes || room > j.shardMaxBytes {
				break
			}
			j.add(i, pvName, namespace, string(data), key, string(classData))
			j.mu.Unlock()
			return nil
		}
	}
	// The entry of an earlier record of this PV name is replaced.
	oldShard, hadOld := j.shardOf[pvName]
	var oldData, oldClassKey, oldClassData, oldNamespace string
	if hadOld {
		s := j.shards[oldShard]
		oldData, oldClassKey, oldNamespace = s.entries[pvName], s.classOf[pvName], j.namespaceOf[pvName]
		oldClassData = s.classes[oldClassKey]
		j.drop(pvName)
	}
	shard := -1
	if j.nsSize[namespace]+len(data) > j.namespaceMaxBytes {
		err = ErrNamespaceFull
	} else if shard = j.shardWithRoom(len(data), key, len(classData)); shard < 0 {
		err = ErrFull
	}
	if err != nil {
		if hadOld {
			j.add(oldShard, pvName, oldNamespace, oldData, oldClassKey, oldClassData)
		}
		j.mu.Unlock()
		return err
	}
	j.add(shard, pvName, namespace, string(data), key, string(classData))
	return j.waitForWrite(ctx, shard)
}

// RecordAsset adds the backend's ID of its asset to the entry of pvName and
// has it written at once, without waiting for the write: IDs that arrive
// together share it, and until it is done a restart finds the entry as it
// was, which is what it found before there were IDs.
func (j *Journal) RecordAsset(pvName, id string) error {
	if err := j.rewrite(pvName, func(e *Entry) { e.AssetID = id }); err != nil {
		return err
	}
	j.Poke()
	return nil
}

// Adopt records the current Lease term in the entry of pvName: an operation
// resumed under this term is this term's, so a later restart does not take
// the earlier holder for another identity.
func (j *Journal) Adopt(pvName string) error {
	term := j.Term.Load()
	return j.rewrite(pvName, func(e *Entry) { e.Lease = term })
}

// rewrite changes the entry of pvName, if it is still recorded, and signs it
// again; the change is written with the journal's next write.
func (j *Journal) rewrite(pvName string, change func(*Entry)) error {
	j.keyMu.Lock()
	key := j.key
	j.keyMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	shard, ok := j.shardOf[pvName]
	if !ok || key == nil {
		return nil // the operation is over
	}
	s := j.shards[shard]
	old := s.entries[pvName]
	unsigned, _, _ := splitSignedEntry(old)
	var e Entry
	if err := json.Unmarshal([]byte(unsigned), &e); err != nil {
		return fmt.Errorf("reading in-flight journal entry %s: %w", pvName, err)
	}
	change(&e)
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encoding in-flight journal entry: %w", err)
	}
	data := signedEntry(b, j.sign(key, pvName, string(b), s.classes[s.classOf[pvName]]))
	if len(data) > EntryMaxBytes {
		return ErrEntrySize
	}
	s.entries[pvName] = data
	s.size += len(data) - len(old)
	j.nsSize[j.namespaceOf[pvName]] += len(data) - len(old)
	return nil
}

// waitForWrite waits for the next write of a shard; j.mu is held, and
// released.
func (j *Journal) waitForWrite(ctx context.Context, shard int) error {
	done := make(chan error, 1)
	j.shards[shard].waiters = append(j.shards[shard].waiters, done)
	j.mu.Unlock()
	j.Poke()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

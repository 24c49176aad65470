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
	unsigned, enc, err := j.encodeEntry(e)
	if err != nil {
		return err
	}
	r := recording{pvName: pvName, namespace: e.Claim.Namespace, classKey: enc.key, classData: string(enc.data)}
	j.mu.Lock()
	// Signed under the lock: the generation must not move between signing
	// and adding, or the entry would be written over an old one.
	r.data = signedEntry(unsigned, j.sign(signingKey, pvName, string(unsigned), r.classData))
	// An entry kept for this PV name (unverified, or left to an admin) is
	// replaced by this one, which the claim itself vouches for.
	j.unkeep(pvName)
	if shard, ok := j.shardOf[pvName]; ok && j.shards[shard].entries[pvName] == r.data {
		if r.committedIn(j.shards[shard]) {
			j.mu.Unlock()
			return nil // recorded already (a retry, or an operation resumed at start)
		}
		return j.waitForWrite(ctx, shard) // recorded by an attempt whose write failed
	}
	if j.unremove(r) {
		j.mu.Unlock()
		return nil
	}
	shard, err := j.replace(r)
	if err != nil {
		j.mu.Unlock()
		return err
	}
	return j.waitForWrite(ctx, shard)
}

// recording is an entry as the journal holds it: signed, with its class.
type recording struct {
	pvName, namespace, data, classKey, classData string
}

// committedIn reports whether the server holds this very entry, and its
// class, in shard s.
func (r recording) committedIn(s *journalShard) bool {
	return s.committed[r.pvName] == r.data && s.committed[r.classKey] == r.classData
}

// encodeEntry encodes what the journal keeps of e, unsigned, and its class;
// an entry that would take more than EntryMaxBytes signed is refused.
func (j *Journal) encodeEntry(e Entry) ([]byte, *encodedClass, error) {
	var labels, annotations []string
	declared := j.MetadataKeys != nil
	if declared {
		labels, annotations = j.MetadataKeys(e.Class)
	}
	enc, err := j.encodeClass(e.Class)
	if err != nil {
		return nil, nil, err
	}
	stripped := StrippedClaim(e.Claim, labels, annotations, j.systemAnnotations)
	unsigned, err := json.Marshal(Entry{Claim: stripped, ClassKey: enc.key, SelectedNode: e.SelectedNode,
		ClaimIncomplete: !declared && metadataDropped(e.Claim, stripped), Lease: j.Term.Load()})
	if err != nil {
		return nil, nil, fmt.Errorf("encoding in-flight journal entry: %w", err)
	}
	if len(unsigned)+len(journalSignatureField)+journalSignatureHex+len(`"`) > EntryMaxBytes {
		return nil, nil, ErrEntrySize
	}
	return unsigned, enc, nil
}

// unremove takes back a removal not yet written: the server still has this
// very entry, so it goes back into its shard without a write, if it fits
// there. j.mu is held.
func (j *Journal) unremove(r recording) bool {
	for i, s := range j.shards {
		if !r.committedIn(s) {
			continue
		}
		j.drop(r.pvName)
		if j.namespaceFull(r.namespace, len(r.data)) || !s.fits(len(r.data), r.classKey, len(r.classData), j.shardMaxBytes) {
			return false
		}
		j.addRecording(i, r)
		return true
	}
	return false
}

// replace puts r in the first shard with room, in place of the entry of an
// earlier record of its PV name, which stays when r fits nowhere. j.mu is
// held.
func (j *Journal) replace(r recording) (int, error) {
	old, oldShard, hadOld := j.recordingOf(r.pvName)
	if hadOld {
		j.drop(r.pvName)
	}
	shard, err := j.shardFor(r)
	if err != nil {
		if hadOld {
			j.addRecording(oldShard, old)
		}
		return -1, err
	}
	j.addRecording(shard, r)
	return shard, nil
}

// shardFor returns the shard r is to go to: ErrNamespaceFull when the
// entries of its claim's namespace would take too much, ErrFull when no
// shard has room. j.mu is held.
func (j *Journal) shardFor(r recording) (int, error) {
	if j.namespaceFull(r.namespace, len(r.data)) {
		return -1, ErrNamespaceFull
	}
	if shard := j.shardWithRoom(len(r.data), r.classKey, len(r.classData)); shard >= 0 {
		return shard, nil
	}
	return -1, ErrFull
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

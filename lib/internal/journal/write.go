// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// shardWrite is one ConfigMap to write in a flush.
type shardWrite struct {
	index   int
	object  *corev1.ConfigMap
	desired map[string]string
	waiters []chan error
	write   bool
}

// Flush writes every shard whose content changed, the first one first: it
// says how many shards are in use, so it is written before a shard beyond
// that number is.
func (j *Journal) Flush(ctx context.Context) {
	j.flushMu.Lock()
	defer j.flushMu.Unlock()
	removing := j.advanceForRemovals(ctx)
	j.mu.Lock()
	jobs, inUse := j.shardWrites(removing)
	shardsInUse := max(inUse, j.shardsInUse)
	jobs = j.firstShardFirst(jobs, shardsInUse, removing)
	j.mu.Unlock()
	j.runWrites(ctx, jobs, shardsInUse)
}

// shardWrites lists the shards to write, or whose waiters to answer, and
// how many shards are in use: all up to the last with a ConfigMap or
// content. Their waiters are taken from them. j.mu is held.
func (j *Journal) shardWrites(removing bool) (jobs []shardWrite, inUse int) {
	for i, s := range j.shards {
		if s.neverUsed() {
			continue // nothing to write or to answer
		}
		job := j.shardWriteOf(i, s, removing)
		if s.object != nil || len(job.desired) > 0 {
			inUse = i + 1
		}
		if job.write || len(job.waiters) > 0 {
			jobs = append(jobs, job)
		}
	}
	return jobs, inUse
}

// neverUsed reports whether a shard has neither a ConfigMap nor anything to
// write or to answer.
func (s *journalShard) neverUsed() bool {
	return s.object == nil && len(s.entries)+len(s.classes)+len(s.kept)+len(s.committed)+len(s.waiters) == 0
}

// shardWriteOf is the write of shard i, taking its waiters: a write when its
// content changed, none for a ConfigMap that would be created empty. j.mu
// is held.
func (j *Journal) shardWriteOf(i int, s *journalShard, removing bool) shardWrite {
	desired := j.desired(s, removing)
	job := shardWrite{index: i, object: s.object, desired: desired, waiters: s.waiters,
		write: changed(desired, s.committed) && !(s.object == nil && len(desired) == 0)}
	s.waiters = nil
	return job
}

// firstShardFirst puts a write of the first shard at the head of jobs when
// more shards are to be in use than the server has it say: it must say so
// before they are written. j.mu is held.
func (j *Journal) firstShardFirst(jobs []shardWrite, shardsInUse int, removing bool) []shardWrite {
	if shardsInUse <= max(j.shardsInUse, 1) || (len(jobs) > 0 && jobs[0].index == 0 && jobs[0].write) {
		return jobs
	}
	s := j.shards[0]
	first := shardWrite{index: 0, object: s.object, desired: j.desired(s, removing), write: true}
	if len(jobs) > 0 && jobs[0].index == 0 {
		first.waiters = jobs[0].waiters
		jobs = jobs[1:]
	}
	return append([]shardWrite{first}, jobs...)
}

// runWrites writes the shards in order and answers their waiters; once the
// first shard's write failed no other is written, and their waiters get its
// error.
func (j *Journal) runWrites(ctx context.Context, jobs []shardWrite, shardsInUse int) {
	var firstErr error
	for _, job := range jobs {
		err := firstErr
		if err == nil && job.write {
			err = j.write(ctx, job.index, job.object, job.desired, shardsInUse)
			if job.index == 0 {
				// No shard may be written before the first says it is in use.
				firstErr = err
			}
		}
		for _, w := range job.waiters {
			w <- err
		}
	}
}

// desired is what a shard's ConfigMap is to hold: its entries, classes and
// kept entries and, unless removing, the entries that are over as the
// server has them, until the generation moves on past them. j.mu is held.
func (j *Journal) desired(s *journalShard, removing bool) map[string]string {
	desired := make(map[string]string, len(s.entries)+len(s.classes)+len(s.kept))
	if !removing {
		for _, k := range j.removed(s) {
			desired[k] = s.committed[k]
		}
	}
	maps.Copy(desired, s.kept)
	maps.Copy(desired, s.entries)
	maps.Copy(desired, s.classes)
	return desired
}

// advanceForRemovals moves the generation on when removals wait and the
// last move is journalAdvanceDelay ago, and reports whether removals may be
// written now: never before the generation has moved past the removed
// entries. flushMu is held.
func (j *Journal) advanceForRemovals(ctx context.Context) bool {
	j.mu.Lock()
	pending, urgent := j.removalsPending()
	j.mu.Unlock()
	if !pending || (!urgent && time.Since(j.lastAdvance) < j.advanceDelay) {
		return false
	}
	if err := j.advance(ctx, true); err != nil {
		klog.FromContext(ctx).Error(err, "Could not move the in-flight journal's generation on; its removals wait")
		return false
	}
	j.lastAdvance = time.Now()
	return true
}

// changed reports whether the server must be written to hold desired: an
// entry differs or is missing, a class an entry refers to is missing, or an
// entry is to be removed. Classes no entry refers to any more are removed
// with the next write, never written for themselves.
func changed(desired, committed map[string]string) bool {
	for k, v := range desired {
		if committed[k] != v {
			return true
		}
	}
	for k := range committed {
		if _, ok := desired[k]; !ok && !IsClassKey(k) {
			return true
		}
	}
	return false
}

// write makes shard index's ConfigMap hold desired, creating it if object is
// nil, and records what the server then has.
func (j *Journal) write(ctx context.Context, index int, object *corev1.ConfigMap, desired map[string]string, shardsInUse int) error {
	name := ShardName(j.name, index)
	for attempt := 0; ; attempt++ {
		written, err := j.put(ctx, index, object, desired, shardsInUse)
		j.writes.Inc()
		if err == nil {
			j.wrote(index, written, desired)
			return nil
		}
		// Only the active controller writes its journal; a conflict means the
		// object changed under us (or was created by an earlier incarnation),
		// so write our content on top of the current version once.
		if attempt == 0 && (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)) {
			if fresh, ok := j.current(ctx, name); ok {
				object = fresh
				continue
			}
		}
		return fmt.Errorf("writing in-flight journal %s/%s: %w", j.namespace, name, err)
	}
}

// put creates shard index's ConfigMap holding desired, or replaces the data
// of object with it.
func (j *Journal) put(ctx context.Context, index int, object *corev1.ConfigMap, desired map[string]string, shardsInUse int) (*corev1.ConfigMap, error) {
	if object == nil {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ShardName(j.name, index), Namespace: j.namespace,
				Labels: j.labels},
			Data: desired,
		}
		annotateShards(cm, index, shardsInUse)
		return j.writer.ConfigMaps(j.namespace).Create(ctx, cm, metav1.CreateOptions{})
	}
	// Data is replaced whole: copying the old one would cost as much
	// as the write itself.
	meta := *object
	meta.Data = nil
	cm := meta.DeepCopy()
	cm.Data = desired
	annotateShards(cm, index, shardsInUse)
	return j.writer.ConfigMaps(j.namespace).Update(ctx, cm, metav1.UpdateOptions{})
}

// annotateShards has the first shard's ConfigMap say how many shards are in
// use, when more than one is: never fewer than it said.
func annotateShards(cm *corev1.ConfigMap, index, shardsInUse int) {
	if index != 0 {
		return
	}
	n := max(shardsInUse, shardsRecorded(cm))
	if n > 1 {
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[ShardsAnnotation] = fmt.Sprint(n)
	}
}

// wrote records a write: committed holds the content; of the object only
// its metadata is needed, for the next update.
func (j *Journal) wrote(index int, written *corev1.ConfigMap, desired map[string]string) {
	written.Data = nil
	j.mu.Lock()
	s := j.shards[index]
	s.object, s.committed = written, desired
	if index == 0 {
		j.shardsInUse = max(j.shardsInUse, shardsRecorded(written))
	}
	j.mu.Unlock()
}

// current reads a shard's ConfigMap again after a write found it changed:
// nil when it is gone (it is created then); ok is false when it cannot be
// read.
func (j *Journal) current(ctx context.Context, name string) (*corev1.ConfigMap, bool) {
	fresh, err := j.writer.ConfigMaps(j.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, true
	}
	return fresh, err == nil
}

// FlushRemovals writes the removals still pending, as a merge patch of each
// ConfigMap, after moving the generation on (advance), with this instance's
// live entries signed again: safe even if another instance already writes
// the journal (after a graceful stop under leader election), because it
// touches no other key, and moves the generation on only if no other
// instance did. Classes stay: the other instance's
// entries may refer to the same ones; its next write removes those unused.
func (j *Journal) FlushRemovals(ctx context.Context) error {
	j.flushMu.Lock()
	defer j.flushMu.Unlock()
	j.mu.Lock()
	pending, _ := j.removalsPending()
	j.mu.Unlock()
	if !pending {
		return nil
	}
	resigned, err := j.advanceBeforeRemovals(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range j.removalPatches(resigned) {
		body, err := p.body()
		if err != nil {
			return err
		}
		if err := j.patch(ctx, p, body); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// advanceBeforeRemovals moves the generation on: removals are written only
// once it has moved past them, and the live entries, signed again (resigned),
// go with them. When another instance moved it already, every entry of this
// one is void: its removals are only tidying.
func (j *Journal) advanceBeforeRemovals(ctx context.Context) (resigned bool, err error) {
	err = j.advance(ctx, false)
	if errors.Is(err, errGenerationMoved) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("the removals wait for the next start: %w", err)
	}
	return true, nil
}

// removalPatch is what FlushRemovals writes to one ConfigMap: the removals,
// and the live entries when they were signed again (nil when not).
type removalPatch struct {
	index   int
	removed []string
	entries map[string]string
}

// removalPatches lists the patches of the shards that have a ConfigMap and
// removals, or live entries signed again. j.mu is taken.
func (j *Journal) removalPatches(resigned bool) []removalPatch {
	var patches []removalPatch
	j.mu.Lock()
	defer j.mu.Unlock()
	for i, s := range j.shards {
		if s.object == nil {
			continue
		}
		removed := j.removed(s)
		if len(removed) > 0 || (resigned && len(s.entries) > 0) {
			p := removalPatch{index: i, removed: removed}
			if resigned {
				p.entries = maps.Clone(s.entries)
			}
			patches = append(patches, p)
		}
	}
	return patches
}

// body is the merge patch: null for each removal, the entries as they are.
func (p removalPatch) body() ([]byte, error) {
	data := map[string]any{}
	for _, k := range p.removed {
		data[k] = nil
	}
	for k, v := range p.entries {
		data[k] = v
	}
	return json.Marshal(map[string]any{"data": data})
}

// patch writes one removal patch and records what the server then has; a
// ConfigMap that is gone has nothing to remove.
func (j *Journal) patch(ctx context.Context, p removalPatch, body []byte) error {
	name := ShardName(j.name, p.index)
	_, err := j.writer.ConfigMaps(j.namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	j.writes.Inc()
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing in-flight journal %s/%s: %w", j.namespace, name, err)
	}
	j.mu.Lock()
	for _, k := range p.removed {
		delete(j.shards[p.index].committed, k)
	}
	maps.Copy(j.shards[p.index].committed, p.entries)
	j.mu.Unlock()
	return nil
}

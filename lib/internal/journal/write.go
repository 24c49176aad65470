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
	var jobs []shardWrite
	inUse := 0
	for i, s := range j.shards {
		if s.object == nil && len(s.entries)+len(s.classes)+len(s.kept)+len(s.committed)+len(s.waiters) == 0 {
			continue // a shard never used: nothing to write or to answer
		}
		desired := j.desired(s, removing)
		job := shardWrite{index: i, object: s.object, desired: desired, waiters: s.waiters,
			write: changed(desired, s.committed) && !(s.object == nil && len(desired) == 0)}
		s.waiters = nil
		if s.object != nil || len(desired) > 0 {
			inUse = i + 1
		}
		if job.write || len(job.waiters) > 0 {
			jobs = append(jobs, job)
		}
	}
	shardsInUse := max(inUse, j.shardsInUse)
	if shardsInUse > max(j.shardsInUse, 1) && (len(jobs) == 0 || jobs[0].index != 0 || !jobs[0].write) {
		s := j.shards[0]
		first := shardWrite{index: 0, object: s.object, desired: j.desired(s, removing), write: true}
		if len(jobs) > 0 && jobs[0].index == 0 {
			first.waiters = jobs[0].waiters
			jobs = jobs[1:]
		}
		jobs = append([]shardWrite{first}, jobs...)
	}
	j.mu.Unlock()

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

func (j *Journal) write(ctx context.Context, index int, object *corev1.ConfigMap, desired map[string]string, shardsInUse int) error {
	name := ShardName(j.name, index)
	annotate := func(cm *corev1.ConfigMap) {
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
	for attempt := 0; ; attempt++ {
		var written *corev1.ConfigMap
		var err error
		if object == nil {
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: j.namespace,
					Labels: j.labels},
				Data: desired,
			}
			annotate(cm)
			written, err = j.writer.ConfigMaps(j.namespace).Create(ctx, cm, metav1.CreateOptions{})
		} else {
			// Data is replaced whole: copying the old one would cost as much
			// as the write itself.
			meta := *object
			meta.Data = nil
			cm := meta.DeepCopy()
			cm.Data = desired
			annotate(cm)
			written, err = j.writer.ConfigMaps(j.namespace).Update(ctx, cm, metav1.UpdateOptions{})
		}
		j.writes.Inc()
		if err == nil {
			// committed holds the content; of the object only its metadata
			// is needed, for the next update.
			written.Data = nil
			j.mu.Lock()
			s := j.shards[index]
			s.object, s.committed = written, desired
			if index == 0 {
				j.shardsInUse = max(j.shardsInUse, shardsRecorded(written))
			}
			j.mu.Unlock()
			return nil
		}
		// Only the active controller writes its journal; a conflict means the
		// object changed under us (or was created by an earlier incarnation),
		// so write our content on top of the current version once.
		if attempt == 0 && (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)) {
			fresh, gerr := j.writer.ConfigMaps(j.namespace).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) {
				object = nil
				continue
			}
			if gerr == nil {
				object = fresh
				continue
			}
		}
		return fmt.Errorf("writing in-flight journal %s/%s: %w", j.namespace, name, err)
	}
}

// FlushRemovals writes the removals still pending, as a merge patch of each
// ConfigMap, after moving the generation on (advance), with this instance's
// live entries signed again: safe even if another instance already writes
// the journal (after a graceful stop under leader election), because it
// touches no other key, and moves the generation on only if no other
// instance did. Classes stay: the other instance's
// entries may refer to the same ones; its next write removes those unused.
func (j *Journal) FlushRemovals(ctx context.Context) error {
	type patch struct {
		index   int
		removed []string
		entries map[string]string
	}
	j.flushMu.Lock()
	defer j.flushMu.Unlock()
	j.mu.Lock()
	pending, _ := j.removalsPending()
	j.mu.Unlock()
	if !pending {
		return nil
	}
	// Removals are written only once the generation has moved past them;
	// the live entries, signed again, go with them. When another instance
	// moved it already, every entry of this one is void: its removals are
	// only tidying.
	resigned := true
	if err := j.advance(ctx, false); errors.Is(err, errGenerationMoved) {
		resigned = false
	} else if err != nil {
		return fmt.Errorf("the removals wait for the next start: %w", err)
	}
	var patches []patch
	j.mu.Lock()
	for i, s := range j.shards {
		if s.object == nil {
			continue
		}
		removed := j.removed(s)
		if len(removed) > 0 || (resigned && len(s.entries) > 0) {
			patches = append(patches, patch{i, removed, maps.Clone(s.entries)})
		}
	}
	j.mu.Unlock()
	var errs []error
	for _, p := range patches {
		name := ShardName(j.name, p.index)
		data := map[string]any{}
		for _, k := range p.removed {
			data[k] = nil
		}
		if resigned {
			for k, v := range p.entries {
				data[k] = v
			}
		}
		body, err := json.Marshal(map[string]any{"data": data})
		if err != nil {
			return err
		}
		_, err = j.writer.ConfigMaps(j.namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
		j.writes.Inc()
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("writing in-flight journal %s/%s: %w", j.namespace, name, err))
			continue
		}
		j.mu.Lock()
		for _, k := range p.removed {
			delete(j.shards[p.index].committed, k)
		}
		if resigned {
			maps.Copy(j.shards[p.index].committed, p.entries)
		}
		j.mu.Unlock()
	}
	return errors.Join(errs...)
}

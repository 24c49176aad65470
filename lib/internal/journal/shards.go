// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

// keepRaw leaves an entry, and its class, on the server as they are; j.mu is held.
func (j *Journal) keepRaw(shard int, pvName, data, classKey, classData string) {
	s := j.shards[shard]
	s.kept[pvName] = data
	s.size += len(data)
	if IsClassKey(classKey) && classData != "" {
		if _, ok := s.kept[classKey]; !ok {
			s.kept[classKey] = classData
			s.size += len(classData)
		}
	}
	j.keptIn[pvName] = shard
}

// unkeep lets the next write remove a kept entry (its class goes at the next
// restart); j.mu is held.
func (j *Journal) unkeep(pvName string) {
	shard, ok := j.keptIn[pvName]
	if !ok {
		return
	}
	s := j.shards[shard]
	s.size -= len(s.kept[pvName])
	delete(s.kept, pvName)
	delete(j.keptIn, pvName)
}

// Keep turns an operation into a kept entry: it stays in the journal, for an
// admin to see and remove, and is no longer in flight.
func (j *Journal) Keep(pvName string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	shard, ok := j.shardOf[pvName]
	if !ok {
		return
	}
	s := j.shards[shard]
	data, classKey := s.entries[pvName], s.classOf[pvName]
	classData := s.classes[classKey]
	j.drop(pvName)
	j.keepRaw(shard, pvName, data, classKey, classData)
}

// ForgetKept drops a kept entry that turned out to be done (its PV exists).
func (j *Journal) ForgetKept(pvName string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.unkeep(pvName)
}

// add and drop keep the byte counts and class references with the entries;
// j.mu is held.
func (j *Journal) add(shard int, pvName, namespace, data, classKey, classData string) {
	s := j.shards[shard]
	s.entries[pvName], s.classOf[pvName] = data, classKey
	s.size += len(data)
	if classKey != "" {
		if s.classRefs[classKey] == 0 {
			s.classes[classKey] = classData
			s.size += len(classData)
		}
		s.classRefs[classKey]++
	}
	j.shardOf[pvName], j.namespaceOf[pvName] = shard, namespace
	j.nsSize[namespace] += len(data)
}

func (j *Journal) drop(pvName string) {
	shard, ok := j.shardOf[pvName]
	if !ok {
		return
	}
	s := j.shards[shard]
	data, classKey, namespace := s.entries[pvName], s.classOf[pvName], j.namespaceOf[pvName]
	s.size -= len(data)
	if classKey != "" {
		if s.classRefs[classKey]--; s.classRefs[classKey] <= 0 {
			s.size -= len(s.classes[classKey])
			delete(s.classRefs, classKey)
			delete(s.classes, classKey)
		}
	}
	if j.nsSize[namespace] -= len(data); j.nsSize[namespace] <= 0 {
		delete(j.nsSize, namespace)
	}
	delete(s.entries, pvName)
	delete(s.classOf, pvName)
	delete(j.shardOf, pvName)
	delete(j.namespaceOf, pvName)
}

// addRecording adds r to a shard; j.mu is held.
func (j *Journal) addRecording(shard int, r recording) {
	j.add(shard, r.pvName, r.namespace, r.data, r.classKey, r.classData)
}

// recordingOf returns the entry of pvName and its shard, if it has one;
// j.mu is held.
func (j *Journal) recordingOf(pvName string) (r recording, shard int, ok bool) {
	shard, ok = j.shardOf[pvName]
	if !ok {
		return recording{}, -1, false
	}
	s := j.shards[shard]
	r = recording{pvName: pvName, namespace: j.namespaceOf[pvName], data: s.entries[pvName], classKey: s.classOf[pvName]}
	r.classData = s.classes[r.classKey]
	return r, shard, true
}

// shardWithRoom returns the first shard an entry fits in (with its class,
// unless the shard has it already); -1 if none. j.mu is held.
func (j *Journal) shardWithRoom(entryBytes int, classKey string, classBytes int) int {
	for i, s := range j.shards {
		if s.fits(entryBytes, classKey, classBytes, j.shardMaxBytes) {
			return i
		}
	}
	return -1
}

// fits reports whether an entry fits in the shard, with its class unless
// the shard has it already, within maxBytes. j.mu is held.
func (s *journalShard) fits(entryBytes int, classKey string, classBytes, maxBytes int) bool {
	need := entryBytes
	if s.classRefs[classKey] == 0 {
		need += classBytes
	}
	return s.size+need <= maxBytes
}

// namespaceFull reports whether entryBytes more would take the entries of
// a claim namespace over their bound. j.mu is held.
func (j *Journal) namespaceFull(namespace string, entryBytes int) bool {
	return j.nsSize[namespace]+entryBytes > j.namespaceMaxBytes
}

// removalsPending reports whether the server holds entries that are over,
// and whether they take so much room in a ConfigMap, beyond what its bound
// counts, that they cannot wait; j.mu is held.
func (j *Journal) removalsPending() (pending, urgent bool) {
	for _, s := range j.shards {
		size := 0
		for _, k := range j.removed(s) {
			size += len(s.committed[k])
		}
		pending = pending || size > 0
		urgent = urgent || size > j.shardMaxBytes/8
	}
	return pending, urgent
}

// removed lists the entries of a shard the server holds and that are over;
// j.mu is held.
func (j *Journal) removed(s *journalShard) []string {
	var removed []string
	for k := range s.committed {
		_, kept := s.kept[k]
		if _, ok := s.entries[k]; !ok && !kept && !IsClassKey(k) {
			removed = append(removed, k)
		}
	}
	return removed
}

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

const (
	// journalMaxBytes keeps the journal ConfigMap well under the 1 MiB object limit.
	journalMaxBytes = 800 * 1024
	// journalNamespaceMaxBytes is what the claims of one namespace may hold:
	// the journal is shared by every tenant, so one of them filling it must
	// not stop the others.
	journalNamespaceMaxBytes = journalMaxBytes / 4
	// journalEntryMaxBytes bounds one entry: a claim's spec plus the metadata
	// the provisioner declares it reads.
	journalEntryMaxBytes = 16 * 1024
	// journalForgetDelay lets removals wait for the next write instead of
	// costing one each: a stale entry only makes a restart look at a claim again.
	journalForgetDelay    = 5 * time.Second
	lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"
)

var (
	errJournalFull      = errors.New("too many operations in flight: the in-flight journal is full, retrying later")
	errNamespaceFull    = errors.New("too many claims of this namespace are being provisioned at once, retrying later")
	errJournalEntrySize = fmt.Errorf("the claim's spec and the labels and annotations the provisioner reads take more than %d bytes", journalEntryMaxBytes)
)

// journalEntry is what the controller needs, after a crash, to finish or undo
// a Provision call whose PV may never have been saved: enough to call
// Provision again (it is idempotent) and then Delete when the claim is gone.
type journalEntry struct {
	Claim        *corev1.PersistentVolumeClaim `json:"claim"`
	Class        *storagev1.StorageClass       `json:"class"`
	SelectedNode string                        `json:"selectedNode,omitempty"`
}

// journal is the durable record of in-flight provisioning: a ConfigMap with
// one key per PV name, written before Provision is called and cleared after
// the PV is saved or the asset deleted. Writes are batched: every caller that
// arrives while one write is under way shares the next one.
type journal struct {
	client          kubernetes.Interface
	namespace, name string
	metrics         *metrics
	// metadataKeys names the claim labels and annotations to keep (see
	// ClaimMetadataReader); nil keeps none.
	metadataKeys func(*storagev1.StorageClass) (labels, annotations []string)

	mu          sync.Mutex
	entries     map[string]string // PV name -> serialized journalEntry: the desired content
	committed   map[string]string // what the server has, as far as we know
	namespaceOf map[string]string // PV name -> its claim's namespace, for entries
	object      *corev1.ConfigMap // last object read or written; nil if there is none
	waiters     []chan error
	kick        chan struct{}
	size        int
	nsSize      map[string]int // bytes of entries by claim namespace
}

func newJournal(client kubernetes.Interface, namespace, name string, m *metrics) *journal {
	j := &journal{client: client, namespace: namespace, name: name, metrics: m, kick: make(chan struct{}, 1)}
	j.reset()
	return j
}

func (j *journal) reset() {
	j.entries, j.committed, j.namespaceOf, j.nsSize, j.size = map[string]string{}, map[string]string{}, map[string]string{}, map[string]int{}, 0
}

// add and drop keep the byte counts with the entries; j.mu is held.
func (j *journal) add(pvName, namespace, data string) {
	j.entries[pvName], j.namespaceOf[pvName] = data, namespace
	j.size += len(data)
	j.nsSize[namespace] += len(data)
}

func (j *journal) drop(pvName string) {
	old, ok := j.entries[pvName]
	if !ok {
		return
	}
	namespace := j.namespaceOf[pvName]
	j.size -= len(old)
	if j.nsSize[namespace] -= len(old); j.nsSize[namespace] <= 0 {
		delete(j.nsSize, namespace)
	}
	delete(j.entries, pvName)
	delete(j.namespaceOf, pvName)
}

var invalidNameChars = regexp.MustCompile(`[^a-z0-9.-]+`)

// describe names the journal and the permissions it needs, for messages.
func (j *journal) describe() string {
	return fmt.Sprintf("in-flight journal ConfigMap %s/%s (get, create, update, patch on configmaps)", j.namespace, j.name)
}

// load reads the journal and returns its entries by PV name.
func (j *journal) load(ctx context.Context) (map[string]journalEntry, error) {
	cm, err := j.client.CoreV1().ConfigMaps(j.namespace).Get(ctx, j.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading in-flight journal %s/%s: %w", j.namespace, j.name, err)
	}
	out := map[string]journalEntry{}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.object = cm
	j.reset()
	if cm == nil {
		return out, nil
	}
	for pvName, data := range cm.Data {
		var e journalEntry
		if err := json.Unmarshal([]byte(data), &e); err != nil || e.Claim == nil {
			klog.FromContext(ctx).Error(err, "Dropping unreadable in-flight journal entry", "pv", pvName)
			continue
		}
		out[pvName] = e
		j.add(pvName, e.Claim.Namespace, data)
		j.committed[pvName] = data
	}
	return out, nil
}

// record makes the entry durable before it returns: only then may an asset
// be created for pvName.
func (j *journal) record(ctx context.Context, pvName string, e journalEntry) error {
	var labels, annotations []string
	if j.metadataKeys != nil {
		labels, annotations = j.metadataKeys(e.Class)
	}
	data, err := json.Marshal(journalEntry{Claim: strippedClaim(e.Claim, labels, annotations), Class: strippedClass(e.Class), SelectedNode: e.SelectedNode})
	if err != nil {
		return fmt.Errorf("encoding in-flight journal entry: %w", err)
	}
	if len(data) > journalEntryMaxBytes {
		return errJournalEntrySize
	}
	namespace := e.Claim.Namespace
	j.mu.Lock()
	if committed, ok := j.committed[pvName]; ok {
		if _, present := j.entries[pvName]; !present {
			j.add(pvName, namespace, committed)
		}
		j.mu.Unlock()
		return nil
	}
	old := j.entries[pvName]
	switch {
	case j.size-len(old)+len(data) > journalMaxBytes:
		j.mu.Unlock()
		return errJournalFull
	case j.nsSize[namespace]-len(old)+len(data) > journalNamespaceMaxBytes:
		j.mu.Unlock()
		return errNamespaceFull
	}
	j.drop(pvName)
	j.add(pvName, namespace, string(data))
	done := make(chan error, 1)
	j.waiters = append(j.waiters, done)
	j.mu.Unlock()
	j.poke()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// has reports whether an operation for pvName is recorded.
func (j *journal) has(pvName string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	_, ok := j.entries[pvName]
	return ok
}

// forget drops the entry; the removal is written with the next write or
// after journalForgetDelay.
func (j *journal) forget(pvName string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.drop(pvName)
}

func (j *journal) poke() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// run writes the journal whenever records wait, and removals lazily.
func (j *journal) run(ctx context.Context) {
	lazy := time.NewTicker(journalForgetDelay)
	defer lazy.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-j.kick:
		case <-lazy.C:
		}
		j.flush(ctx)
	}
}

func (j *journal) flush(ctx context.Context) {
	j.mu.Lock()
	waiters := j.waiters
	j.waiters = nil
	desired := maps.Clone(j.entries)
	object := j.object
	same := maps.Equal(desired, j.committed)
	j.mu.Unlock()

	err := error(nil)
	if !same && !(object == nil && len(desired) == 0) {
		err = j.write(ctx, object, desired)
	}
	for _, w := range waiters {
		w <- err
	}
}

func (j *journal) write(ctx context.Context, object *corev1.ConfigMap, desired map[string]string) error {
	for attempt := 0; ; attempt++ {
		var written *corev1.ConfigMap
		var err error
		if object == nil {
			written, err = j.client.CoreV1().ConfigMaps(j.namespace).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: j.name, Namespace: j.namespace,
					Labels: map[string]string{"app.kubernetes.io/managed-by": "kubeprov-external-storage"}},
				Data: desired,
			}, metav1.CreateOptions{})
		} else {
			cm := object.DeepCopy()
			cm.Data = desired
			written, err = j.client.CoreV1().ConfigMaps(j.namespace).Update(ctx, cm, metav1.UpdateOptions{})
		}
		j.metrics.journalWrites.Inc()
		if err == nil {
			j.mu.Lock()
			j.object, j.committed = written, desired
			j.mu.Unlock()
			return nil
		}
		// Only the active controller writes its journal; a conflict means the
		// object changed under us (or was created by an earlier incarnation),
		// so write our content on top of the current version once.
		if attempt == 0 && (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)) {
			fresh, gerr := j.client.CoreV1().ConfigMaps(j.namespace).Get(ctx, j.name, metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) {
				object = nil
				continue
			}
			if gerr == nil {
				object = fresh
				continue
			}
		}
		return fmt.Errorf("writing in-flight journal %s/%s: %w", j.namespace, j.name, err)
	}
}

// flushRemovals writes the removals still pending, and only them, as a merge
// patch: safe even if another instance already writes the journal (after a
// graceful stop under leader election), because it touches no other key.
func (j *journal) flushRemovals(ctx context.Context) error {
	j.mu.Lock()
	var removed []string
	for k := range j.committed {
		if _, ok := j.entries[k]; !ok {
			removed = append(removed, k)
		}
	}
	object := j.object
	j.mu.Unlock()
	if len(removed) == 0 || object == nil {
		return nil
	}
	data := map[string]any{}
	for _, k := range removed {
		data[k] = nil
	}
	patch, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return err
	}
	_, err = j.client.CoreV1().ConfigMaps(j.namespace).Patch(ctx, j.name, types.MergePatchType, patch, metav1.PatchOptions{})
	j.metrics.journalWrites.Inc()
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing in-flight journal %s/%s: %w", j.namespace, j.name, err)
	}
	j.mu.Lock()
	for _, k := range removed {
		delete(j.committed, k)
	}
	j.mu.Unlock()
	return nil
}

// strippedClaim keeps what Provision may read: the claim's identity, its spec
// and the labels and annotations the provisioner declares.
func strippedClaim(c *corev1.PersistentVolumeClaim, labels, annotations []string) *corev1.PersistentVolumeClaim {
	if c == nil {
		return nil
	}
	return &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{Kind: "PersistentVolumeClaim", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, UID: c.UID,
			Labels: pick(c.Labels, labels), Annotations: pick(c.Annotations, annotations)},
		Spec: *c.Spec.DeepCopy(),
	}
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

func strippedClass(c *storagev1.StorageClass) *storagev1.StorageClass {
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

// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package journal is the controller's durable record of in-flight
// provisioning: ConfigMaps holding one signed entry per PV name, written
// before Provision is called and cleared once the PV is saved or the asset
// deleted. The controller records (Record, RecordAsset, Adopt), reads it back
// at start (Load), forgets finished operations (Forget, Keep, ForgetKept),
// and runs its writer (Run, FlushRemovals at stop).
package journal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"

	"github.com/kubeprov/external-storage/lib/gate"
	"github.com/kubeprov/external-storage/lib/internal/ownclient"
	"github.com/kubeprov/external-storage/lib/recordkey"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	// journalShardMaxBytes keeps each journal ConfigMap well under the 1 MiB
	// object limit.
	journalShardMaxBytes = 800 * 1024
	// Shards is how many ConfigMaps the journal may use: the first is
	// named by WithJournal (JournalName), the others "<name>-1" to "<name>-31".
	// With the class stored once per ConfigMap a typical entry takes about
	// 300 bytes (450 with a Lease term and an asset ID), so the journal
	// holds some 80,000 operations (57,000), the claims of one namespace a
	// quarter of that.
	Shards = 32
	// EntryMaxBytes bounds one entry: a claim's spec plus the metadata
	// the provisioner declares it reads.
	EntryMaxBytes = 16 * 1024
	// journalForgetDelay lets removals wait for the next write instead of
	// costing one each: a stale entry only makes a restart look at a claim again.
	journalForgetDelay = 5 * time.Second
	// journalAdvanceDelay is the least time between two moves of the
	// journal's generation (advance): removals wait for the next move, so
	// that a burst costs one Secret write every few seconds, not one per
	// journal write. It is below journalForgetDelay so that every lazy
	// write finds a move due.
	journalAdvanceDelay = 4 * time.Second
	// GenerationPrefix starts the key Secret's data key holding a
	// journal's generation ("generation.<journal name>"): journals of one
	// namespace share the Secret, each moves its own generation.
	GenerationPrefix = "generation."
	// journalClassKeyPrefix starts the keys of the classes a ConfigMap's
	// entries refer to. A PV name never contains "_", so no entry's key does.
	journalClassKeyPrefix = "_class."
	// ShardsAnnotation, on the first ConfigMap, says how many of them
	// are in use, so that a restart reads only those.
	ShardsAnnotation      = "kubeprov.io/journal-shards"
	lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"
	// KeySecret is the Secret, in the journal's namespace, holding the
	// key that signs journal entries. The controller creates it with a random
	// key on first use; provisioners in one namespace share it (each entry's
	// signature names its journal).
	KeySecret = "kubeprov-journal-key" //nolint:gosec // G101: the Secret's name, not a credential
	// journalSignatureDomain starts every signed message, so that no other
	// record signed with a key of package recordkey passes for an entry.
	journalSignatureDomain = "kubeprov.io/journal-entry/v1"
	// journalSignatureField is the last field of a signed entry:
	// `,"mac":"<64 hex digits>"}`; what precedes it, closed with "}", is
	// the entry as it was signed.
	journalSignatureField = `,"mac":"`
	journalSignatureHex   = 64
)

var (
	ErrFull          = errors.New("too many operations in flight: the in-flight journal is full, retrying later")
	ErrNamespaceFull = errors.New("too many claims of this namespace are being provisioned at once, retrying later")
	ErrEntrySize     = fmt.Errorf("the claim's spec and the labels and annotations the provisioner reads take more than %d bytes", EntryMaxBytes)
)

// Entry is what the controller needs, after a crash, to finish or undo
// a Provision call whose PV may never have been saved: enough to call
// Provision again (it is idempotent) and then Delete when the claim is gone.
//
// On the wire the class is stored once per ConfigMap under ClassKey; entries
// written before the journal had several ConfigMaps carry it inline in Class,
// and are still read.
type Entry struct {
	Claim        *corev1.PersistentVolumeClaim `json:"claim"`
	Class        *storagev1.StorageClass       `json:"class,omitempty"`
	ClassKey     string                        `json:"classKey,omitempty"`
	SelectedNode string                        `json:"selectedNode,omitempty"`
	// ClaimIncomplete says that Claim lacks labels or annotations Provision
	// may have read: the provisioner does not declare which it reads
	// (ClaimMetadataReader) and the claim had some. A Provision repeated with
	// this copy may not find the asset the first one made.
	ClaimIncomplete bool `json:"claimIncomplete,omitempty"`
	// AssetID is the backend's ID of the asset, once the provisioner has
	// reported it (ProvisionOptions.RecordAssetID): the operation of a claim
	// that is gone is then finished by deleting it, not by a second Provision.
	AssetID string `json:"assetID,omitempty"`
	// Lease is the leader Lease term the entry was written under; nil
	// without leader election and in entries of earlier versions.
	Lease *LeaseTerm `json:"lease,omitempty"`
}

// LeaseTerm is one holding of the leader Lease: the holder's identity and
// the Lease's leaderTransitions while it held it. Every change of holder
// adds one to leaderTransitions, so a count that moved by more than that
// says another identity held the Lease in between.
type LeaseTerm struct {
	Holder      string `json:"holder"`
	Transitions int    `json:"transitions"`
}

// Unverified is a journal key whose value this controller cannot prove
// it wrote: it stays on the server as it is and is never acted upon.
type Unverified struct {
	Claim  *corev1.PersistentVolumeClaim // what it says, if it could be read
	Reason string
}

// Journal is the durable record of in-flight provisioning: ConfigMaps with
// one key per PV name, written before Provision is called and cleared after
// the PV is saved or the asset deleted.
//
// A new entry goes to the first ConfigMap (shard) with room for it, so that
// under any load short of thousands of operations in flight only the first
// one is written, as before there were shards; only when it is full do
// entries spill into the next. Writes are batched per shard: every caller
// that arrives while a write is under way shares the next one.
type Journal struct {
	client kubernetes.Interface
	// writer writes the ConfigMaps and the generation: the client's
	// connection without its rate limiter (see writerFor).
	writer            writer
	namespace, name   string
	writes            prometheus.Counter
	labels            map[string]string // of its ConfigMaps and key Secret
	systemAnnotations []string
	// MetadataKeys names the claim labels and annotations to keep (see
	// ClaimMetadataReader); nil keeps none.
	MetadataKeys func(*storagev1.StorageClass) (labels, annotations []string)
	// shardMaxBytes and namespaceMaxBytes are the bounds, advanceDelay the
	// least time between two moves of the generation (constants but in tests).
	shardMaxBytes, namespaceMaxBytes int
	advanceDelay                     time.Duration
	// Term is the Lease term this controller holds (nil without leader
	// election), recorded in every entry it writes.
	Term atomic.Pointer[LeaseTerm]

	keyMu  sync.Mutex
	key    []byte         // signs entries (KeySecret); loaded on first use
	secret *corev1.Secret // KeySecret as last read or written

	// lastAdvance is when the generation last moved; flushMu is held.
	lastAdvance time.Time

	// flushMu makes flushes one at a time: a flush that read the shards
	// before another's write would otherwise write what that one replaced.
	flushMu sync.Mutex

	mu          sync.Mutex
	shards      []*journalShard
	shardOf     map[string]int    // PV name -> shard holding its entry
	keptIn      map[string]int    // PV name -> shard keeping an entry not acted on
	namespaceOf map[string]string // PV name -> its claim's namespace
	nsSize      map[string]int    // bytes of entries by claim namespace
	// gen is the journal's generation (in KeySecret): every entry is signed
	// over it, and it moves on before any removal is written (advance).
	gen uint64
	// shardsInUse is what the first ConfigMap on the server says: shards
	// beyond it are never written before it says more.
	shardsInUse int
	kick        chan struct{}
	// lastClass is the last class recorded, encoded: nearly every record
	// has the same class as the one before.
	lastClass atomic.Pointer[encodedClass]
}

// encodedClass is a class as the journal stores it, and its key.
type encodedClass struct {
	class           *storagev1.StorageClass
	resourceVersion string
	data            []byte
	key             string
}

// journalShard is one ConfigMap of the journal.
type journalShard struct {
	name      string
	entries   map[string]string // PV name -> serialized entry: the desired content
	classOf   map[string]string // PV name -> key of its class ("" for an inline class)
	classes   map[string]string // class key -> serialized class, for the entries that refer to it
	classRefs map[string]int
	committed map[string]string // what the server has, as far as we know
	// kept holds entries (and their classes) that are written back as they
	// are and never acted on: unverified ones, and operations left to an
	// admin. They count towards size.
	kept    map[string]string
	object  *corev1.ConfigMap // last object read or written; nil if there is none
	waiters []chan error
	size    int // bytes of entries and classes
}

// Config is what a journal is made of.
type Config struct {
	Client          kubernetes.Interface
	Namespace, Name string
	// Writes counts ConfigMap writes (controller_journal_writes_total).
	Writes prometheus.Counter
	// Labels go on the ConfigMaps and on the key Secret.
	Labels map[string]string
	// SystemAnnotations of a claim are kept in every entry: set by
	// Kubernetes and bounded by what the controller checks before it
	// records.
	SystemAnnotations []string
}

// New returns an empty journal; Load reads what the server holds.
func New(cfg Config) *Journal {
	j := &Journal{client: cfg.Client, writer: writerFor(cfg.Client), namespace: cfg.Namespace, name: cfg.Name, writes: cfg.Writes, labels: cfg.Labels,
		systemAnnotations: cfg.SystemAnnotations, kick: make(chan struct{}, 1),
		shardMaxBytes: journalShardMaxBytes, namespaceMaxBytes: Shards * journalShardMaxBytes / 4, advanceDelay: journalAdvanceDelay}
	j.reset()
	return j
}

// writerFor returns what the journal writes its ConfigMaps with: client's
// connection and credentials, protobuf, and no rate limiter. Behind the
// client's limiter a write waited for every PV write and event queued
// before it, seconds under the sidecar's default --kube-api-qps=5 in a
// burst, so a kill lost volume IDs whose CreateVolume had answered long
// before (and a graceful stop's last removals, bounded by
// FinalFlushTimeout, were not written at all when Lease renewals held the
// budget). Journal writes have a bound of their own instead: one at a time
// (flushMu), each carrying every change waiting.
// writer is what the journal writes: its ConfigMaps, and the generation in
// its key Secret, which a removal waits on as much as on the ConfigMap.
type writer interface {
	corev1client.ConfigMapsGetter
	corev1client.SecretsGetter
}

func writerFor(client kubernetes.Interface) writer {
	content := ownclient.Protobuf(scheme.Codecs.WithoutConversion())
	if c, ok := ownclient.CoreV1(client, content, nil); ok {
		return c
	}
	return client.CoreV1() // a fake clientset: nothing to throttle
}

// Namespace is where the journal's ConfigMaps and key Secret are.
func (j *Journal) Namespace() string { return j.namespace }

// Name is the name of the journal's first ConfigMap.
func (j *Journal) Name() string { return j.name }

// SetBounds changes the bytes a ConfigMap and a namespace's entries may
// take (0 leaves one as it is); for tests, which fill the journal with a
// few entries.
func (j *Journal) SetBounds(shardMaxBytes, namespaceMaxBytes int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if shardMaxBytes > 0 {
		j.shardMaxBytes = shardMaxBytes
	}
	if namespaceMaxBytes > 0 {
		j.namespaceMaxBytes = namespaceMaxBytes
	}
}

// SetAdvanceDelay changes the least time between two moves of the
// generation, so that removals wait for none in tests that look at them
// right after a write.
func (j *Journal) SetAdvanceDelay(d time.Duration) {
	j.flushMu.Lock()
	defer j.flushMu.Unlock()
	j.advanceDelay = d
}

// Size is the bytes the entries and classes of a shard take.
func (j *Journal) Size(shard int) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.shards[shard].size
}

// ShardName names shard i of the journal name.
func ShardName(name string, i int) string {
	if i == 0 {
		return name
	}
	return fmt.Sprintf("%s-%d", name, i)
}

// reset empties the journal; j.mu is held (or j not yet shared).
func (j *Journal) reset() {
	j.shards = make([]*journalShard, Shards)
	for i := range j.shards {
		j.shards[i] = &journalShard{name: ShardName(j.name, i), entries: map[string]string{}, classOf: map[string]string{},
			classes: map[string]string{}, classRefs: map[string]int{}, committed: map[string]string{}, kept: map[string]string{}}
	}
	j.shardOf, j.namespaceOf, j.nsSize, j.shardsInUse = map[string]int{}, map[string]string{}, map[string]int{}, 0
	j.keptIn = map[string]int{}
}

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

// signingKey loads the key that signs entries, once; with reload it reads
// the Secret again for the journal's generation (at each Load: another
// instance may have moved it on since this one last wrote), and refuses a
// key that changed.
func (j *Journal) signingKey(ctx context.Context, reload bool) ([]byte, error) {
	j.keyMu.Lock()
	defer j.keyMu.Unlock()
	if j.key != nil && !reload {
		return j.key, nil
	}
	secret, key, err := recordkey.LoadSecret(ctx, j.client.CoreV1().Secrets(j.namespace), KeySecret,
		j.labels)
	if err != nil {
		return nil, fmt.Errorf("loading the in-flight journal's signing key: %w", err)
	}
	gen, err := j.generationIn(secret)
	if err != nil {
		return nil, err
	}
	if j.key != nil && !bytes.Equal(key, j.key) {
		return nil, fmt.Errorf("the key in Secret %s/%s was replaced while the provisioner ran: restart it", j.namespace, KeySecret)
	}
	j.mu.Lock()
	j.gen = gen
	j.mu.Unlock()
	j.key, j.secret = key, secret
	return key, nil
}

// generationKey is the key Secret's data key holding this journal's generation.
func (j *Journal) generationKey() string { return GenerationPrefix + j.name }

// generationIn reads this journal's generation from the key Secret: 0 when
// it has none yet.
func (j *Journal) generationIn(s *corev1.Secret) (uint64, error) {
	v, ok := s.Data[j.generationKey()]
	if !ok {
		return 0, nil
	}
	gen, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("secret %s/%s: %s is not a number", s.Namespace, s.Name, j.generationKey())
	}
	return gen, nil
}

// sign binds an entry to this journal, its key (the PV name), its class and
// the journal's generation; j.mu is held.
func (j *Journal) sign(key []byte, pvName, entry, classData string) string {
	return recordkey.Sign(key, j.signedFields(j.gen, pvName, entry, classData)...)
}

// signedFields are what a signature covers. Generation 0 adds nothing, so
// that the entries of a journal whose generation never moved (those of
// earlier versions) verify as they were signed.
func (j *Journal) signedFields(gen uint64, pvName, entry, classData string) []string {
	fields := []string{journalSignatureDomain, j.namespace, j.name, pvName, entry, classData}
	if gen > 0 {
		fields = append(fields, strconv.FormatUint(gen, 10))
	}
	return fields
}

// errGenerationMoved: another instance moved the journal's generation on.
var errGenerationMoved = errors.New("the journal's generation was moved on by another instance")

// advance moves the journal's generation on in the key Secret, then signs
// every entry again over the new one: an entry kept from before no longer
// verifies, so removals written after this cannot be undone by writing a
// removed entry back (gate.FreshEntry). Only the provisioner can update the
// Secret. With takeOver false it refuses (errGenerationMoved) when the
// generation is no longer the one this instance signs with: another
// instance writes the journal now, and moving on would void its entries.
//
// A crash after the Secret is written and before the entries signed again
// are loses those entries (a restart refuses and reports them, and claims
// that still exist are recorded again): it can leak an asset, never delete
// one.
func (j *Journal) advance(ctx context.Context, takeOver bool) error {
	j.keyMu.Lock()
	defer j.keyMu.Unlock()
	if j.secret == nil {
		return errors.New("the in-flight journal's key is not loaded")
	}
	secrets := j.writer.Secrets(j.namespace)
	s := j.secret
	for attempt := 0; ; attempt++ {
		onServer, err := j.generationIn(s)
		if err != nil {
			return err
		}
		j.mu.Lock()
		gen := j.gen
		j.mu.Unlock()
		if onServer != gen && !takeOver {
			return errGenerationMoved
		}
		next := max(onServer, gen) + 1
		update := s.DeepCopy()
		update.Data[j.generationKey()] = []byte(strconv.FormatUint(next, 10))
		written, err := secrets.Update(ctx, update, metav1.UpdateOptions{})
		if err == nil {
			j.secret = written
			j.mu.Lock()
			j.gen = next
			j.resign()
			j.mu.Unlock()
			return nil
		}
		if !apierrors.IsConflict(err) || attempt >= 4 {
			return fmt.Errorf("moving the in-flight journal's generation on in Secret %s/%s (update on it is needed): %w", j.namespace, KeySecret, err)
		}
		// The journals of other instances share the Secret.
		fresh, key, err := recordkey.LoadSecret(ctx, secrets, KeySecret, j.labels)
		if err != nil {
			return err
		}
		if fresh.UID != s.UID || !bytes.Equal(key, j.key) {
			return fmt.Errorf("secret %s/%s was replaced while the provisioner ran: restart it", j.namespace, KeySecret)
		}
		s = fresh
	}
}

// resign signs every entry again over the journal's generation; j.mu is
// held. Kept entries stay as they are: nothing acts on them.
func (j *Journal) resign() {
	for _, s := range j.shards {
		for pvName, data := range s.entries {
			unsigned, _, _ := splitSignedEntry(data)
			s.entries[pvName] = signedEntry([]byte(unsigned), j.sign(j.key, pvName, unsigned, s.classes[s.classOf[pvName]]))
		}
	}
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

// signedEntry appends the signature to an entry as its last JSON field.
func signedEntry(entry []byte, signature string) string {
	return string(entry[:len(entry)-1]) + journalSignatureField + signature + `"}`
}

// SignedEntry is an encoded entry as journal namespace/name stores it under
// pvName, signed with key: what a controller wrote, for tests.
func SignedEntry(key []byte, namespace, name, pvName string, entry []byte, classData string) string {
	j := &Journal{namespace: namespace, name: name}
	return signedEntry(entry, j.sign(key, pvName, string(entry), classData))
}

// splitSignedEntry returns the entry as it was signed and its signature;
// ok is false when data carries none.
func splitSignedEntry(data string) (entry, signature string, ok bool) {
	n := len(journalSignatureField) + journalSignatureHex + len(`"}`)
	if len(data) <= n {
		return data, "", false
	}
	head, tail := data[:len(data)-n], data[len(data)-n:]
	if !strings.HasPrefix(tail, journalSignatureField) || !strings.HasSuffix(tail, `"}`) {
		return data, "", false
	}
	return head + "}", tail[len(journalSignatureField) : len(journalSignatureField)+journalSignatureHex], true
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

// Describe names the journal and the permissions it needs, for messages.
func (j *Journal) Describe() string {
	return fmt.Sprintf("in-flight journal ConfigMap %s/%s (and %s-1 to -%d when it fills; get, create, update, patch on configmaps) and its key, Secret %s/%s (get, update, create on secrets)",
		j.namespace, j.name, j.name, Shards-1, j.namespace, KeySecret)
}

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
			return nil, nil, fmt.Errorf("reading in-flight journal %s/%s: %w", j.namespace, name, err)
		}
		objects[i] = cm
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
			if IsClassKey(pvName) {
				continue
			}
			e, classData, reason := j.verify(key, pvName, data, cm.Data)
			if reason != "" {
				unverified[pvName] = Unverified{Claim: e.Claim, Reason: reason}
				j.keepRaw(i, pvName, data, e.ClassKey, classData)
				continue
			}
			if _, dup := j.shardOf[pvName]; dup {
				klog.FromContext(ctx).Error(nil, "Dropping a second in-flight journal entry of one volume", "pv", pvName, "configMap", s.name)
				continue
			}
			out[pvName] = e
			j.add(i, pvName, e.Claim.Namespace, data, e.ClassKey, classData)
		}
	}
	return out, unverified, nil
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

// IsClassKey tells the keys of classes from those of entries.
func IsClassKey(key string) bool { return strings.HasPrefix(key, journalClassKeyPrefix) }

// ClassKey names a class by its content: entries recorded with the same
// class share one copy in their ConfigMap.
func ClassKey(classData []byte) string {
	sum := sha256.Sum256(classData)
	return journalClassKeyPrefix + hex.EncodeToString(sum[:8])
}

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

// encodeClass returns class as entries refer to it, reusing the last
// encoding while the class is the same: objects from the informers' cache
// are never changed in place, so the same object at the same version
// encodes the same.
func (j *Journal) encodeClass(class *storagev1.StorageClass) (*encodedClass, error) {
	if enc := j.lastClass.Load(); enc != nil && enc.class == class && (class == nil || enc.resourceVersion == class.ResourceVersion) {
		return enc, nil
	}
	data, err := json.Marshal(StrippedClass(class))
	if err != nil {
		return nil, fmt.Errorf("encoding in-flight journal entry: %w", err)
	}
	enc := &encodedClass{class: class, data: data, key: ClassKey(data)}
	if class != nil {
		enc.resourceVersion = class.ResourceVersion
	}
	j.lastClass.Store(enc)
	return enc, nil
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

// shardWithRoom returns the first shard an entry fits in (with its class,
// unless the shard has it already); -1 if none. j.mu is held.
func (j *Journal) shardWithRoom(entryBytes int, classKey string, classBytes int) int {
	for i, s := range j.shards {
		need := entryBytes
		if s.classRefs[classKey] == 0 {
			need += classBytes
		}
		if s.size+need <= j.shardMaxBytes {
			return i
		}
	}
	return -1
}

// Has reports whether an operation for pvName is recorded.
func (j *Journal) Has(pvName string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	_, ok := j.shardOf[pvName]
	return ok
}

// Forget drops the entry; the removal is written with the next write of its
// ConfigMap or after journalForgetDelay.
func (j *Journal) Forget(pvName string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.drop(pvName)
}

func (j *Journal) Poke() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// Run writes the journal whenever records wait, and removals lazily.
func (j *Journal) Run(ctx context.Context) {
	lazy := time.NewTicker(journalForgetDelay)
	defer lazy.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-j.kick:
		case <-lazy.C:
		}
		j.Flush(ctx)
	}
}

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

// StrippedClaim keeps what Provision may read: the claim's identity, its
// spec, the system annotations (set by Kubernetes, kept in every entry) and the labels and annotations the
// provisioner declares.
func StrippedClaim(c *corev1.PersistentVolumeClaim, labels, annotations, systemAnnotations []string) *corev1.PersistentVolumeClaim {
	if c == nil {
		return nil
	}
	return &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{Kind: "PersistentVolumeClaim", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, UID: c.UID,
			Labels: pick(c.Labels, labels), Annotations: pick(c.Annotations, slices.Concat(annotations, systemAnnotations))},
		Spec: *c.Spec.DeepCopy(),
	}
}

// metadataDropped reports whether stripped lacks a label or annotation of
// the claim. kubectl's last-applied-configuration does not count: it is
// kubectl's record of the claim, not something a provisioner reads.
func metadataDropped(claim, stripped *corev1.PersistentVolumeClaim) bool {
	annotations := len(claim.Annotations)
	if _, ok := claim.Annotations[lastAppliedAnnotation]; ok {
		annotations--
	}
	return len(stripped.Labels) < len(claim.Labels) || len(stripped.Annotations) < annotations
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

// StrippedClass is what an entry keeps of a class: all but its metadata
// beyond name, UID, labels and annotations (less kubectl's).
func StrippedClass(c *storagev1.StorageClass) *storagev1.StorageClass {
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

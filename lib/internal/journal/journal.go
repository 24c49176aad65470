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
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kubeprov/external-storage/lib/internal/ownclient"
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

// writer is what the journal writes: its ConfigMaps, and the generation in
// its key Secret, which a removal waits on as much as on the ConfigMap.
type writer interface {
	corev1client.ConfigMapsGetter
	corev1client.SecretsGetter
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

// Describe names the journal and the permissions it needs, for messages.
func (j *Journal) Describe() string {
	return fmt.Sprintf("in-flight journal ConfigMap %s/%s (and %s-1 to -%d when it fills; get, create, update, patch on configmaps) and its key, Secret %s/%s (get, update, create on secrets)",
		j.namespace, j.name, j.name, Shards-1, j.namespace, KeySecret)
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

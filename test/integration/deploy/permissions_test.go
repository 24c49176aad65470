// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package deploy

// What each provisioner's code calls on the API, read from the code: lib's
// controller and cli (shared by all), then each provisioner's own calls.
// The RBAC check requires every needed permission and refuses any other.
// When a provisioner starts calling something new, add it here with the
// code that calls it.

type scope int

const (
	// cluster: a ClusterRole (cluster-scoped kinds, or any namespace).
	cluster scope = iota
	// own: a Role in the provisioner's namespace (its POD_NAMESPACE).
	own
)

type permission struct {
	group, resource string
	verbs           []string
	scope           scope
	// names limits the permission to these objects (resourceNames).
	names []string
	// nameFlag takes the one object name from this flag of the container.
	nameFlag string
	// when names a flag ("--leader-election", "--launcher=container") that
	// makes the code use the permission; it is required only then, and
	// always allowed. "" means always required.
	when string
	// unless names a flag that makes the code skip the call.
	unless string
	// optional: allowed, never required (a path that depends on the
	// backend or on objects left by another configuration).
	optional bool
	why      string
}

// libPermissions: lib/controller and lib/cli, which every binary runs.
var libPermissions = []permission{
	{group: "", resource: "persistentvolumes", verbs: []string{"get", "list", "watch", "create", "delete"}, scope: cluster,
		why: "controller: PV informer; createVolume/finishOrphan get; saveVolume create; deleteVolume delete"},
	{group: "", resource: "persistentvolumes", verbs: []string{"update"}, scope: cluster, optional: true,
		why: "controller: removeFinalizer, only for PVs carrying the finalizer (WithFinalizer, off by default)"},
	{group: "", resource: "persistentvolumeclaims", verbs: []string{"get", "list", "watch"}, scope: cluster,
		why: "controller: claim informer; claimGone re-reads a claim before saving its PV"},
	{group: "storage.k8s.io", resource: "storageclasses", verbs: []string{"get", "list", "watch"}, scope: cluster,
		why: "controller: class informer; provisionClaim gets a class not yet in the cache"},
	{group: "", resource: "events", verbs: []string{"create", "patch"}, scope: cluster,
		why: "controller: events on claims in any namespace, aggregated ones patched"},
	{group: "", resource: "configmaps", verbs: []string{"get", "create", "update", "patch"}, scope: own,
		why: "controller: the in-flight journal (cli always sets WithJournal); patch: flushRemovals at a graceful stop"},
	{group: "", resource: "secrets", verbs: []string{"get", "update"}, scope: own, names: []string{"kubeprov-journal-key"},
		why: "controller: journal.signingKey reads the key that signs journal entries; update seals it (recordkey) and moves the journal's generation on (journal.advance)"},
	{group: "", resource: "secrets", verbs: []string{"create"}, scope: own,
		why: "controller: journal.signingKey creates that key on first use (create cannot be limited by name)"},
	{group: "coordination.k8s.io", resource: "leases", verbs: []string{"get", "create", "update"}, scope: own, when: "--leader-election",
		why: "controller: leader election through a Lease"},
}

// permissions per provisioner directory, on top of libPermissions.
var permissions = map[string][]permission{
	"hostpath": {
		{group: "", resource: "persistentvolumeclaims", verbs: []string{"patch"}, scope: cluster,
			why: "controller: dropSelectedNode on ProvisioningReschedule (hostpath/pkg/hostpath hostpath.go volumeRoots, placeInBudget: no room on the selected node)"},
		{group: "", resource: "persistentvolumes", verbs: []string{"patch"}, scope: cluster, unless: "--enable-resizer=false",
			why: "hostpath/pkg/resize sync.go setVolumeCapacity: the expanded volume's new spec.capacity"},
		{group: "", resource: "persistentvolumeclaims/status", verbs: []string{"patch"}, scope: cluster, unless: "--enable-resizer=false",
			why: "hostpath/pkg/resize sync.go patchClaimStatus: allocatedResources, allocatedResourceStatuses, conditions and capacity of a resized claim"},
		{group: "", resource: "pods", verbs: []string{"get", "list", "watch", "create", "delete"}, scope: own, when: "--helper-pods",
			why: "hostpath/pkg/hostpath helper.go: one helper pod per mkdir or rm on a node; hostpath/app command.go: get the own pod for its image"},
		{group: "", resource: "nodes", verbs: []string{"get"}, scope: cluster, when: "--helper-pods",
			why: "hostpath/pkg/hostpath helpernodes.go checkNode: the node must exist, be schedulable and Ready, and allow helper pods before one is made"},
		{group: "storage.k8s.io", resource: "csistoragecapacities", verbs: []string{"list", "watch", "create", "update", "delete"}, scope: own, when: "--enable-capacity",
			why: "hostpath/pkg/capacity: the CSIStorageCapacity objects it publishes (an informer; create, update on change, delete when no longer served)"},
	},
	"nfs": {
		{group: "", resource: "services", verbs: []string{"get"}, scope: own, nameFlag: "--service-name", when: "--service-name",
			why: "nfs/app serverAddress: the ClusterIP of --service-name is the server PVs name"},
	},
	"csi": {
		{group: "", resource: "persistentvolumeclaims", verbs: []string{"patch"}, scope: cluster,
			why: "controller: dropSelectedNode on ProvisioningReschedule (csi/pkg/provisioner errors.go, topology.go)"},
		{group: "", resource: "persistentvolumeclaims", verbs: []string{"update"}, scope: cluster,
			why: "csi/pkg/provisioner protectCloneSource, csi/pkg/cloneprotection: the cloning-protection finalizer on a clone's source"},
		{group: "", resource: "secrets", verbs: []string{"get"}, scope: cluster,
			why: "csi/pkg/provisioner: the provisioner/controller secrets a StorageClass names, in any namespace"},
		{group: "snapshot.storage.k8s.io", resource: "volumesnapshots", verbs: []string{"get"}, scope: cluster,
			why: "csi/pkg/provisioner datasource.go: a claim restored from a VolumeSnapshot"},
		{group: "snapshot.storage.k8s.io", resource: "volumesnapshots", verbs: []string{"patch"}, scope: cluster,
			why: "csi/pkg/provisioner snapshotprotection.go: the protection finalizer on a snapshot while a volume is restored from it"},
		{group: "snapshot.storage.k8s.io", resource: "volumesnapshots", verbs: []string{"list"}, scope: cluster,
			why: "csi/pkg/provisioner snapshotprotection.go SweepSnapshotProtection: the snapshots still carrying that finalizer"},
		{group: "snapshot.storage.k8s.io", resource: "volumesnapshotcontents", verbs: []string{"get"}, scope: cluster,
			why: "csi/pkg/provisioner datasource.go: the snapshot's content; snapshotprotection.go ourDriversSnapshot: its driver, before the sweep lets go"},
		{group: "", resource: "nodes", verbs: []string{"get", "list", "watch"}, scope: cluster, optional: true,
			why: "csi/app: Node informer, only for drivers with topology"},
		{group: "storage.k8s.io", resource: "csinodes", verbs: []string{"get", "list", "watch"}, scope: cluster, optional: true,
			why: "csi/app: CSINode informer, only for drivers with topology"},
		{group: "storage.k8s.io", resource: "volumeattachments", verbs: []string{"get", "list", "watch"}, scope: cluster,
			why: "csi/pkg/provisioner checkDetached: no DeleteVolume while a VolumeAttachment attaches the volume"},
		{group: "gateway.networking.k8s.io", resource: "referencegrants", verbs: []string{"list"}, scope: cluster, optional: true,
			why: "csi/pkg/provisioner referencegrant.go: with CrossNamespaceVolumeDataSource, the grants of a source's namespace"},
		{group: "storage.k8s.io", resource: "volumeattributesclasses", verbs: []string{"get"}, scope: cluster, optional: true,
			why: "csi/pkg/provisioner attributesclass.go: the VolumeAttributesClass a claim names"},
		{group: "storage.k8s.io", resource: "csistoragecapacities", verbs: []string{"list", "watch", "create", "update", "delete"}, scope: own, when: "--enable-capacity",
			why: "csi/pkg/capacity: the CSIStorageCapacity objects it publishes"},
		{group: "", resource: "pods", verbs: []string{"get"}, scope: own, when: "--enable-capacity",
			why: "csi/pkg/capacity owner.go: the owner of the CSIStorageCapacity objects, from POD_NAME"},
	},
	"cinder": {
		{group: "", resource: "secrets", verbs: []string{"get", "create", "update", "delete"}, scope: cluster,
			why: "cinder/pkg/cinder secret.go: a CHAP Secret per iSCSI volume in the claim's namespace"},
		{group: "", resource: "namespaces", verbs: []string{"get"}, scope: cluster, names: []string{"kube-system"}, unless: "--identity",
			why: "cinder/app defaultIdentity: the UID of kube-system as cluster id"},
		{group: "", resource: "nodes", verbs: []string{"get", "list", "watch"}, scope: cluster, when: "--topology-key",
			why: "controller: Node informer, as cinder/pkg/cinder topology.go is a SelectedNodeReader with --topology-key"},
		{group: "", resource: "persistentvolumeclaims", verbs: []string{"patch"}, scope: cluster, when: "--topology-key",
			why: "controller: dropSelectedNode, for a selected node that is gone or ProvisioningReschedule (cinder/pkg/cinder topology.go)"},
	},
	"flex": {
		{group: "", resource: "persistentvolumes", verbs: []string{"patch"}, scope: cluster, when: "--launcher=container",
			why: "flex/pkg/flex pod.go: adopting a PV a driver pod created"},
		{group: "", resource: "configmaps", verbs: []string{"list"}, scope: own, when: "--launcher=container",
			why: "flex/pkg/flex pod.go findConfigMap: the provisioner ConfigMap of a class, by label"},
		{group: "", resource: "pods", verbs: []string{"get", "list", "watch", "create", "delete"}, scope: own, when: "--launcher=container",
			why: "flex/pkg/flex pod.go: one driver pod per operation"},
		{group: "", resource: "secrets", verbs: []string{"get", "update"}, scope: own, names: []string{"flex-provisioner-record-key"}, when: "--launcher=container",
			why: "flex/pkg/flex recordkey.go: the key that signs the pod record on PVs; update seals it with its UID (lib/recordkey)"},
		{group: "", resource: "secrets", verbs: []string{"create"}, scope: own, when: "--launcher=container",
			why: "flex/pkg/flex recordkey.go: the record key is created on first start"},
	},
}

{{/*
Copyright 2026 The external-storage Authors.
SPDX-License-Identifier: Apache-2.0

The helpers every chart under charts/ includes (this library chart is their
file://../common dependency). Values a chart's schema does not accept are
absent, so each helper reads optional keys with "with" or "default".
*/}}

{{/* Where the release's namespaced objects go: namespaceOverride (local-path's), else the release namespace. */}}
{{- define "kubeprov.namespace" -}}
{{- .Values.namespaceOverride | default .Release.Namespace }}
{{- end }}

{{/* Labels the user adds to every object and pod: labels (nfs-subdir's name) and commonLabels (local-path's). */}}
{{- define "kubeprov.extraLabels" -}}
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "kubeprov.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's object names: the release name alone if it holds the chart name. */}}
{{- define "kubeprov.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kubeprov.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubeprov.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kubeprov.labels" -}}
{{ include "kubeprov.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- include "kubeprov.extraLabels" . }}
{{- end }}

{{/* A pod template's labels: the selector's and the user's. */}}
{{- define "kubeprov.podLabels" -}}
{{ include "kubeprov.selectorLabels" . }}
{{- include "kubeprov.extraLabels" . }}
{{- end }}

{{/*
The pods' ServiceAccount. rbac.serviceAccountName (nfs-server-provisioner's
key) names an existing one when rbac.create is false (with rbac.create
true only its default, "default", is accepted).
*/}}
{{- define "kubeprov.serviceAccountName" -}}
{{- $existing := (.Values.rbac).serviceAccountName }}
{{- if .Values.rbac.create }}
{{- /* There, with rbac.create, it is ignored: its default, "default", is too. */}}
{{- if and $existing (ne $existing "default") }}
{{- fail "rbac.serviceAccountName names an existing ServiceAccount only with rbac.create false; to name the chart's own, use serviceAccount.name" }}
{{- end }}
{{- $existing = "" }}
{{- end }}
{{- if $existing }}
{{- $existing }}
{{- else if .Values.serviceAccount.create }}
{{- default (include "kubeprov.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: name the existing ServiceAccount to run as when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
An image reference: privateRegistry.registryUrl (local-path's) before the
repository, image.digest (nfs-ganesha's) instead of the tag. Call with
(dict "ctx" . "image" $imageValues).
*/}}
{{- define "kubeprov.imageRef" -}}
{{- $registry := "" }}
{{- with .ctx.Values.privateRegistry }}
{{- $registry = .registryUrl }}
{{- end }}
{{- $repository := .image.repository }}
{{- if $registry }}
{{- $repository = printf "%s/%s" $registry $repository }}
{{- end }}
{{- if .image.digest }}
{{- printf "%s@%s" $repository .image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (.image.tag | default .ctx.Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
The provisioner name: storageClass.provisionerName (the key of
nfs-subdir-external-provisioner, local-path-provisioner and
nfs-server-provisioner) when set, else provisionerName, else .default.
Call with (dict "ctx" . "default" $theBinarysDefault).
*/}}
{{- define "kubeprov.provisionerName" -}}
{{- $ctx := .ctx | default . }}
{{- ($ctx.Values.storageClass).provisionerName | default $ctx.Values.provisionerName | default .default | default "" }}
{{- end }}

{{- define "kubeprov.image" -}}
{{- include "kubeprov.imageRef" (dict "ctx" . "image" .Values.image) }}
{{- end }}

{{/*
The namespace of the leader election Lease when it is not the release's:
empty unless leaderElection.enabled and leaderElection.namespace names
another namespace. The Lease rule then moves to a Role there.
*/}}
{{- define "kubeprov.leaseNamespace" -}}
{{- if and .Values.leaderElection.enabled .Values.leaderElection.namespace (ne .Values.leaderElection.namespace (include "kubeprov.namespace" .)) }}
{{- .Values.leaderElection.namespace }}
{{- end }}
{{- end }}

{{/* The leader election flags, when leader election is on. */}}
{{- define "kubeprov.leaderElectionArgs" -}}
{{- if .Values.leaderElection.enabled }}
- --leader-election
{{- with .Values.leaderElection.namespace }}
- --leader-election-namespace={{ . }}
{{- end }}
{{- end }}
{{- end }}

{{/*
What lib/controller calls cluster-wide, for every provisioner: the same rules
as lib/deploy/rbac/clusterrole.yaml (the chart tests compare them).
*/}}
{{- define "kubeprov.libClusterRules" -}}
- apiGroups: [""]
  resources: ["persistentvolumes"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["storage.k8s.io"]
  resources: ["storageclasses"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/*
The in-flight journal in the provisioner's namespace, and the Secret holding
the key that signs its entries (lib/deploy/rbac/role.yaml).
*/}}
{{- define "kubeprov.libJournalRule" -}}
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "create", "update", "patch"]
- apiGroups: [""]
  resources: ["secrets"]
  resourceNames: ["kubeprov-journal-key"]
  verbs: ["get", "update"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create"]
{{- end }}

{{/* The leader election Lease (lib/deploy/rbac/role.yaml). */}}
{{- define "kubeprov.libLeaseRule" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "create", "update"]
{{- end }}

{{/*
The ClusterRole, Role and their bindings: the library's rules plus the
provisioner's own, given as YAML lists in .cluster and .namespace.
Call with (dict "ctx" . "cluster" $ownClusterRules "namespace" $ownRoleRules).
*/}}
{{- define "kubeprov.rbac" -}}
{{- $ctx := .ctx }}
{{- if $ctx.Values.rbac.create }}
{{- $fullname := include "kubeprov.fullname" $ctx }}
{{- $sa := include "kubeprov.serviceAccountName" $ctx }}
{{- $leaseNamespace := include "kubeprov.leaseNamespace" $ctx }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $fullname }}
  labels:
    {{- include "kubeprov.labels" $ctx | nindent 4 }}
rules:
  {{- include "kubeprov.libClusterRules" $ctx | nindent 2 }}
  {{- with .cluster }}
  {{- . | nindent 2 }}
  {{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $fullname }}
  labels:
    {{- include "kubeprov.labels" $ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $fullname }}
subjects:
  - kind: ServiceAccount
    name: {{ $sa }}
    namespace: {{ include "kubeprov.namespace" $ctx }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $fullname }}
  namespace: {{ include "kubeprov.namespace" $ctx }}
  labels:
    {{- include "kubeprov.labels" $ctx | nindent 4 }}
rules:
  {{- include "kubeprov.libJournalRule" $ctx | nindent 2 }}
  {{- if not $leaseNamespace }}
  {{- include "kubeprov.libLeaseRule" $ctx | nindent 2 }}
  {{- end }}
  {{- with .namespace }}
  {{- . | nindent 2 }}
  {{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $fullname }}
  namespace: {{ include "kubeprov.namespace" $ctx }}
  labels:
    {{- include "kubeprov.labels" $ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $fullname }}
subjects:
  - kind: ServiceAccount
    name: {{ $sa }}
    namespace: {{ include "kubeprov.namespace" $ctx }}
{{- if $leaseNamespace }}
---
# leaderElection.namespace: the Lease lives there.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $fullname }}-leader-election
  namespace: {{ $leaseNamespace }}
  labels:
    {{- include "kubeprov.labels" $ctx | nindent 4 }}
rules:
  {{- include "kubeprov.libLeaseRule" $ctx | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $fullname }}-leader-election
  namespace: {{ $leaseNamespace }}
  labels:
    {{- include "kubeprov.labels" $ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $fullname }}-leader-election
subjects:
  - kind: ServiceAccount
    name: {{ $sa }}
    namespace: {{ include "kubeprov.namespace" $ctx }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kubeprov.serviceAccount" -}}
{{- if and .Values.serviceAccount.create (or .Values.rbac.create (not (.Values.rbac).serviceAccountName)) }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "kubeprov.serviceAccountName" . }}
  namespace: {{ include "kubeprov.namespace" . }}
  labels:
    {{- include "kubeprov.labels" . | nindent 4 }}
  {{- with .Values.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
The StorageClass from storageClass.*: provisioner is its provisioner name;
optional: volumeBindingMode, parameters and mountOptions computed by the
chart (instead of storageClass.*'s), and sc, another storageClass-shaped
dict with its name (local-path's storageClassConfigs).
*/}}
{{- define "kubeprov.storageClass" -}}
{{- $ctx := .ctx }}
{{- $sc := .sc | default $ctx.Values.storageClass }}
{{- if $sc.create }}
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: {{ required "storageClass.name is required when storageClass.create is true" $sc.name }}
  labels:
    {{- include "kubeprov.labels" $ctx | nindent 4 }}
  {{- if or $sc.defaultClass $sc.annotations $sc.defaultVolumeType }}
  annotations:
    {{- if $sc.defaultClass }}
    storageclass.kubernetes.io/is-default-class: "true"
    {{- end }}
    {{- with $sc.defaultVolumeType }}
    defaultVolumeType: {{ . | quote }}
    {{- end }}
    {{- with $sc.annotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
provisioner: {{ .provisioner }}
reclaimPolicy: {{ $sc.reclaimPolicy }}
volumeBindingMode: {{ .volumeBindingMode | default $sc.volumeBindingMode }}
{{- with $sc.allowVolumeExpansion }}
allowVolumeExpansion: {{ . }}
{{- end }}
{{- with (hasKey . "parameters" | ternary .parameters $sc.parameters) }}
parameters:
  {{- range $k, $v := . }}
  {{ $k }}: {{ $v | toString | quote }}
  {{- end }}
{{- end }}
{{- with .mountOptions | default $sc.mountOptions }}
mountOptions:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $sc.allowedTopologies }}
allowedTopologies:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- end }}

{{/* Scheduling and pod-level settings every workload shares. */}}
{{- define "kubeprov.podScheduling" -}}
{{- $pullSecrets := .Values.imagePullSecrets | default list }}
{{- with (.Values.defaultSettings).registrySecret }}
{{- $pullSecrets = append $pullSecrets (dict "name" .) }}
{{- end }}
{{- with $pullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The shared http endpoint: port, probes. */}}
{{- define "kubeprov.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: http
readinessProbe:
  httpGet:
    path: /readyz
    port: http
{{- end }}

{{/*
extraArgs: a list of arguments, or (nfs-ganesha's form) a map of flag
names to values, each given as --name=value.
*/}}
{{/* A map as key=value,... (the form of a map flag). */}}
{{- define "kubeprov.commaPairs" -}}
{{- $pairs := list }}
{{- range $k, $v := . }}
{{- $pairs = append $pairs (printf "%s=%v" $k $v) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{- define "kubeprov.extraArgs" -}}
{{- if kindIs "map" .Values.extraArgs }}
{{- range $name, $value := .Values.extraArgs }}
- {{ printf "--%s=%v" $name $value | quote }}
{{- end }}
{{- else }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
podDisruptionBudget.enabled: a PodDisruptionBudget over the release's pods
with the other podDisruptionBudget keys as its spec (maxUnavailable,
minAvailable, unhealthyPodEvictionPolicy), maxUnavailable 1 when neither
bound is given.
*/}}
{{- define "kubeprov.podDisruptionBudget" -}}
{{- $pdb := .Values.podDisruptionBudget | default dict }}
{{- if $pdb.enabled }}
{{- $spec := omit $pdb "enabled" }}
{{- if not (or (hasKey $spec "maxUnavailable") (hasKey $spec "minAvailable")) }}
{{- $_ := set $spec "maxUnavailable" 1 }}
{{- end }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "kubeprov.fullname" . }}
  namespace: {{ include "kubeprov.namespace" . }}
  labels:
    {{- include "kubeprov.labels" . | nindent 4 }}
spec:
  selector:
    matchLabels:
      {{- include "kubeprov.selectorLabels" . | nindent 6 }}
  {{- toYaml $spec | nindent 2 }}
{{- end }}
{{- end }}

{{/*
NOTES.txt: what helm uninstall leaves, the objects the provisioner writes at
run time. Call with (dict "ctx" . "leader" $electsALeader).
*/}}
{{- define "kubeprov.uninstallNotes" -}}
{{- $ns := include "kubeprov.namespace" .ctx }}
{{- $selector := "app.kubernetes.io/managed-by=kubeprov-external-storage" -}}
helm uninstall removes what the chart installed, not what the provisioner
writes at run time: its in-flight journal, ConfigMaps in {{ $ns }} labelled
{{ $selector }},
the Secret kubeprov-journal-key that signs the journal's entries
{{- if .leader }}, and its leader election Lease in {{ .ctx.Values.leaderElection.namespace | default $ns }}{{ end }}.
A journal whose data has keys other than "_class.*" lists operations still in
flight, which the provisioner finishes when installed again (the storage of
a claim deleted meanwhile would otherwise stay; an operation that another
provisioner may have finished meanwhile is never provisioned again). Once it
has none, or another provisioner serves those claims, and the release is
gone for good, remove them (the Secret only if no other kubeprov provisioner
runs in {{ $ns }}: it signs their journals too):
  kubectl delete configmap -n {{ $ns }} -l {{ $selector }}
  kubectl delete secret -n {{ $ns }} kubeprov-journal-key
{{- if .leader }}
  kubectl get lease -n {{ .ctx.Values.leaderElection.namespace | default $ns }}   # then: kubectl delete lease -n ... <the provisioner's>
{{- end }}
{{- end }}

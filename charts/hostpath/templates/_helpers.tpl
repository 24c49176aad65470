{{/*
Copyright 2026 The external-storage Authors.
SPDX-License-Identifier: Apache-2.0

Helpers shared, word for word, by every chart under charts/ (the chart tests
check that the copies are equal).
*/}}

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
{{- end }}

{{- define "kubeprov.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kubeprov.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: name the existing ServiceAccount to run as when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kubeprov.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
The namespace of the leader election Lease when it is not the release's:
empty unless leaderElection.enabled and leaderElection.namespace names
another namespace. The Lease rule then moves to a Role there.
*/}}
{{- define "kubeprov.leaseNamespace" -}}
{{- if and .Values.leaderElection.enabled .Values.leaderElection.namespace (ne .Values.leaderElection.namespace .Release.Namespace) }}
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
  verbs: ["get"]
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
    namespace: {{ $ctx.Release.Namespace }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $fullname }}
  namespace: {{ $ctx.Release.Namespace }}
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
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "kubeprov.labels" $ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $fullname }}
subjects:
  - kind: ServiceAccount
    name: {{ $sa }}
    namespace: {{ $ctx.Release.Namespace }}
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
    namespace: {{ $ctx.Release.Namespace }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kubeprov.serviceAccount" -}}
{{- if .Values.serviceAccount.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "kubeprov.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "kubeprov.labels" . | nindent 4 }}
  {{- with .Values.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{/* The StorageClass from storageClass.*; provisioner is its provisioner name. */}}
{{- define "kubeprov.storageClass" -}}
{{- $ctx := .ctx }}
{{- $sc := $ctx.Values.storageClass }}
{{- if $sc.create }}
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: {{ required "storageClass.name is required when storageClass.create is true" $sc.name }}
  labels:
    {{- include "kubeprov.labels" $ctx | nindent 4 }}
  {{- if or $sc.defaultClass $sc.annotations }}
  annotations:
    {{- if $sc.defaultClass }}
    storageclass.kubernetes.io/is-default-class: "true"
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
{{- with $sc.parameters }}
parameters:
  {{- range $k, $v := . }}
  {{ $k }}: {{ $v | toString | quote }}
  {{- end }}
{{- end }}
{{- with $sc.mountOptions }}
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
{{- with .Values.imagePullSecrets }}
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

{{- define "kubeprov.extraArgs" -}}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/*
NOTES.txt: what helm uninstall leaves, the objects the provisioner writes at
run time. Call with (dict "ctx" . "leader" $electsALeader).
*/}}
{{- define "kubeprov.uninstallNotes" -}}
{{- $ns := .ctx.Release.Namespace }}
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

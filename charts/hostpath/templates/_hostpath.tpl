{{/*
Copyright 2026 The external-storage Authors.
SPDX-License-Identifier: Apache-2.0

This chart's own helpers (the shared ones are charts/common's).
*/}}

{{/* Whether config.json is written and read (--config): "true" or "". */}}
{{- define "hostpath.configured" -}}
{{- if or .Values.nodePathMap .Values.sharedFileSystemPath .Values.storageClassConfigs (include "hostpath.scripted" .) }}true{{ end }}
{{- end }}

{{/* Whether local-path's setup and teardown scripts are given: "true" or "". */}}
{{- define "hostpath.scripted" -}}
{{- if or .Values.configmap.setup .Values.configmap.teardown }}true{{ end }}
{{- end }}

{{/* Whether local-path's helper pod template values are set: "true" or "" (they need the scripts). */}}
{{- define "hostpath.helperPodTemplated" -}}
{{- $hp := .Values.configmap.helperPod }}
{{- if or $hp.name $hp.annotations $hp.priorityClassName .Values.helperPod.resources }}true{{ end }}
{{- end }}

{{/* helperPod.yaml, the pod the scripts run in, from local-path's values: its image runs them. */}}
{{- define "hostpath.helperPodYAML" -}}
{{- $hp := .Values.configmap.helperPod }}
{{- $image := printf "%s:%s" .Values.helperImage.repository (.Values.helperImage.tag | default "latest") }}
{{- with .Values.privateRegistry.registryUrl }}
{{- $image = printf "%s/%s" . $image }}
{{- end }}
{{- $container := dict "name" "helper-pod" "image" $image "imagePullPolicy" .Values.helperImage.pullPolicy }}
{{- with .Values.helperPod.resources }}
{{- $_ := set $container "resources" . }}
{{- end }}
{{- $spec := dict "containers" (list $container) "tolerations" (prepend ($hp.tolerations | default list) (dict "key" "node.kubernetes.io/disk-pressure" "operator" "Exists" "effect" "NoSchedule")) }}
{{- with $hp.priorityClassName }}
{{- $_ := set $spec "priorityClassName" . }}
{{- end }}
{{- with .Values.defaultSettings.registrySecret }}
{{- $_ := set $spec "imagePullSecrets" (list (dict "name" .)) }}
{{- end }}
{{- $meta := dict "name" ($hp.name | default "helper-pod") }}
{{- with $hp.annotations }}
{{- $_ := set $meta "annotations" . }}
{{- end }}
{{- toYaml (dict "apiVersion" "v1" "kind" "Pod" "metadata" $meta "spec" $spec) }}
{{- end }}

{{- define "hostpath.configMapName" -}}
{{- .Values.configmap.name | default (printf "%s-config" (include "kubeprov.fullname" .)) }}
{{- end }}

{{/* config.json, local-path-provisioner's keys. */}}
{{- define "hostpath.configJSON" -}}
{{- $config := dict }}
{{- with .Values.nodePathMap }}
{{- $_ := set $config "nodePathMap" . }}
{{- end }}
{{- with .Values.sharedFileSystemPath }}
{{- $_ := set $config "sharedFileSystemPath" . }}
{{- end }}
{{- with .Values.sharedFileSystemCapacity }}
{{- $_ := set $config "sharedFileSystemCapacity" . }}
{{- end }}
{{- with .Values.storageClassConfigs }}
{{- $classes := dict }}
{{- range $name, $class := . }}
{{- $_ := set $classes $name (pick $class "nodePathMap" "sharedFileSystemPath" "sharedFileSystemCapacity") }}
{{- end }}
{{- $_ := set $config "storageClassConfigs" $classes }}
{{- end }}
{{- if not (or $config.nodePathMap $config.sharedFileSystemPath) }}
{{- /* Scripts or a pod template alone: every node's path is pvDir. */}}
{{- $_ := set $config "nodePathMap" (list (dict "node" "DEFAULT_PATH_FOR_NON_LISTED_NODES" "paths" (list .Values.pvDir))) }}
{{- end }}
{{- toPrettyJson $config }}
{{- end }}

{{/* Every node path config.json names, sorted, once each, as a JSON list. */}}
{{- define "hostpath.configPaths" -}}
{{- $config := include "hostpath.configJSON" . | fromJson }}
{{- $paths := list }}
{{- range $entry := prepend (values ($config.storageClassConfigs | default dict)) $config }}
{{- range $entry.nodePathMap }}
{{- $paths = concat $paths .paths }}
{{- end }}
{{- with $entry.sharedFileSystemPath }}
{{- $paths = append $paths . }}
{{- end }}
{{- end }}
{{- $paths | uniq | sortAlpha | toJson }}
{{- end }}

{{/*
A class's pathPattern: local-path-provisioner's Go template spelling of the
claim's namespace and name read as ours; any other template is refused.
*/}}
{{- define "hostpath.pathPattern" -}}
{{- $p := regexReplaceAll "\\{\\{-?\\s*\\.PVC\\.Namespace\\s*-?\\}\\}" . "${.PVC.namespace}" }}
{{- $p = regexReplaceAll "\\{\\{-?\\s*\\.PVC\\.Name\\s*-?\\}\\}" $p "${.PVC.name}" }}
{{- if contains "{{" $p }}
{{- fail (printf "storageClass.pathPattern %q: only {{ .PVC.Namespace }} and {{ .PVC.Name }} are read from local-path's Go template spelling; write it as pathPattern: ${.PVC.namespace}, ${.PVC.name}, ${.PVC.labels.<key>}, ${.PVC.annotations.<key>}" .) }}
{{- end }}
{{- $p }}
{{- end }}

{{/*
A class's parameters, from storageClass-shaped values: parameters, with
pathPattern set by local-path's key. Refuses the keys this provisioner has
no meaning for. As JSON.
*/}}
{{- define "hostpath.classParameters" -}}
{{- $parameters := deepCopy (.parameters | default dict) }}
{{- with .pathPattern }}
{{- $_ := set $parameters "pathPattern" (include "hostpath.pathPattern" .) }}
{{- end }}
{{- if or .userPattern .groupPattern }}
{{- fail "storageClass.userPattern, groupPattern: new directories are root's here; give the pods' user write access with securityContext.fsGroup or the mode (storageClass.permPattern)" }}
{{- end }}
{{- toJson $parameters }}
{{- end }}

{{/*
A probe from health.<name>: local-path-provisioner's path /health, /ready
and port name health read as ours; else default.
Call with (dict "probe" $given "default" $ours).
*/}}
{{- define "hostpath.probe" -}}
{{- $probe := deepCopy (.probe | default .default) }}
{{- with $probe.httpGet }}
{{- $paths := dict "/health" "/healthz" "/ready" "/readyz" }}
{{- $_ := set . "path" (get $paths (toString .path) | default .path) }}
{{- if eq (toString .port) "health" }}
{{- $_ := set . "port" "http" }}
{{- end }}
{{- end }}
{{- toYaml $probe }}
{{- end }}

{{/* A toleration as --helper-toleration takes it, KEY[=VALUE][:EFFECT]. */}}
{{- define "hostpath.tolerationFlag" -}}
{{- if not .key }}
{{- fail "configmap.helperPod.tolerations: a toleration without a key tolerates every taint, which helper pods may not; name the taint's key" }}
{{- end }}
{{- if .tolerationSeconds }}
{{- fail "configmap.helperPod.tolerations: tolerationSeconds has no meaning for helper pods (they end within helperPod.timeout); remove it" }}
{{- end }}
{{- .key }}{{ with .value }}={{ . }}{{ end }}{{ with .effect }}:{{ . }}{{ end }}
{{- end }}

{{/*
capacity.enabled: kube-scheduler reads the CSIStorageCapacity objects only
through a CSIDriver named after the provisioner, and CSIDriver names are
DNS subdomains; hostpath-provisioner refuses --enable-capacity otherwise,
so refuse it here, with the same advice, rather than crash-loop.
*/}}
{{- define "hostpath.checkCapacity" -}}
{{- if .Values.capacity.enabled }}
{{- $provisioner := include "kubeprov.provisionerName" (dict "ctx" . "default" "kubeprov.io/hostpath") }}
{{- if or (gt (len $provisioner) 253) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $provisioner)) }}
{{- fail (printf "capacity.enabled needs a provisioner name that can name a CSIDriver object (a DNS subdomain such as hostpath.kubeprov.io), got %q: set provisionerName" $provisioner) }}
{{- end }}
{{- end }}
{{- end }}

# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# shellcheck shell=bash
# The versions of the real Kubernetes components tests run, in one place:
# sourced by hack/controlplane.sh (etcd, kube-apiserver,
# kube-controller-manager) and hack/node.sh (kubelet, kube-scheduler,
# containerd, CNI plugins). Each set is built into a cache directory named
# after its versions, so changing one here rebuilds exactly what it affects.
# shellcheck disable=SC2034 # used by the scripts that source this file

K8S_VERSION=v1.36.3      # k8s.io/kubernetes: control plane binaries and kubelet
K8S_LIB_VERSION=v0.36.3  # its staging modules (k8s.io/api, ...), as the project's go.mod
ETCD_VERSION=v3.6.16     # Kubernetes 1.36 needs at least 3.5.24
CONTAINERD_VERSION=v2.4.2 # Kubernetes 1.36 needs containerd 2
CNI_PLUGINS_VERSION=v1.9.1

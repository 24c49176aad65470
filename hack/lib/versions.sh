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

# The supported Kubernetes minors (README.md), newest first, each at the patch
# release tests build: make test runs everything against the newest and the
# lib, csi and e2e hostpath suites again against the oldest (make test-oldest).
K8S_SUPPORTED_VERSIONS=(v1.36.3 v1.35.4 v1.34.4)
K8S_OLDEST_VERSION=${K8S_SUPPORTED_VERSIONS[-1]}
# KUBEPROV_KUBE_VERSION picks another one (as test/framework does); the
# default is the newest, whose libraries the project's go.mod files require.
K8S_VERSION=${KUBEPROV_KUBE_VERSION:-${K8S_SUPPORTED_VERSIONS[0]}} # k8s.io/kubernetes: control plane binaries and kubelet
[[ $K8S_VERSION == v* ]] || K8S_VERSION=v$K8S_VERSION
K8S_MINOR=${K8S_VERSION#v1.}
K8S_MINOR=${K8S_MINOR%%.*}
K8S_LIB_VERSION=v0.${K8S_VERSION#v1.} # its staging modules (k8s.io/api, ...) at the same minor and patch
ETCD_VERSION=v3.6.16     # Kubernetes 1.36 needs at least 3.5.24; 1.34 and 1.35 run on 3.6 too
CONTAINERD_VERSION=v2.4.2 # Kubernetes 1.36 needs containerd 2
CNI_PLUGINS_VERSION=v1.9.1

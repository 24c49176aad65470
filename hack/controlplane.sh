#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Builds the real Kubernetes control plane used by tests and `make demo`: etcd,
# kube-apiserver and kube-controller-manager, from the Go module proxy (no prebuilt
# binaries can be downloaded here). Binaries land in a cache directory outside git,
# one directory per version set, so a warm run only checks that they exist.
#
# Usage: hack/controlplane.sh [--print-dir]
#   KUBEPROV_CACHE   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/kubeprov)
set -euo pipefail

# shellcheck source=SCRIPTDIR/lib/build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/build.sh"
build_setup controlplane "controlplane/k8s-$K8S_VERSION-etcd-$ETCD_VERSION" "$@"

if built etcd "$ETCD_VERSION" && built kube-apiserver "$K8S_VERSION" && built kube-controller-manager "$K8S_VERSION"; then
  log "up to date in $bin_dir"
  exit 0
fi

mkdir -p "$bin_dir"
# One source tree per Kubernetes version: both minors may build at once.
src="$cache_root/controlplane/src/$K8S_VERSION"
mkdir -p "$src/etcd" "$src/kubernetes"
start=$SECONDS

if ! built etcd "$ETCD_VERSION"; then
  log "building etcd $ETCD_VERSION (about 1.5 min cold)"
  cat >"$src/etcd/main.go" <<'GO'
// Command etcd is the upstream etcd server, built from the module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  cat >"$src/etcd/go.mod" <<GOMOD
module kubeprov.local/etcd

go 1.26

require (
	go.etcd.io/etcd/api/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/pkg/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/v3 $ETCD_VERSION
	go.etcd.io/etcd/pkg/v3 $ETCD_VERSION
	go.etcd.io/etcd/server/v3 $ETCD_VERSION
)
GOMOD
  (cd "$src/etcd" && GOWORK=off GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || GOWORK=off go mod tidy) \
    || die "go mod tidy for etcd failed (is the Go module proxy reachable?)"
  (cd "$src/etcd" && GOWORK=off CGO_ENABLED=0 go build -o "$bin_dir/etcd.tmp" .) || die "building etcd failed"
  mv "$bin_dir/etcd.tmp" "$bin_dir/etcd"
  echo "$ETCD_VERSION" >"$bin_dir/etcd.version"
  log "etcd built ($((SECONDS - start)) s so far)"
fi

if ! built kube-apiserver "$K8S_VERSION" || ! built kube-controller-manager "$K8S_VERSION"; then
  log "building kube-apiserver and kube-controller-manager $K8S_VERSION (cold: 10-15 min on 2 cores; warm: seconds)"
  replaces=$(k8s_replaces "$src/kubernetes")
  {
    echo "module kubeprov.local/kubernetes"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "$replaces"
  } >"$src/kubernetes/go.mod"
  cat >"$src/kubernetes/tools.go" <<'GO'
//go:build tools

// Package tools pins the Kubernetes commands this module builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
GO
  (cd "$src/kubernetes" && GOWORK=off go mod tidy -e >/dev/null 2>&1; GOWORK=off go mod download) \
    || die "resolving Kubernetes dependencies failed"
  for cmd in kube-apiserver kube-controller-manager; do
    log "compiling $cmd"
    (cd "$src/kubernetes" && GOWORK=off CGO_ENABLED=0 go build -ldflags "$(k8s_ldflags)" -o "$bin_dir/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd") \
      || die "building $cmd failed"
    mv "$bin_dir/$cmd.tmp" "$bin_dir/$cmd"
    echo "$K8S_VERSION" >"$bin_dir/$cmd.version"
    log "$cmd built ($((SECONDS - start)) s so far)"
  done
fi

"$bin_dir/kube-apiserver" --version >&2
log "ready in $bin_dir ($((SECONDS - start)) s)"

#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Builds the real node components test/cluster runs: kubelet and
# kube-scheduler (same Kubernetes version as hack/controlplane.sh, from a
# scratch module of their own beside the control plane's), containerd v2 with
# ctr and the runc shim, and the CNI plugins bridge, host-local and loopback.
# Everything comes from the Go module proxy, statically linked; runc itself is
# Debian's (hack/deps/node.sh). Versions: hack/lib/versions.sh.
#
# Binaries land in one cache directory per version set, so a warm run only
# checks that they exist. An exclusive lock next to it lets parallel callers
# (prepare-test.sh, test binaries) share one build.
#
# Usage: hack/node.sh [--print-dir]
#   KUBEPROV_CACHE   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/kubeprov)
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib/build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/build.sh"
build_setup node "node/k8s-$K8S_VERSION-containerd-$CONTAINERD_VERSION-cni-$CNI_PLUGINS_VERSION" "$@"

# install_bin moves a finished build into place and stamps it.
install_bin() { mv "$bin_dir/$1.tmp" "$bin_dir/$1" && echo "$2" >"$bin_dir/$1.version"; }

mkdir -p "$bin_dir"
exec 9>"$bin_dir.lock"
flock 9

k8s_bins=(kubelet kube-scheduler)
containerd_bins=(containerd ctr containerd-shim-runc-v2)
cni_bins=(bridge host-local loopback)
all_built() {
  local b
  for b in "${k8s_bins[@]}"; do built "$b" "$K8S_VERSION" || return 1; done
  for b in "${containerd_bins[@]}"; do built "$b" "$CONTAINERD_VERSION" || return 1; done
  for b in "${cni_bins[@]}"; do built "cni/$b" "$CNI_PLUGINS_VERSION" || return 1; done
}
if all_built; then
  log "up to date in $bin_dir"
  exit 0
fi

# One source tree per Kubernetes version: both minors may build at once.
src="$cache_root/node/src/$K8S_VERSION"
mkdir -p "$src/kubernetes" "$src/containerd" "$src/cni" "$bin_dir/cni"
start=$SECONDS
# Static binaries with one flag set: the Go build cache is shared with the
# control plane build, which compiles most of these packages already.
export GOWORK=off CGO_ENABLED=0

# scratch_module writes dir/go.mod (module name, requirements, optional
# replace block on stdin) and dir/tools.go importing the commands, then
# resolves the dependencies.
scratch_module() {
  local dir=$1 name=$2 require=$3 cmds=$4 replace
  replace=$(cat)
  printf 'module kubeprov.local/%s\n\ngo 1.26\n\nrequire %s\n\n%s\n' "$name" "$require" "$replace" >"$dir/go.mod"
  {
    printf '//go:build tools\n\n// Package tools pins the commands this module builds.\npackage tools\n\nimport (\n'
    local c
    for c in $cmds; do printf '\t_ "%s"\n' "$c"; done
    printf ')\n'
  } >"$dir/tools.go"
  (cd "$dir" && go mod tidy -e >/dev/null 2>&1; go mod download) || die "resolving the dependencies of $name failed (is the Go module proxy reachable?)"
}

if ! built kubelet "$K8S_VERSION" || ! built kube-scheduler "$K8S_VERSION"; then
  log "building kubelet and kube-scheduler $K8S_VERSION (about 2 min once the control plane is built)"
  k8s_replaces "$src/kubernetes" | scratch_module "$src/kubernetes" kubelet "k8s.io/kubernetes $K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler"
  for cmd in "${k8s_bins[@]}"; do
    log "compiling $cmd"
    (cd "$src/kubernetes" && go build -ldflags "$(k8s_ldflags)" -o "$bin_dir/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd") || die "building $cmd failed"
    install_bin "$cmd" "$K8S_VERSION"
    log "$cmd built ($((SECONDS - start)) s so far)"
  done
fi

if ! built containerd "$CONTAINERD_VERSION" || ! built ctr "$CONTAINERD_VERSION" || ! built containerd-shim-runc-v2 "$CONTAINERD_VERSION"; then
  log "building containerd $CONTAINERD_VERSION, ctr and the runc shim (about 3 min cold)"
  mod=github.com/containerd/containerd/v2
  scratch_module "$src/containerd" containerd "$mod $CONTAINERD_VERSION" \
    "$mod/cmd/containerd $mod/cmd/ctr $mod/cmd/containerd-shim-runc-v2" </dev/null
  # No btrfs, devmapper or zfs snapshotters (they need cgo); the shim needs no gRPC.
  tags="no_btrfs no_devmapper no_zfs urfave_cli_no_docs osusergo netgo"
  ldflags="-s -w -X $mod/version.Version=$CONTAINERD_VERSION"
  for cmd in "${containerd_bins[@]}"; do
    t=$tags
    [[ $cmd == containerd-shim-runc-v2 ]] && t+=" no_grpc"
    log "compiling $cmd"
    (cd "$src/containerd" && go build -tags "$t" -ldflags "$ldflags" -o "$bin_dir/$cmd.tmp" "$mod/cmd/$cmd") || die "building $cmd failed"
    install_bin "$cmd" "$CONTAINERD_VERSION"
  done
  log "containerd built ($((SECONDS - start)) s so far)"
fi

if ! built cni/bridge "$CNI_PLUGINS_VERSION" || ! built cni/host-local "$CNI_PLUGINS_VERSION" || ! built cni/loopback "$CNI_PLUGINS_VERSION"; then
  log "building CNI plugins $CNI_PLUGINS_VERSION (bridge, host-local, loopback)"
  mod=github.com/containernetworking/plugins
  scratch_module "$src/cni" cni "$mod $CNI_PLUGINS_VERSION" \
    "$mod/plugins/main/bridge $mod/plugins/ipam/host-local $mod/plugins/main/loopback" </dev/null
  for p in main/bridge ipam/host-local main/loopback; do
    b=cni/${p#*/}
    (cd "$src/cni" && go build -ldflags "-s -w" -o "$bin_dir/$b.tmp" "$mod/plugins/$p") || die "building $b failed"
    install_bin "$b" "$CNI_PLUGINS_VERSION"
  done
fi

log "ready in $bin_dir ($((SECONDS - start)) s)"

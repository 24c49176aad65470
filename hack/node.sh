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
# shellcheck source=SCRIPTDIR/lib/versions.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/versions.sh"

cache_root=${KUBEPROV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeprov}
bin_dir="$cache_root/node/k8s-$K8S_VERSION-containerd-$CONTAINERD_VERSION-cni-$CNI_PLUGINS_VERSION"

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$bin_dir"
  exit 0
fi

log() { printf '[node] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

command -v go >/dev/null || die "go is not on PATH; install Go 1.26 first"

# A binary counts as built only when its version stamp file matches, so an
# interrupted build is redone instead of trusted.
built() { [[ -x "$bin_dir/$1" && "$(cat "$bin_dir/$1.version" 2>/dev/null)" == "$2" ]]; }
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

src="$cache_root/node/src"
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
  gomod=$(cd "$src/kubernetes" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  [[ -f "$gomod" ]] || die "could not download k8s.io/kubernetes@$K8S_VERSION from the module proxy"
  # Kubernetes points its staging modules at ./staging; outside its repo they
  # come from the proxy at the matching library version.
  {
    echo "replace ("
    sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\t\1 => \1 '"$K8S_LIB_VERSION"'#p' "$gomod"
    echo ")"
  } | scratch_module "$src/kubernetes" kubelet "k8s.io/kubernetes $K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler"
  stamp=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    stamp+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=36 -X $pkg.gitTreeState=clean"
  done
  for cmd in "${k8s_bins[@]}"; do
    log "compiling $cmd"
    (cd "$src/kubernetes" && go build -ldflags "-s -w$stamp" -o "$bin_dir/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd") || die "building $cmd failed"
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

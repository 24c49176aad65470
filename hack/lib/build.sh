# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# shellcheck shell=bash
# What hack/controlplane.sh and hack/node.sh share: the versions, the cache
# directory (one per version set, printed by --print-dir), logging, build
# stamps, and how Kubernetes commands are built outside its repository.
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib/build.sh"
#   build_setup <log prefix> <directory under the cache> "$@"
#
# build_setup sets cache_root and bin_dir, and exits after printing bin_dir
# when the first argument is --print-dir.

# shellcheck source=SCRIPTDIR/versions.sh
source "$(dirname "${BASH_SOURCE[0]}")/versions.sh"

build_setup() {
  _build_log_prefix=$1
  [[ $K8S_VERSION =~ ^v1\.[0-9]+\.[0-9]+$ ]] ||
    die "KUBEPROV_KUBE_VERSION=$KUBEPROV_KUBE_VERSION: want v1.MINOR.PATCH, such as one of the supported ${K8S_SUPPORTED_VERSIONS[*]}"
  cache_root=${KUBEPROV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeprov}
  bin_dir="$cache_root/$2"
  if [[ "${3:-}" == "--print-dir" ]]; then
    echo "$bin_dir"
    exit 0
  fi
  command -v go >/dev/null || die "go is not on PATH; install Go 1.26 first"
}

log() { printf '[%s] %s\n' "$_build_log_prefix" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# A binary counts as built only when its version stamp file matches, so an
# interrupted build is redone instead of trusted.
built() { [[ -x "$bin_dir/$1" && "$(cat "$bin_dir/$1.version" 2>/dev/null)" == "$2" ]]; }

# k8s_replaces prints the replace block of a scratch module requiring
# k8s.io/kubernetes: Kubernetes points its staging modules at ./staging;
# outside its repo they come from the proxy at the matching library version.
# It downloads k8s.io/kubernetes's go.mod, from the directory dir.
k8s_replaces() {
  local dir=$1 gomod
  gomod=$(cd "$dir" && GOWORK=off GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  [[ -f "$gomod" ]] || die "could not download k8s.io/kubernetes@$K8S_VERSION from the module proxy"
  echo "replace ("
  sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\t\1 => \1 '"$K8S_LIB_VERSION"'#p' "$gomod"
  echo ")"
}

# k8s_ldflags stamps the version, or /version reports v0.0.0-master.
k8s_ldflags() {
  local pkg stamp="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    stamp+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$K8S_MINOR -X $pkg.gitTreeState=clean"
  done
  echo "$stamp"
}

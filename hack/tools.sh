#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Builds a tool of hack/tools once per version into a cache shared by every
# clone (as the control plane is: a fresh clone no longer rebuilds
# golangci-lint for minutes), and prints the binary's path:
#
#   hack/tools.sh NAME          build it unless cached, print its path
#   hack/tools.sh --path NAME   print the path only (for make rules)
#
# NAME is golangci-lint or apidiff (the versions pinned in hack/tools/go.mod)
# or one of the project's own, imagebuild or modproxy (hack/tools/cmd/NAME,
# versioned by a hash of its sources). The key also holds the Go version, so a Go upgrade
# rebuilds tools that must understand the code they read:
#
#   ${KUBEPROV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeprov}/tools/<name>-<version>-<go version>
set -euo pipefail
usage() {
  echo "usage: $0 [--path] golangci-lint|apidiff|imagebuild|modproxy" >&2
  exit 2
}
path_only=
if [[ ${1:-} == --path ]]; then
  path_only=1
  shift
fi
[[ $# -eq 1 ]] || usage
name=$1
tools=$(cd "$(dirname "${BASH_SOURCE[0]}")/tools" && pwd)

# module_version prints the version hack/tools/go.mod requires of a module
# (read from the file: make evaluates --path on every run).
module_version() {
  sed -n "s#^[[:space:]]*$1 \(v[^[:space:]]*\).*#\1#p" "$tools/go.mod" | head -n1
}
case $name in
  golangci-lint)
    pkg=github.com/golangci/golangci-lint/v2/cmd/golangci-lint
    version=$(module_version github.com/golangci/golangci-lint/v2)
    ;;
  apidiff)
    pkg=golang.org/x/exp/cmd/apidiff
    version=$(module_version golang.org/x/exp)
    ;;
  imagebuild | modproxy)
    pkg=./cmd/$name
    version=src-$(cd "$tools" && cat go.mod go.sum "cmd/$name"/*.go | sha256sum | cut -c1-16)
    ;;
  *) usage ;;
esac
[[ -n $version ]] || { echo "tools: no version of $name in $tools/go.mod" >&2; exit 1; }
go_version=$(go env GOVERSION)
bin=${KUBEPROV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeprov}/tools/$name-$version-$go_version
if [[ -z $path_only && ! -x $bin ]]; then
  echo "[tools] building $name $version with $go_version into $bin (once per version)" >&2
  mkdir -p "$(dirname "$bin")"
  # A temporary name, then a rename: parallel callers never run a half-written binary.
  (cd "$tools" && GOWORK=off go build -trimpath -o "$bin.tmp.$$" "$pkg")
  mv "$bin.tmp.$$" "$bin"
fi
echo "$bin"

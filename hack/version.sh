#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Prints the version of a module's binaries and images: `hack/version.sh <dir>`.
#
#   on the tag hostpath/v0.2.0, clean tree   -> v0.2.0
#   3 commits after it                       -> v0.2.0-3-gabc1234
#   no hostpath/v* tag reachable             -> v0.0.0-dev+abc1234
#   uncommitted changes                      -> ...-dirty (on either form)
#   not a git checkout                       -> v0.0.0-dev+unknown
#
# Image tags cannot hold "+": hack/build.make tags with "+" replaced by "-".
set -euo pipefail
if [[ $# -ne 1 || -z "$1" ]]; then
  echo "usage: $0 <module dir>, e.g. $0 hostpath" >&2
  exit 2
fi
dir=${1%/}
cd "$(dirname "$0")/.."

if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "v0.0.0-dev+unknown"
  exit 0
fi
# --tags: a lightweight tag counts too, though hack/release.sh makes annotated ones.
if described=$(git describe --tags --match "${dir}/v*" --dirty 2>/dev/null); then
  echo "${described#"${dir}/"}"
else
  # Not describe --always: it would name another module's tag.
  dirty=""
  git diff --quiet HEAD -- 2>/dev/null || dirty="-dirty"
  echo "v0.0.0-dev+$(git rev-parse --short=7 HEAD 2>/dev/null || echo unknown)${dirty}"
fi

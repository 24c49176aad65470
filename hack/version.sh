#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Prints the version of a module's binaries and images: `hack/version.sh <dir>`.
#
#   on a release of hostpath (v0.2.0), clean tree   -> v0.2.0
#   3 commits after it                              -> v0.2.0-3-gabc1234
#   no release of hostpath in HEAD's history        -> v0.0.0-dev+abc1234
#   uncommitted changes                             -> ...-dirty (on either form)
#   not a git checkout                              -> v0.0.0-dev+unknown
#
# Releases are those of releases.yaml (and tags it lacks: hack/tags.sh
# --list), not only the tags present, so a clone without tags gets the same
# version as one with them. "Uncommitted" covers changes to tracked files
# anywhere and untracked, not ignored, files in the module and in lib (which
# every provisioner compiles in through its replace): the build compiles those
# in, so a version without -dirty must not have them (trust issue case 7).
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
# The nearest release in HEAD's history, as git describe would pick its tag.
releases=$(hack/tags.sh --list "$dir")
version="" distance=""
while read -r tag commit; do
  [[ -n "$tag" ]] && git merge-base --is-ancestor "$commit" HEAD 2>/dev/null || continue
  n=$(git rev-list --count "$commit..HEAD")
  if [[ -z "$distance" ]] || ((n <= distance)); then
    version=${tag#"${dir}/"} distance=$n
  fi
done <<<"$releases"

dirty=""
if ! git diff --quiet HEAD -- 2>/dev/null ||
  [[ -n "$(git ls-files --others --exclude-standard -- "$dir" lib | head -n1)" ]]; then
  dirty="-dirty"
fi
if [[ -z "$version" ]]; then
  # Not another module's release: v0.0.0 says this one has none yet.
  echo "v0.0.0-dev+$(git rev-parse --short=7 HEAD 2>/dev/null || echo unknown)${dirty}"
elif [[ "$distance" -eq 0 ]]; then
  echo "${version}${dirty}"
else
  echo "${version}-${distance}-g$(git rev-parse --short HEAD)${dirty}"
fi

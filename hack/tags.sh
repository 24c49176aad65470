#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# The release tags from the ledger, releases.yaml (docs/releasing.md#the-release-ledger):
#
#   hack/tags.sh              (make tags) creates each missing tag <module>/<version>
#                             of the ledger, annotated, on its commit; refuses,
#                             naming them, tags that exist but point elsewhere
#                             (exit 1, nothing created). Idempotent.
#   hack/tags.sh --list [--ledger] [<module>]
#                             prints "<module>/<version> <commit>" per release:
#                             the ledger's, then release tags it lacks (a
#                             checkout older than its own entry, e.g. the
#                             release commit checked out by its tag), unless
#                             --ledger. Where a tag contradicts the ledger, the
#                             ledger wins, with a warning.
#
# Tags do not reach a clone unless fetched, the ledger always does: this is
# how hack/version.sh, hack/modproxy.sh and hack/apidiff.sh see releases,
# whether or not the clone has tags, without writing any.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "tags: $*" >&2; exit 1; }
ledger_file=releases.yaml

# ledger prints "module version commit" per entry; a line that is neither
# an entry, a comment nor blank is an error, so that a typo never hides a release.
ledger() {
  [[ -f $ledger_file ]] || return 0
  local entry='^- \{module: ([a-z][a-z0-9-]*), version: (v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?), commit: ([0-9a-f]{40})(, lib: (v[^,} ]+))?\}[[:space:]]*$'
  local bad
  bad=$(grep -n -v -E -e '^[[:space:]]*(#.*)?$' -e "$entry" "$ledger_file" || true)
  [[ -z "$bad" ]] || die "$ledger_file: not a release entry (want \"- {module: M, version: vX.Y.Z, commit: <40 hex>[, lib: vX.Y.Z]}\"):"$'\n'"$bad"
  sed -E -n "s/$entry/\\1 \\2 \\4/p" "$ledger_file"
}

# tags prints "tag commit" for each release tag <module>/vX.Y.Z[-pre] of the
# modules in versions.yaml.
tags() {
  local m
  for m in $(hack/modules.sh); do
    git for-each-ref --format='%(refname:strip=2) %(*objectname) %(objectname)' "refs/tags/$m/v*" |
      awk -v m="$m" '$1 ~ "^" m "/v[0-9]+\\.[0-9]+\\.[0-9]+(-[0-9A-Za-z.-]+)?$" { print $1, $2 }'
  done
}

# The ledger read once, so that an error in it stops the script.
entries=$(ledger)

list() {
  local only_ledger=0 module=""
  [[ "${1:-}" == --ledger ]] && { only_ledger=1; shift; }
  module=${1:-}
  module=${module%/}
  declare -A in_ledger=()
  local m v c tag at
  while read -r m v c; do
    [[ -n "$m" ]] && [[ -z "$module" || "$m" == "$module" ]] || continue
    in_ledger["$m/$v"]=$c
    echo "$m/$v $c"
  done <<<"$entries"
  [[ $only_ledger -eq 1 ]] && return 0
  while read -r tag at; do
    [[ -z "$module" || "${tag%%/*}" == "$module" ]] || continue
    if [[ -z "${in_ledger[$tag]:-}" ]]; then
      echo "$tag $at"
    elif [[ "${in_ledger[$tag]}" != "$at" ]]; then
      echo "tags: warning: tag $tag is on $at, $ledger_file says ${in_ledger[$tag]}; using $ledger_file's (make tags names every such tag)" >&2
    fi
  done < <(tags)
}

restore() {
  local m v c tag at missing=() conflicts=()
  while read -r m v c; do
    [[ -n "$m" ]] || continue
    tag=$m/$v
    if at=$(git rev-parse -q --verify "refs/tags/$tag^{commit}"); then
      [[ "$at" == "$c" ]] || conflicts+=("$tag is on $at, $ledger_file says $c")
      continue
    fi
    git cat-file -e "$c^{commit}" 2>/dev/null ||
      die "$tag: commit $c is not in this clone (a shallow clone? git fetch --unshallow)"
    missing+=("$tag $c")
  done <<<"$entries"
  if [[ ${#conflicts[@]} -gt 0 ]]; then
    printf 'tags: %s\n' "${conflicts[@]}" >&2
    die "${#conflicts[@]} tag(s) contradict $ledger_file; nothing created. Delete them (git tag -d <tag>) and run make tags again, or fix $ledger_file if it is wrong"
  fi
  # A clone may have no git identity (CI); restored tags then carry the
  # ledger's. The commit's date as the tag's keeps restored tags alike.
  if ! git var GIT_COMMITTER_IDENT >/dev/null 2>&1; then
    export GIT_COMMITTER_NAME="external-storage releases.yaml" GIT_COMMITTER_EMAIL="releases@kubeprov.invalid"
  fi
  local entry
  for entry in "${missing[@]}"; do
    read -r tag c <<<"$entry"
    GIT_COMMITTER_DATE=$(git log -1 --format=%cI "$c") git tag -a "$tag" -m "${tag%%/*} ${tag#*/}" "$c"
    echo "tags: created $tag on $(git rev-parse --short "$c")"
  done
  echo "tags: $(grep -c . <<<"$entries") release(s) in $ledger_file, ${#missing[@]} tag(s) created"
}

case "${1:-}" in
  --list) shift; list "$@" ;;
  "") restore ;;
  *) echo "usage: $0 [--list [--ledger] [<module>]]" >&2; exit 2 ;;
esac

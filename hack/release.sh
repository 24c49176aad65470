#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Releases modules: `hack/release.sh <module>...`, e.g. `hack/release.sh lib
# hostpath` (docs/releasing.md explains the design and the rule below).
#
# Each module's version is its entry in versions.yaml, its tag the annotated
# tag <module>/<version>. lib is released first, whatever the order given.
# Before anything is tagged it checks a clean tree, modules and semver
# versions from versions.yaml, tags that do not exist yet, and a CHANGELOG.md
# per module whose newest section is the version.
#
# lib is tagged on HEAD (after hack/apidiff.sh and its unit tests).
# Provisioners get a release commit: their go.mod requires lib by its newest
# release in HEAD's history, with no replace, so that `go install
# .../<module>/cmd/<binary>@<version>` resolves lib from a proxy. The rule: a
# provisioner is refused when there is no such lib release, or when, alone
# (GOWORK=off) against that lib as zipped from its tag (hack/modproxy.sh), it
# does not build, vet or pass its unit tests: it then needs lib changes that
# are not released. The provisioners are tagged on that commit, and the next
# commit puts their go.mod and go.sum back as they were (replace => ../lib),
# so development never waits for a lib release.
#
# Every release is recorded in releases.yaml, the ledger that `make tags`
# restores tags from (tags do not reach clones): module, version, commit and
# a provisioner's lib version. A commit cannot name itself, so each entry goes
# into the next commit this script makes: lib's into the release commit (or,
# releasing lib alone, a commit of its own), the provisioners' into the
# commit after theirs. Nothing else writes the ledger.
#
# If any step fails, the commits and tags of this run are undone.
# RELEASE_SKIP_TESTS=1 skips the unit tests (the tests of this script use
# it). Nothing is pushed: the script prints the command that publishes.
set -euo pipefail
die() { echo "release: $*" >&2; exit 1; }
step() { echo "[release] $*"; }

[[ $# -ge 1 ]] || { echo "usage: $0 <module>..., e.g. $0 lib hostpath" >&2; exit 2; }
cd "$(dirname "$0")/.."
lib_path=github.com/kubeprov/external-storage/lib
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$'

dirty=$(git status --porcelain)
[[ -z "$dirty" ]] || die "the working tree is not clean; commit or stash first:"$'\n'"$dirty"

version_of() { sed -n "s/^${1}:[[:space:]]*\([^[:space:]#]*\).*/\1/p" versions.yaml; }

# check_changelog <module> <version>: the newest "## vX.Y.Z" section of
# <module>/CHANGELOG.md is this version, and it lists a change.
check_changelog() {
  local file="$1/CHANGELOG.md" newest lines
  [[ -f "$file" ]] || die "$file does not exist: write its $2 section first (docs/releasing.md#changelogs)"
  newest=$(sed -n 's/^## \(v[^[:space:]]*\).*/\1/p' "$file" | head -n1)
  [[ "$newest" == "$2" ]] || die "$file has no section for $2 at the top (its newest section is \"${newest:-none}\"): add \"## $2\" with what changed for users (docs/releasing.md#changelogs)"
  lines=$(awk -v v="$2" '/^## /{on = ($2 == v); next} on && /^[-*] /' "$file" | wc -l)
  [[ "$lines" -gt 0 ]] || die "$file: the $2 section lists no change (lines starting with \"- \")"
}

# The modules asked for, in versions.yaml's order (lib first), each checked.
for arg in "$@"; do
  [[ -n "$(version_of "${arg%/}")" ]] || die "${arg%/} is not a module in versions.yaml (modules: $(hack/modules.sh | tr '\n' ' '))"
done
release_lib=0
provisioners=()
for m in $(hack/modules.sh); do
  for arg in "$@"; do
    [[ "${arg%/}" == "$m" ]] || continue
    version=$(version_of "$m")
    [[ "$version" =~ $semver ]] || die "versions.yaml gives $m the version \"$version\": want vMAJOR.MINOR.PATCH[-PRERELEASE]"
    if at=$(hack/tags.sh --list "$m" | awk -v t="$m/$version" '$1 == t { print $2 }') && [[ -n "$at" ]]; then
      die "$m/$version exists already (on $(git rev-parse --short "$at"), releases.yaml or a tag): set the next version of $m in versions.yaml"
    fi
    check_changelog "$m" "$version"
    if [[ "$m" == lib ]]; then release_lib=1; else provisioners+=("$m"); fi
    break
  done
done

# Undo this run's tags and commits unless it completes.
start=$(git rev-parse HEAD)
created=()
completed=0
undo() {
  [[ $completed -eq 1 ]] && return
  for t in "${created[@]}"; do git tag -d "$t" >/dev/null; done
  git reset -q --hard "$start"
  echo "release: nothing released: the tags and commits of this run are undone" >&2
}
trap undo EXIT
tag() {
  git tag -a "$1" -m "${1%%/*} ${1#*/}"
  created+=("$1")
  step "tagged $1 at $(git rev-parse --short HEAD)"
}
# record <tag> [<lib version>]: the ledger entry of a tag just made on HEAD,
# committed by the next commit of this run.
record() {
  local lib=""
  [[ -z "${2:-}" ]] || lib=", lib: $2"
  echo "- {module: ${1%%/*}, version: ${1#*/}, commit: $(git rev-parse HEAD)${lib}}" >>releases.yaml
}
run_tests() {
  if [[ "${RELEASE_SKIP_TESTS:-}" == 1 ]]; then
    step "RELEASE_SKIP_TESTS=1: not running the tests of $1"
  else
    step "unit tests: make test/$1"
    make --no-print-directory "test/$1"
  fi
}

if [[ $release_lib -eq 1 ]]; then
  step "API compatibility of lib with its last release"
  hack/apidiff.sh
  run_tests lib
  tag "lib/$(version_of lib)"
  record "lib/$(version_of lib)"
  if [[ ${#provisioners[@]} -eq 0 ]]; then
    git commit -q -m "release: lib $(version_of lib) in releases.yaml" -- releases.yaml
  fi
fi

if [[ ${#provisioners[@]} -gt 0 ]]; then
  # The newest lib release (not a pre-release) in HEAD's history, from the
  # ledger, so that a clone without tags releases as one with them.
  lib_tag="" lib_commit=""
  while read -r t at; do
    [[ "$t" =~ ^lib/v[0-9]+\.[0-9]+\.[0-9]+$ ]] && git merge-base --is-ancestor "$at" HEAD 2>/dev/null || continue
    if [[ -z "$lib_tag" || "$(printf '%s\n%s\n' "$lib_tag" "$t" | sort -V | tail -n1)" == "$t" ]]; then
      lib_tag=$t lib_commit=$at
    fi
  done <<<"$(hack/tags.sh --list lib)"
  [[ -n "$lib_tag" ]] || die "${provisioners[*]}: needs an unreleased lib: no lib/vX.Y.Z release is in HEAD's history; release lib with it: $0 lib ${provisioners[*]}"
  lib_version=${lib_tag#lib/}
  unreleased=$(git log --oneline "$lib_commit..HEAD" -- lib)
  if [[ -n "$unreleased" ]]; then
    step "lib changed since $lib_tag; ${provisioners[*]} must build and pass their tests without these commits:"$'\n'"$unreleased"
  fi

  # Our modules come only from the zips of the tags, through a module cache
  # of this run's own: a zip cached under the same version by a test or an
  # earlier attempt must never stand in for the tag's and end up in go.sum.
  # Other modules come from the usual module cache's downloads, else the
  # usual proxy. -trimpath keeps compiled packages shared with the usual
  # build cache despite the other module cache.
  modcache=$(mktemp -d)
  trap 'undo; chmod -R u+w "$modcache"; rm -rf "$modcache"' EXIT
  GOPROXY="file://$(go env GOMODCACHE)/cache/download,$(go env GOPROXY)"
  goflags=$(go env GOFLAGS)
  export GOPROXY GOMODCACHE=$modcache GOFLAGS="${goflags:+$goflags }-modcacherw -trimpath" GOWORK=off
  # shellcheck disable=SC2046 # GOPROXY=... GONOSUMDB=... words
  export $(hack/modproxy.sh)

  files=()
  for m in "${provisioners[@]}"; do
    step "$m: requires lib $lib_version with no replace"
    (cd "$m" && go mod edit -dropreplace="$lib_path" -require="$lib_path@$lib_version" && go mod tidy) ||
      die "$m: go mod tidy against lib $lib_version failed"
    (cd "$m" && go build ./... && go vet ./...) ||
      die "$m needs an unreleased lib: it does not build or vet alone against lib $lib_version; release lib first: $0 lib ${provisioners[*]}"
    run_tests "$m" ||
      die "$m needs an unreleased lib: its unit tests fail alone against lib $lib_version; release lib first: $0 lib ${provisioners[*]}"
    files+=("$m/go.mod" "$m/go.sum")
  done
  released=$(for m in "${provisioners[@]}"; do printf '%s %s, ' "$m" "$(version_of "$m")"; done)
  ledger=()
  [[ $release_lib -eq 1 ]] && ledger=(releases.yaml)
  git commit -q -m "release: ${released%, } require lib $lib_version with no replace" -- "${files[@]}" "${ledger[@]}"
  for m in "${provisioners[@]}"; do
    tag "$m/$(version_of "$m")"
    record "$m/$(version_of "$m")" "$lib_version"
  done
  git checkout -q "$start" -- "${files[@]}"
  git commit -q -m "after the release of ${provisioners[*]}: back to replace => ../lib for development" -- "${files[@]}" releases.yaml
  step "main continues with replace => ../lib at $(git rev-parse --short HEAD)"
fi

completed=1
push=(HEAD "${created[@]}")
[[ $(git rev-parse HEAD) == "$start" ]] && push=("${created[@]}")
step "publish with: git push --atomic origin ${push[*]}"

#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Tags a release of one module: `hack/release.sh <module>` (see docs/releasing.md).
#
# The version is the module's entry in versions.yaml; the tag is the annotated
# tag <module>/<version> on HEAD. Refuses a dirty tree, a module that is not
# in versions.yaml, a version that is not semver and a tag that exists. Runs
# the module's unit tests first (make test/<module>; RELEASE_SKIP_TESTS=1
# skips them, for tests of this script) and, for lib, hack/apidiff.sh.
# Nothing is pushed: the script prints the command that publishes the tag.
set -euo pipefail
die() { echo "release: $*" >&2; exit 1; }

[[ $# -eq 1 && -n "$1" ]] || { echo "usage: $0 <module>, e.g. $0 hostpath" >&2; exit 2; }
module=${1%/}
cd "$(dirname "$0")/.."

version=$(sed -n "s/^${module}:[[:space:]]*\([^[:space:]#]*\).*/\1/p" versions.yaml)
[[ -n "$version" ]] || die "$module is not a module in versions.yaml (modules: $(hack/modules.sh | tr '\n' ' '))"
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$'
[[ "$version" =~ $semver ]] || die "versions.yaml gives $module the version \"$version\": want vMAJOR.MINOR.PATCH[-PRERELEASE]"
tag="$module/$version"

dirty=$(git status --porcelain)
[[ -z "$dirty" ]] || die "the working tree is not clean; commit or stash first:"$'\n'"$dirty"
if git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
  die "tag $tag exists already (on $(git rev-list -n1 --abbrev-commit "$tag")): set the next version of $module in versions.yaml"
fi

if [[ "$module" == lib ]]; then
  echo "[release] API compatibility of lib with its last release"
  hack/apidiff.sh
fi
if [[ "${RELEASE_SKIP_TESTS:-}" == 1 ]]; then
  echo "[release] RELEASE_SKIP_TESTS=1: not running the tests of $module"
else
  echo "[release] unit tests: make test/$module"
  make --no-print-directory "test/$module"
fi

git tag -a "$tag" -m "$module $version"
echo "[release] tagged $tag at $(git rev-parse --short HEAD)"
echo "[release] publish it with: git push origin $tag"

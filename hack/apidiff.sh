#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# API compatibility of lib (or the module given) between its last release tag
# and the working tree, judged against the next version in versions.yaml:
#
#   incompatible changes  need a new major version (a new minor one while v0)
#   compatible additions  need at least a new minor version
#   no API change         any later version (a patch release)
#
# With no release tag yet, there is nothing to compare and it passes. The
# comparison uses golang.org/x/exp/cmd/apidiff, pinned in hack/tools and
# built once per version (hack/tools.sh).
set -euo pipefail
module=${1:-lib}
module=${module%/}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
die() { echo "apidiff: $*" >&2; exit 1; }

next=$(sed -n "s/^${module}:[[:space:]]*\([^[:space:]#]*\).*/\1/p" versions.yaml)
[[ -n "$next" ]] || die "$module is not a module in versions.yaml"
release='^v([0-9]+)\.([0-9]+)\.([0-9]+)$'
# Pre-release tags are not a compatibility baseline.
last=$(git tag --list "${module}/v*" --sort=-v:refname | sed "s#^${module}/##" | grep -E "$release" | head -n1 || true)
if [[ -z "$last" ]]; then
  echo "apidiff: no ${module}/vX.Y.Z tag yet: nothing to compare (the first release may have any API)"
  exit 0
fi

bin=$(hack/tools.sh apidiff)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
modpath=$(cd "$module" && GOWORK=off go list -m)
# The released API as export data, kept per tagged commit, then compared
# with the module as it is now (both built alone, as a consumer gets them).
old=$root/_output/apidiff/${module}-$(git rev-parse "${module}/${last}^{commit}").export
if [[ ! -s "$old" ]]; then
  mkdir -p "$(dirname "$old")"
  git archive "${module}/${last}" "$module" | tar -x -C "$tmp"
  (cd "$tmp/$module" && GOWORK=off "$bin" -m -w "$old.tmp" "$modpath")
  mv "$old.tmp" "$old"
fi
(cd "$module" && GOWORK=off "$bin" -m "$old" "$modpath") >"$tmp/report"

incompatible=0 compatible=0
grep -q '^Incompatible changes:' "$tmp/report" && incompatible=1
grep -q '^Compatible changes:' "$tmp/report" && compatible=1
if [[ $incompatible -eq 0 && $compatible -eq 0 ]]; then
  echo "apidiff: $module API unchanged since ${module}/${last}"
  exit 0
fi
cat "$tmp/report"

[[ "$last" =~ $release ]]
read -r lmaj lmin lpat <<<"${BASH_REMATCH[1]} ${BASH_REMATCH[2]} ${BASH_REMATCH[3]}"
[[ "$next" =~ ^v([0-9]+)\.([0-9]+)\.([0-9]+) ]] || die "versions.yaml: $module: \"$next\" is not semver"
read -r nmaj nmin npat <<<"${BASH_REMATCH[1]} ${BASH_REMATCH[2]} ${BASH_REMATCH[3]}"
if ((nmaj > lmaj)); then bump="major"
elif ((nmaj == lmaj && nmin > lmin)); then bump="minor"
elif ((nmaj == lmaj && nmin == lmin && npat > lpat)); then bump="patch"
else bump="none"
fi

# The smallest bump semver allows for what changed.
if [[ $incompatible -eq 1 ]]; then
  what="incompatible changes"
  if ((lmaj == 0)); then need=minor; else need=major; fi
else
  what="new API"
  need=minor
fi
case "$need/$bump" in
  major/major | minor/major | minor/minor)
    echo "apidiff: $what since ${module}/${last} are allowed: versions.yaml has $module $next (a $bump release)"
    ;;
  *)
    die "$what since ${module}/${last} need a new $need version, but versions.yaml has $module: $next; bump it (or undo the change)"
    ;;
esac

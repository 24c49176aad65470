#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# API compatibility of lib (or the module given) between its last release
# and the working tree, judged against the next version in versions.yaml:
#
#   incompatible changes  need a new major version (a new minor one while v0)
#   compatible additions  need at least a new minor version
#   no API change         any later version (a patch release)
#
# The last release is the highest vX.Y.Z of the module in releases.yaml, the
# ledger, compared at the commit the ledger names: never whichever tags the
# clone happens to have (a fresh clone has none, and the check would be off).
# Only while the ledger lists no release of the module is there nothing to
# compare (the first release may have any API); once it lists one, a baseline
# that cannot be read is an error. The comparison uses
# golang.org/x/exp/cmd/apidiff, pinned in hack/tools and built once per
# version (hack/tools.sh).
set -euo pipefail
module=${1:-lib}
module=${module%/}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
die() { echo "apidiff: $*" >&2; exit 1; }

next=$(sed -n "s/^${module}:[[:space:]]*\([^[:space:]#]*\).*/\1/p" versions.yaml)
[[ -n "$next" ]] || die "$module is not a module in versions.yaml"
release='^v([0-9]+)\.([0-9]+)\.([0-9]+)$'
# Pre-releases are not a compatibility baseline.
releases=$(hack/tags.sh --list --ledger "$module")
last="" commit=""
while read -r tag at; do
  v=${tag#"${module}/"}
  [[ "$v" =~ $release ]] || continue
  if [[ -z "$last" || "$(printf '%s\n%s\n' "$last" "$v" | sort -V | tail -n1)" == "$v" ]]; then
    last=$v commit=$at
  fi
done <<<"$releases"
if [[ -z "$last" ]]; then
  echo "apidiff: releases.yaml lists no ${module} release yet: nothing to compare (the first release may have any API)"
  exit 0
fi
git cat-file -e "${commit}^{commit}" 2>/dev/null ||
  die "${module}/${last} (releases.yaml) is on ${commit}, which this clone lacks (a shallow clone? git fetch --unshallow): no baseline to compare with"

bin=$(hack/tools.sh apidiff)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
modpath=$(cd "$module" && GOWORK=off go list -m)
# The released API as export data, kept per tagged commit, then compared
# with the module as it is now (both built alone, as a consumer gets them).
old=$root/_output/apidiff/${module}-${commit}.export
if [[ ! -s "$old" ]]; then
  mkdir -p "$(dirname "$old")"
  git archive "$commit" "$module" | tar -x -C "$tmp"
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

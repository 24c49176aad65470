#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# The checks a reviewer makes first. Prints every problem, exits non-zero if any.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
failed=0
fail() { echo "verify: $*" >&2; failed=1; }
step() { echo "[verify] $*"; }

modules="$(hack/modules.sh) test"

step "gofmt"
unformatted=$(git ls-files -co --exclude-standard -- '*.go' | xargs -r gofmt -l)
[[ -z "$unformatted" ]] || fail "not gofmt-clean (run gofmt -w):"$'\n'"$unformatted"

step "license headers"
for f in $(git ls-files -co --exclude-standard -- '*.go' '*.sh' 'Makefile' '*/Makefile' '*.make' '*.py'); do
  [[ -f "$f" ]] || continue
  head -n 5 "$f" | grep -q 'SPDX-License-Identifier: Apache-2.0' || fail "$f: missing license header"
done

step "lib depends on no sibling module and has no replace"
grep -q 'kubeprov/external-storage/' <(grep -v '^module' lib/go.mod) && fail "lib/go.mod requires a sibling module"
grep -q '^replace' lib/go.mod && fail "lib/go.mod has a replace directive"

step "provisioners build against ../lib; each released module has a CHANGELOG.md"
for m in $(hack/modules.sh); do
  [[ -f "$m/CHANGELOG.md" ]] || fail "$m/CHANGELOG.md is missing (docs/releasing.md#changelogs)"
  [[ "$m" == lib ]] && continue
  grep -q '^replace github.com/kubeprov/external-storage/lib => \.\./lib$' "$m/go.mod" ||
    fail "$m/go.mod lacks replace github.com/kubeprov/external-storage/lib => ../lib (only a release commit requires lib by version: docs/releasing.md)"
done

step "go.work matches versions.yaml"
expected=$( (hack/modules.sh; echo test) | sort)
actual=$(sed -n 's#^\s*\./\([a-z0-9/-]*\)$#\1#p' go.work | sort)
[[ "$expected" == "$actual" ]] || fail "go.work is stale: run hack/update-gowork.sh"

for m in $modules; do
  step "$m: vet (workspace), build + vet + tidy (GOWORK=off)"
  (cd "$m" && go vet ./...) || fail "$m: go vet failed"
  (cd "$m" && GOWORK=off go build ./... && GOWORK=off go vet ./...) || fail "$m: GOWORK=off build/vet failed"
  (cd "$m" && GOWORK=off go mod tidy -diff >/dev/null) || fail "$m: go.mod/go.sum not tidy (run make tidy)"
done

# Not in go.work on purpose (hack/modules.sh --standalone): each builds and
# is tidy with its own go.mod alone, as a third party's module is.
for m in $(hack/modules.sh --standalone); do
  step "$m (standalone): build + vet + tidy (GOWORK=off)"
  (cd "$m" && GOWORK=off go build ./... && GOWORK=off go vet ./...) || fail "$m: GOWORK=off build/vet failed"
  (cd "$m" && GOWORK=off go mod tidy -diff >/dev/null) || fail "$m: go.mod/go.sum not tidy (run make tidy)"
done

step "lib: API compatible with its last release, or versions.yaml bumped as semver requires"
hack/apidiff.sh || fail "lib: API change needs a version bump in versions.yaml (docs/releasing.md)"

step "hack/tools: vet + tidy (GOWORK=off; not in go.work)"
(cd hack/tools && GOWORK=off go vet ./... && GOWORK=off go mod tidy -diff >/dev/null) || fail "hack/tools: vet failed or not tidy"

step "shellcheck"
if ! command -v shellcheck >/dev/null; then
  # shellcheck source=SCRIPTDIR/lib/apt.sh
  source hack/lib/apt.sh
  apt_ensure_installed shellcheck || fail "shellcheck could not be installed"
fi
git ls-files -co --exclude-standard -- '*.sh' | xargs -r shellcheck -S warning || fail "shellcheck found problems"

if [[ $failed -ne 0 ]]; then
  echo "verify: FAILED" >&2
  exit 1
fi
echo "verify: all checks passed"

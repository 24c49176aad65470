#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Runs golangci-lint v2 with .golangci.yml in each module given:
#   hack/lint.sh lib csi ...        (make lint passes every module)
# The binary is built once from the version pinned in hack/tools/go.mod into
# _output/tools/ (a cold build takes several minutes) and rebuilt only when
# the pin changes. Extra flags for golangci-lint go in LINT_FLAGS.
set -euo pipefail
if [[ $# -eq 0 ]]; then
  echo "usage: $0 <module dir>..." >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/_output/tools/golangci-lint
pkg=github.com/golangci/golangci-lint/v2

want=$(cd "$root/hack/tools" && GOWORK=off go list -m -f '{{.Version}}' "$pkg")
if [[ ! -x $bin || "$(cat "$bin.version" 2>/dev/null)" != "$want" ]]; then
  echo "[lint] building golangci-lint $want into $bin (once)"
  (cd "$root/hack/tools" && GOWORK=off go build -o "$bin" "$pkg/cmd/golangci-lint")
  echo "$want" >"$bin.version"
fi

status=0
for m in "$@"; do
  m=${m%/}
  echo "[lint] $m"
  # Run from the module so that its own go.mod (inside the workspace) decides
  # the packages; paths in the config are relative to the repository root.
  # shellcheck disable=SC2086 # LINT_FLAGS is a list of flags
  (cd "$root/$m" && "$bin" run --config "$root/.golangci.yml" ${LINT_FLAGS:-} ./...) || status=1
done
exit $status

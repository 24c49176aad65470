#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Runs golangci-lint v2 with .golangci.yml in each module given:
#   hack/lint.sh lib csi ...        (make lint passes every module)
# The binary is built once per version pinned in hack/tools/go.mod into a
# cache shared by every clone (hack/tools.sh; a cold build takes several
# minutes). Extra flags for golangci-lint go in LINT_FLAGS.
set -euo pipefail
if [[ $# -eq 0 ]]; then
  echo "usage: $0 <module dir>..." >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$("$root/hack/tools.sh" golangci-lint)

status=0
for m in "$@"; do
  m=${m%/}
  echo "[lint] $m"
  # Run from the module so that its own go.mod (inside the workspace) decides
  # the packages; paths in the config are relative to the repository root.
  # shellcheck disable=SC2086 # LINT_FLAGS is a list of flags
  # --allow-serial-runners: a second lint on this machine (another clone, a
  # CI run beside a developer's) waits for golangci-lint's lock instead of
  # failing with "parallel golangci-lint is running".
  (cd "$root/$m" && "$bin" run --config "$root/.golangci.yml" --allow-serial-runners ${LINT_FLAGS:-} ./...) || status=1
done
exit $status

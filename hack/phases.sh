#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Runs make targets one by one, stops at the first that fails, and at the end
# prints how long each took (make test runs its phases through it, .ci/run
# the checks before them), so that a slow CI run says where its time went.
#   hack/phases.sh verify lint
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
durations=()
report() {
  local status=$?
  echo "[phases] durations:"
  printf '[phases]   %s\n' "${durations[@]}"
  local outcome=FAILED
  ((status != 0)) || outcome=passed
  echo "[phases] $* $outcome in $((SECONDS - start)) s"
}
trap 'report "$@"' EXIT
for phase; do
  began=$SECONDS
  echo "[phases] make $phase"
  make --no-print-directory "$phase" || {
    durations+=("$(printf '%-18s %5d s  FAILED' "$phase" $((SECONDS - began)))")
    exit 1
  }
  durations+=("$(printf '%-18s %5d s' "$phase" $((SECONDS - began)))")
done

#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Runs make targets one by one, stops at the first that fails, and at the end
# prints how long each took (make test runs its phases through it, .ci/run
# the checks before them), so that a slow CI run says where its time went.
# A failing phase ends with its failures gathered from its output (the tests
# that failed, a timed-out test binary's running tests), because a CI log is
# often read from its tail only.
#   hack/phases.sh verify lint
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
durations=()
log=$(mktemp)
failed=
report() {
  local status=$?
  echo "[phases] durations:"
  printf '[phases]   %s\n' "${durations[@]}"
  if [[ -n $failed ]]; then
    echo "[phases] what failed in make $failed:"
    grep -E -A4 '^(--- FAIL|panic: |FAIL[[:space:]])|running tests:' "$log" | tail -n 60 | sed 's/^/[phases]   /' || true
  fi
  local outcome=FAILED
  ((status != 0)) || outcome=passed
  echo "[phases] $* $outcome in $((SECONDS - start)) s"
  rm -f "$log"
}
trap 'report "$@"' EXIT
# A stopped run is not a passed one: without these the EXIT trap can see the
# status of the last command that finished.
trap 'failed=${phase:-}; exit 143' TERM
trap 'failed=${phase:-}; exit 130' INT
for phase; do
  began=$SECONDS
  echo "[phases] make $phase"
  make --no-print-directory "$phase" 2>&1 | tee "$log" || {
    durations+=("$(printf '%-18s %5d s  FAILED' "$phase" $((SECONDS - began)))")
    failed=$phase
    exit 1
  }
  durations+=("$(printf '%-18s %5d s' "$phase" $((SECONDS - began)))")
done

#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Runs one test package under test/ N times while busy loops (HOG of them,
# default twice the cores) keep every core busy, as CI's shared machines
# and parallel builds do, and prints at the end, for each run, whether it
# passed and each failed test with its messages. A test that fails only
# under load is a flaky test; this finds it before CI does.
#   hack/stress.sh ./integration/flex/ 5
#   RUN=TestPodAdoptedAfterReadBack HOG=4 hack/stress.sh ./integration/flex/ 5
# The package is compiled once, before the load starts; the busy loops are
# stopped on any exit. Each run's go test -json output is kept under
# _output/stress/. Exit status 1 if any run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() {
  echo "usage: [RUN=regexp] [HOG=loops] [TIMEOUT=40m] $0 <package under test/, e.g. ./integration/flex/> <runs>" >&2
  exit 2
}
(($# == 2)) || usage
pkg=${1#./}
pkg=${pkg%/}
runs=$2
[[ $runs =~ ^[1-9][0-9]*$ ]] || usage
[[ -d test/$pkg ]] || { echo "no package test/$pkg" >&2; exit 2; }
cores=$(nproc)
hog=${HOG:-$((2 * cores))}
timeout=${TIMEOUT:-40m}
run_filter=${RUN:-}

out=$root/_output/stress/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
bin=$out/pkg.test

hogs=()
running=
stop_run() {
  [[ -n $running ]] || return 0
  kill -- "-$running" 2>/dev/null || true
  wait "$running" 2>/dev/null || true
  running=
}
stop_hog() {
  local pid
  for pid in "${hogs[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${hogs[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  hogs=()
}
start=$SECONDS
results=()
failures=0
# report prints every finished run, also when the script is interrupted.
report() {
  ((${#results[@]} > 0)) || return 0
  echo "[stress] test/$pkg${run_filter:+ -run $run_filter}: runs under $hog busy loops on $cores cores, $((SECONDS - start)) s (outputs in $out):"
  printf '%s\n' "${results[@]}"
  echo "[stress] $failures of $done_runs finished runs failed ($runs asked)"
}
done_runs=0
trap 'stop_run; stop_hog; report' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "[stress] compiling test/$pkg (before the load starts)"
(cd test && go test -c -o "$bin" "./$pkg")
importpath=$(cd test && go list "./$pkg")
test2json=$(go env GOTOOLDIR)/test2json
[[ -x $test2json ]] || go build -o "$out/test2json" cmd/test2json
[[ -x $test2json ]] || test2json=$out/test2json

echo "[stress] starting $hog busy loops on $cores cores"
for ((i = 0; i < hog; i++)); do
  sh -c 'while :; do :; done' &
  hogs+=("$!")
done

# summary prints, from one run's go test -json output, each failed test
# that has no failed subtest, with the lines it printed (up to 30), and the
# package's own output if it failed without a failed test (a build error,
# TestMain, a panic, the timeout).
summary() {
  jq -rs '
    def lines: map(.Output // "") | join("") | split("\n")
      | map(select(test("^\\s*(=== |--- (FAIL|PASS|SKIP)|$)") | not));
    . as $all
    | [$all[] | select(.Action == "fail" and .Test != null) | .Test] as $failed
    | [$failed[] | . as $t | select(any($failed[]; startswith($t + "/")) | not)] as $leaves
    | if ($leaves | length) > 0 then
        $leaves[] as $t
        | ["  " + $t] + ([$all[] | select(.Action == "output" and .Test == $t)] | lines | .[:30] | map("    " + .))
        | .[]
      elif any($all[]; .Action == "fail") then
        ["  (the package failed outside any test)"] + ([$all[] | select(.Action == "output" and .Test == null)] | lines | .[-30:] | map("    " + .))
        | .[]
      else empty end
  ' "$1"
}

pkgdir=$root/test/$pkg
start=$SECONDS
for ((run = 1; run <= runs; run++)); do
  json=$out/run-$run.json
  began=$SECONDS
  echo "[stress] run $run of $runs: test/$pkg${run_filter:+ -run $run_filter} (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  status=PASS
  # As go test runs a test binary: in the package's directory, its -v
  # output turned into JSON by test2json. In a process group of its own,
  # in the background, so that an interrupt stops it (and bash handles the
  # signal at once, not after the run).
  (cd "$pkgdir" && exec setsid "$test2json" -t -p "$importpath" "$bin" -test.v=test2json -test.count=1 \
    -test.timeout="$timeout" ${run_filter:+-test.run="$run_filter"}) >"$json" 2>&1 &
  running=$!
  wait "$running" || status=FAIL
  running=
  line=$(printf 'run %d: %s (%d s)' "$run" "$status" $((SECONDS - began)))
  echo "[stress] $line"
  results+=("$line")
  done_runs=$run
  if [[ $status == FAIL ]]; then
    failures=$((failures + 1))
    results+=("$(summary "$json" || echo "  (unreadable output: $json)")")
  fi
done
stop_hog
((failures == 0))

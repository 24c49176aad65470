#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Regenerates go.work from the module list in versions.yaml (plus test/).
# hack/tools stays out: its linters' dependencies must not change the
# versions the project's modules build with.
set -euo pipefail
cd "$(dirname "$0")/.."
modules=$(hack/modules.sh)
rm -f go.work go.work.sum.tmp
go work init
for m in $modules test; do
  go work use "./$m"
done
echo "go.work: $(grep -c '^\s*\./' go.work) modules"

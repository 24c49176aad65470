#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Prints the released modules, in dependency order, from versions.yaml.
# With --standalone, prints instead the modules that are deliberately outside
# go.work: third-party-style provisioners (test/ports/*) that must build from
# their own go.mod alone (GOWORK=off), as their authors' would.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == --standalone ]]; then
  git ls-files -co --exclude-standard -- 'test/ports/*/go.mod' | xargs -r -n1 dirname | sort
  exit 0
fi
sed -n 's/^\([a-z][a-z0-9-]*\):.*/\1/p' versions.yaml

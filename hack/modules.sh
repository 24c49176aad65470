#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Prints the released modules, in dependency order, from versions.yaml.
set -euo pipefail
cd "$(dirname "$0")/.."
sed -n 's/^\([a-z][a-z0-9-]*\):.*/\1/p' versions.yaml

#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Installs what the integration tests need from Debian (NFS-Ganesha, Cinder,
# ...), by running every hack/deps/*.sh. Each script is idempotent: it does
# nothing when its packages are present.
set -euo pipefail
cd "$(dirname "$0")/deps"
shopt -s nullglob
for script in *.sh; do
  echo "[deps] ${script%.sh}"
  bash "./$script"
done

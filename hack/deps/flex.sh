#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Installs what the flex provisioner's integration tests run: the driver
# scripts need a POSIX sh and jq, the script that creates a PV from a
# provisioning pod needs curl (and CA certificates).
#
# Idempotent: does nothing when everything is installed; runs apt-get update
# only when something is missing (hack/lib/apt.sh).
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt.sh"

apt_ensure_installed dash jq curl ca-certificates

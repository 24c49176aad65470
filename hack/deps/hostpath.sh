#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Installs what hostpath's unit tests of btrfs size limits (hostpath/pkg/quota)
# run: mkfs.btrfs and btrfs (btrfs-progs) make and inspect a btrfs filesystem
# in a file, mounted through a loop device (losetup, from mount). The
# provisioner itself needs neither: it sets limits with ioctls.
#
# Idempotent: does nothing when everything is installed; runs apt-get update
# only when something is missing (hack/lib/apt.sh).
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt.sh"

apt_ensure_installed btrfs-progs mount

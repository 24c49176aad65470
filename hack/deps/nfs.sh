#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Installs what the nfs provisioner's integration tests run against: a real
# NFS-Ganesha server (VFS backend), rpcbind, the system D-Bus daemon and
# libnfs's userspace NFS client tools (nfs-ls, nfs-cp, nfs-cat). The kernel of
# the test machines has no NFS client, so the tests never mount.
#
# Idempotent: does nothing when everything is installed; runs apt-get update
# only when something is missing. Services are not started by the packages'
# postinst scripts (policy-rc.d, hack/lib/apt.sh): the tests start their own
# on loopback.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt.sh"

apt_ensure_installed nfs-ganesha nfs-ganesha-vfs rpcbind dbus libnfs-utils

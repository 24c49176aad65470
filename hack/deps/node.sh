#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Installs what the real nodes of test/cluster need from Debian: runc (the
# OCI runtime containerd's shim calls), iproute2 (network namespaces, veth,
# the bridge), util-linux (unshare, nsenter, flock) and busybox-static (the
# busybox image test/cluster builds for the pods of the docs' examples) and
# jq (with its libraries, in images built from Dockerfiles that install it,
# such as flex's example image). The Kubernetes and containerd binaries
# themselves are built by hack/node.sh.
#
# Idempotent: does nothing when everything is installed; runs apt-get update
# only when something is missing (hack/lib/apt.sh).
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt.sh"

apt_ensure_installed runc iproute2 util-linux busybox-static jq

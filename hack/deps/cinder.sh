#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Installs what the cinder integration tests run against: a real OpenStack
# Cinder (Debian's cinder-api, cinder-scheduler, cinder-volume) with
# RabbitMQ, a userspace iSCSI target (tgt) that the test volume driver
# exports volumes on, and libiscsi's userspace initiator tools
# (iscsi-readcapacity16) that log in with what a PV says: this kernel has no
# iscsi_tcp for a real login. The tests start and stop the services
# themselves on 127.0.0.1, so package installs must not start them: a
# policy-rc.d that denies every start is in place for the duration of the
# install (hack/lib/apt.sh).
#
# Idempotent: does nothing when everything is installed; runs apt-get update
# only when something is missing.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt.sh"

APT_INSTALL_NOTE="takes ~12 min cold" apt_ensure_installed cinder-api cinder-scheduler cinder-volume rabbitmq-server tgt libiscsi-bin

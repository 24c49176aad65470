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
# policy-rc.d that denies every start is put in place for the duration of
# the install (and removed again if we added it).
set -euo pipefail

packages=(cinder-api cinder-scheduler cinder-volume rabbitmq-server tgt libiscsi-bin)

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
if [ "${#missing[@]}" -eq 0 ]; then
	echo "cinder deps: already installed (${packages[*]})"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "cinder deps: need root to install ${missing[*]}" >&2
	exit 1
fi

policy=/usr/sbin/policy-rc.d
added_policy=false
apt_tmp=
if [ ! -e "$policy" ]; then
	echo "cinder deps: installing $policy so package scripts do not start services"
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 0755 "$policy"
	added_policy=true
fi
cleanup() {
	if [ -n "$apt_tmp" ]; then
		rm -rf "$apt_tmp"
	fi
	if [ "$added_policy" = true ]; then
		rm -f "$policy"
	fi
}
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
# apt unpacks downloaded packages under TMPDIR; a private directory keeps
# other jobs that clean /tmp from pulling files from under dpkg.
apt_tmp=$(mktemp -d /var/tmp/cinder-deps.XXXXXX)
export TMPDIR=$apt_tmp
echo "cinder deps: apt-get update"
apt-get -o DPkg::Lock::Timeout=600 update -q
echo "cinder deps: apt-get install ${missing[*]} (takes ~12 min cold)"
apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
echo "cinder deps: done"

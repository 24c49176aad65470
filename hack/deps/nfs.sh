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
# postinst scripts (policy-rc.d): the tests start their own on loopback.
set -euo pipefail

packages=(nfs-ganesha nfs-ganesha-vfs rpcbind dbus libnfs-utils)

log() { printf '[deps/nfs] %s\n' "$*" >&2; }

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  log "already installed: ${packages[*]}"
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  sudo=(sudo)
fi

# Keep postinst scripts from starting rpcbind, dbus or ganesha as services;
# restore whatever policy was there before.
policy=/usr/sbin/policy-rc.d
backup=""
if [[ -e $policy ]]; then
  backup=$(mktemp)
  "${sudo[@]}" cp -p "$policy" "$backup"
fi
restore_policy() {
  if [[ -n $backup ]]; then
    "${sudo[@]}" cp -p "$backup" "$policy"
    rm -f "$backup"
  else
    "${sudo[@]}" rm -f "$policy"
  fi
}
trap restore_policy EXIT
printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
"${sudo[@]}" chmod 755 "$policy"

log "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Other installers may hold the dpkg lock: wait for it rather than fail.
apt=("${sudo[@]}" apt-get -o DPkg::Lock::Timeout=900)
"${apt[@]}" update -qq
"${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}"
log "done"

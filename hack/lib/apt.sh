#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# What every hack/deps/*.sh does with apt, sourced by them (it lives outside
# hack/deps/ so that hack/install-test-deps.sh does not run it on its own):
#
#   source "$(dirname "${BASH_SOURCE[0]}")/../lib/apt.sh"
#   apt_ensure_installed pkg...
#
# apt_ensure_installed does nothing when every package is installed. It
# installs only the missing ones otherwise, after a single apt-get update,
# non-interactively, with a policy-rc.d in place that keeps the packages'
# maintainer scripts from starting services (the tests start their own on
# loopback; the policy that was there before is restored). It runs apt as
# root, through sudo when not root. Messages go to standard error, prefixed
# with [deps/<script name>].
#
# It sets an EXIT trap of its own while it installs. APT_INSTALL_NOTE, if
# set (APT_INSTALL_NOTE="..." apt_ensure_installed ...), is added to the
# message announcing the install, such as how long it takes.

# apt_log prints a message prefixed with the calling script's name.
apt_log() {
  printf '[deps/%s] %s\n' "$(basename "$0" .sh)" "$*" >&2
}

# apt_missing prints those of its arguments that dpkg does not know as
# installed, one a line.
apt_missing() {
  local p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
      printf '%s\n' "$p"
    fi
  done
}

apt_ensure_installed() {
  local missing
  mapfile -t missing < <(apt_missing "$@")
  if ((${#missing[@]} == 0)); then
    apt_log "already installed: $*"
    return 0
  fi

  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if ! command -v sudo >/dev/null; then
      apt_log "need root (or sudo) to install: ${missing[*]}"
      return 1
    fi
    sudo=(sudo)
  fi

  # Globals, for the EXIT trap: it runs after this function has returned.
  _apt_sudo=("${sudo[@]}")
  _apt_policy=/usr/sbin/policy-rc.d
  _apt_policy_backup=
  _apt_tmp=
  trap _apt_cleanup EXIT

  # policy-rc.d exiting 101 denies every service start.
  if [[ -e $_apt_policy ]]; then
    _apt_policy_backup=$(mktemp)
    "${sudo[@]}" cp -p "$_apt_policy" "$_apt_policy_backup"
  fi
  apt_log "installing $_apt_policy so package scripts do not start services"
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$_apt_policy" >/dev/null
  "${sudo[@]}" chmod 0755 "$_apt_policy"

  # apt unpacks downloaded packages under TMPDIR; a private directory keeps
  # other jobs that clean /tmp from pulling files from under dpkg.
  _apt_tmp=$(mktemp -d /var/tmp/kubeprov-deps.XXXXXX)
  # env, not export: sudo does not pass the environment on. Other
  # installers may hold the dpkg lock: wait for it rather than fail.
  local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive TMPDIR="$_apt_tmp" apt-get -o DPkg::Lock::Timeout=900)
  apt_log "apt-get update"
  "${apt[@]}" update -qq
  apt_log "apt-get install ${missing[*]}${APT_INSTALL_NOTE:+ ($APT_INSTALL_NOTE)}"
  "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}"
  apt_log "installed: ${missing[*]}"
}

# _apt_cleanup restores the policy-rc.d that was there before (or removes
# ours) and removes the private TMPDIR.
_apt_cleanup() {
  if [[ -n $_apt_policy_backup ]]; then
    "${_apt_sudo[@]}" cp -p "$_apt_policy_backup" "$_apt_policy"
    "${_apt_sudo[@]}" rm -f "$_apt_policy_backup"
  else
    "${_apt_sudo[@]}" rm -f "$_apt_policy"
  fi
  if [[ -n $_apt_tmp ]]; then
    "${_apt_sudo[@]}" rm -rf "$_apt_tmp"
  fi
}

#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Installs what the flex provisioner's integration tests run: the driver
# scripts need a POSIX sh and jq, the script that creates a PV from a
# provisioning pod needs curl (and CA certificates).
#
# Idempotent: does nothing when everything is installed; runs apt-get update
# only when something is missing. None of these packages ships a service.
set -euo pipefail

packages=(dash jq curl ca-certificates)

log() { printf '[deps/flex] %s\n' "$*" >&2; }

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

log "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
log "installed: ${missing[*]}"

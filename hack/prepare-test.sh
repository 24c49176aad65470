#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Gets a machine ready for `make test`: installs the Debian packages of the
# test backends while the control plane and then the node components (kubelet,
# containerd, CNI; hack/node.sh, which reuses the control plane's compiled
# packages) compile (one is mostly download and unpack, the other CPU), and
# fails if either fails. The fresh-machine check's root filesystem (mostly
# download and unpack too) is cached meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."
log_dir=$(mktemp -d)
# shellcheck source=SCRIPTDIR/lib/versions.sh
source hack/lib/versions.sh
{ hack/controlplane.sh && hack/node.sh; } >"$log_dir/controlplane.log" 2>&1 &
cp_pid=$!
# The oldest supported Kubernetes too (make test-oldest), at the same time: a
# cold build is mostly compiling either way, and its downloads and links
# overlap the other's.
{ export KUBEPROV_KUBE_VERSION=$K8S_OLDEST_VERSION; hack/controlplane.sh && hack/node.sh; } >"$log_dir/controlplane-oldest.log" 2>&1 &
oldest_pid=$!
hack/fresh-machine.sh --prepare >"$log_dir/fresh-machine.log" 2>&1 &
fresh_pid=$!
deps_ok=0
hack/install-test-deps.sh || deps_ok=$?
cp_ok=0
wait "$cp_pid" || cp_ok=$?
wait "$oldest_pid" || cp_ok=$?
fresh_ok=0
wait "$fresh_pid" || fresh_ok=$?
cat "$log_dir/controlplane.log" "$log_dir/controlplane-oldest.log" "$log_dir/fresh-machine.log"
rm -rf "$log_dir"
if [[ $deps_ok -ne 0 ]]; then
  echo "prepare-test: installing test dependencies failed (see above)" >&2
  exit 1
fi
if [[ $cp_ok -ne 0 ]]; then
  echo "prepare-test: building the control plane or the node components (newest or oldest Kubernetes) failed (see above)" >&2
  exit 1
fi
if [[ $fresh_ok -ne 0 ]]; then
  echo "prepare-test: building the fresh-machine root filesystem failed (see above)" >&2
  exit 1
fi

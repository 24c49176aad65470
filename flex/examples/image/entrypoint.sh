#!/bin/sh
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Entrypoint of a provisioning image for flex-provisioner --launcher=container:
# runs an exec-launcher driver ($FLEX_DRIVER) with the pod's FLEX_ACTION and
# FLEX_INPUT, and hands its JSON answer to the provisioner through the
# termination message. So one driver serves both launchers.
set -u

driver=${FLEX_DRIVER:-/usr/local/bin/flex-driver}
log=${FLEX_TERMINATION_LOG:-/dev/termination-log}

out=$("$driver" "${FLEX_ACTION:?FLEX_ACTION is not set}" "${FLEX_INPUT:?FLEX_INPUT is not set}")
code=$?
# The termination message holds at most 4096 bytes; an answer is far smaller.
# Nothing is written when the driver printed nothing, so that the kubelet
# falls back to the log tail (the driver's stderr) for the message.
if [ -n "$out" ]; then
	printf '%s\n' "$out" >"$log"
fi
# Also on stdout, for kubectl logs.
printf '%s\n' "$out"
exit "$code"

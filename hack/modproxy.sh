#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Writes every release of the repository (lib/v0.1.0, hostpath/v0.1.0, ...)
# into a Go module proxy directory, _output/modproxy (or $MODPROXY_DIR), as
# the zips a public proxy makes from their tags (hack/tools/cmd/modproxy),
# and prints the environment that puts it in front of the go command's:
#
#   GOPROXY=file://<dir>,<go env GOPROXY> GONOSUMDB=<go env GONOSUMDB>,github.com/kubeprov/external-storage
#
# Needed only where a go.mod requires lib by version with no replace: the
# release commits hack/release.sh makes (and builds of their tags, through
# hack/build.make), before the tags are pushed. Main's go.mod files replace
# lib with ../lib and need none of this. The checksum database cannot know
# unpushed tags, hence GONOSUMDB: go.sum still pins their hashes.
#
# The releases are releases.yaml's, and tags it lacks (hack/tags.sh --list):
# the same proxy whether the clone's tags were fetched, restored by make tags,
# or are absent; this writes no tag.
#
#   env $(hack/modproxy.sh) go build ./...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${MODPROXY_DIR:-$root/_output/modproxy}
tool=$("$root/hack/tools.sh" modproxy)
releases=$(mktemp)
trap 'rm -f "$releases"' EXIT
"$root/hack/tags.sh" --list >"$releases"
# shellcheck disable=SC2046 # one word per module
"$tool" -repo "$root" -out "$out" -releases "$releases" $("$root/hack/modules.sh")
nosumdb=$(go env GONOSUMDB)
echo "GOPROXY=file://$out,$(go env GOPROXY) GONOSUMDB=${nosumdb:+$nosumdb,}github.com/kubeprov/external-storage"

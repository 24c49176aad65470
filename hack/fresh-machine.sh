#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Runs the README's `make demo` as a newcomer would, on a machine that has
# only what a new machine of this kind has: every machine that runs our
# commands (a developer's, CI's) has what earlier runs installed, so a
# missing install step would otherwise pass unnoticed.
#
#   hack/fresh-machine.sh [COMMAND...]    (root; default COMMAND: make demo)
#   hack/fresh-machine.sh --prepare       only build the root filesystem's
#                                         cache (hack/prepare-test.sh does,
#                                         while the control plane compiles)
#
# 1. A root filesystem of the Debian packages of a new machine
#    (hack/testdata/fresh-machine/packages.txt, less left-out.txt), built
#    with the project's own tooling (hack/debian-rootfs.sh, imagebuild
#    rootfs) and cached under $KUBEPROV_CACHE/debian like an image's.
# 2. A fresh clone of this repository's HEAD (FRESH_REV=<commit> for
#    another) at /src inside it.
# 3. COMMAND runs there (pivot_root) in a mount namespace of its own (no mount
#    reaches the host) and in the host's network and PID namespaces: apt
#    needs Debian's mirror, and a cluster marks its bridge with its pid,
#    which other clusters on the host check to find abandoned bridges (in
#    a PID namespace of its own it would take theirs for dead and remove
#    them). The command stops what it starts, as on any machine. /dev,
#    /sys (with the cgroup hierarchies kubelet and runc use) and /proc are
#    mounted, as a booted machine has them. The Go toolchain is bound read-only; the
#    caches of built binaries (the control plane and node components under
#    $KUBEPROV_CACHE, GOCACHE, GOMODCACHE) are overlays on the host's, so
#    the check takes minutes instead of the cold build and leaves the host's
#    caches unchanged.
#
# What an installer writes besides the packages is written too: dpkg's and
# apt's working directories, /etc/resolv.conf, hosts, hostname, machine-id
# and apt's sources and configuration (the host's, as the machine image has
# them), the CA bundle (update-ca-certificates, as ca-certificates'
# maintainer script would).
#
# Environment: FRESH_REV, FRESH_KEEP=1 (keep the work directory),
# KUBEPROV_CACHE, and hack/debian-rootfs.sh's DEBIAN_*.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { printf '[fresh-machine] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
[[ $(id -u) -eq 0 ]] || die "needs root (namespaces, mounts, pivot_root), as make demo does"
for tool in unshare pivot_root chroot mount tar git; do
  command -v "$tool" >/dev/null || die "needs $tool"
done
prepare_only=
if [[ ${1:-} == --prepare ]]; then
  prepare_only=1
  shift
fi
command=("$@")
((${#command[@]} > 0)) || command=(make demo)
start=$SECONDS

data=$repo/hack/testdata/fresh-machine
left_out=$(sed '/^#/d;/^$/d' "$data/left-out.txt" | paste -sd'|')
mapfile -t packages < <(sed '/^#/d;/^$/d' "$data/packages.txt" | grep -vxE "$left_out")
log "root filesystem: ${#packages[@]} packages of a new machine ($data)"

work=$(mktemp -d /var/tmp/kubeprov-fresh.XXXXXX)
cleanup() {
  # Nothing is mounted here outside the namespace, which is gone: a plain
  # removal, kept on this file system to be safe.
  if [[ -z ${FRESH_KEEP:-} ]]; then
    rm -rf --one-file-system "$work"
  else
    log "kept $work"
  fi
}
trap cleanup EXIT

imagebuild=$("$repo/hack/tools.sh" imagebuild)
"$repo/hack/debian-rootfs.sh" -a "$(dpkg --print-architecture)" -o "$work/rootfs.tar.gz" -i "$imagebuild" \
  -u _apt:42:65534 "${packages[@]}"
if [[ -n $prepare_only ]]; then
  log "root filesystem cached ($((SECONDS - start)) s)"
  exit 0
fi
root=$work/root
mkdir "$root"
tar -xzf "$work/rootfs.tar.gz" -C "$root" --numeric-owner
rm "$work/rootfs.tar.gz"
log "unpacked ($((SECONDS - start)) s so far)"

# What an installer leaves beyond the packages' files: dpkg's and apt's
# working directories, the machine's identity and name service files.
mkdir -p "$root"/var/lib/dpkg/{info,updates,triggers} "$root"/var/lib/apt/lists/partial \
  "$root"/var/cache/apt/archives/partial "$root/root"
# dpkg warns once per package that has no file list (imagebuild writes the
# status only); an empty list is what it then assumes anyway.
awk '/^Package:/ {p = $2} /^Architecture:/ {a = $2} /^Multi-Arch: same/ {m = 1}
     /^$/ {if (p != "") print (m ? p ":" a : p); p = ""; m = 0}
     END {if (p != "") print (m ? p ":" a : p)}' "$root/var/lib/dpkg/status" |
  while read -r pkg; do : >"$root/var/lib/dpkg/info/$pkg.list"; done
for f in resolv.conf hosts hostname machine-id; do
  [[ -e /etc/$f ]] && cp -L "/etc/$f" "$root/etc/$f"
done
rm -rf "$root/etc/apt/sources.list.d" "$root/etc/apt/apt.conf.d"
cp -a /etc/apt/sources.list.d /etc/apt/apt.conf.d "$root/etc/apt/"
[[ -f /etc/apt/sources.list ]] && cp /etc/apt/sources.list "$root/etc/apt/"
# ca-certificates' maintainer script trusts every certificate it ships.
if [[ -d $root/usr/share/ca-certificates ]]; then
  (cd "$root/usr/share/ca-certificates" && find . -name '*.crt' | sed 's#^\./##' | sort) >"$root/etc/ca-certificates.conf"
  chroot "$root" /usr/sbin/update-ca-certificates --fresh >/dev/null 2>&1 || die "update-ca-certificates failed in the root"
fi

rev=${FRESH_REV:-HEAD}
git clone -q --no-hardlinks "$repo" "$root/src"
git -C "$root/src" checkout -q "$(git -C "$repo" rev-parse "$rev^{commit}")"
log "clone of $rev ($(git -C "$root/src" log -1 --format='%h %s'))"

# The caches: host directory -> path inside the root.
cache_root=${KUBEPROV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeprov}
declare -A caches=(
  ["$cache_root"]=/root/.cache/kubeprov
  ["$(go env GOCACHE)"]=/root/.cache/go-build
  ["$(go env GOMODCACHE)"]=/root/go/pkg/mod
)
overlays=()
for host in "${!caches[@]}"; do
  mkdir -p "$host"
  overlays+=("$host" "${caches[$host]}")
done
goroot=$(go env GOROOT)

# shellcheck disable=SC2016 # expanded by the inner shell
inner='set -eu
root=$1 work=$2 goroot=$3
shift 3
# The root a mount point of its own, as a machine'"'"'s / is: the nodes make
# their mounts under / shared.
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
mkdir -p "$root/usr/local/go"
mount --bind "$goroot" "$root/usr/local/go"
mount -o remount,bind,ro "$root/usr/local/go"
i=0
while [ "$1" != -- ]; do
	i=$((i + 1))
	mkdir -p "$work/overlay/$i/upper" "$work/overlay/$i/work" "$root$2"
	mount -t overlay overlay -o "lowerdir=$1,upperdir=$work/overlay/$i/upper,workdir=$work/overlay/$i/work" "$root$2"
	shift 2
done
shift
# pivot_root, not chroot: the nodes enter their namespaces with nsenter,
# which starts at the root of the mount namespace, so that must be this one.
cd "$root"
mkdir -p .oldroot
pivot_root . .oldroot
exec /usr/bin/env -i HOME=/root CI="${CI:-}" TERM="${TERM:-dumb}" \
	PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	sh -c "umount -l /.oldroot && rmdir /.oldroot && cd /src && exec \"\$@\"" sh "$@"
'
log "running '${command[*]}' in it"
status=0
unshare --mount --fork --propagation private -- bash -c "$inner" inner "$root" "$work" "$goroot" \
  "${overlays[@]}" -- "${command[@]}" || status=$?
if ((status != 0)); then
  die "'${command[*]}' failed on a fresh machine (exit $status, $((SECONDS - start)) s): a step that installs what it needs is missing or broken"
fi
log "'${command[*]}' passed on a fresh machine in $((SECONDS - start)) s"

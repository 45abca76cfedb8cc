#!/usr/bin/env bash
# Set up a virtualenv (once) and run the demo: a model perf sweep on the embedded simulated
# cluster. Needs only Python >= 3.11; starts nothing external.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/sweepd ]; then
  python3 -m venv .venv
  .venv/bin/pip install --quiet --upgrade pip
  .venv/bin/pip install --quiet -e .
fi
exec .venv/bin/sweepd demo "$@"

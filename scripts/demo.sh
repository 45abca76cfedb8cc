#!/usr/bin/env bash
# Set up a virtualenv (once) and run the demo: a model perf sweep on the embedded simulated
# cluster. Needs only Python >= 3.11; starts nothing external.
set -euo pipefail
cd "$(dirname "$0")/.."
# (Re)install when the venv is missing or pyproject.toml changed since the last install.
stamp=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -e "$stamp" ] || [ ! -x .venv/bin/sweepd ]; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  .venv/bin/pip install --quiet --upgrade pip
  .venv/bin/pip install --quiet -e .
  touch "$stamp"
fi
exec .venv/bin/sweepd demo "$@"

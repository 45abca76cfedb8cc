#!/usr/bin/env bash
# Set up everything the tests need and run them: Python packages in .venv, Debian's Slurm and
# munge (as root, when missing), three local Slurm clusters of 8 named nodes, then ruff, mypy and
# pytest. Exits non-zero on any failure.
#
#   scripts/test.sh [--keep-cluster] [pytest args...]
#
# The Slurm cluster this script starts is stopped when it ends (pass or fail) unless
# --keep-cluster is given (or SWEEPD_KEEP_CLUSTER=1). A cluster that was already running
# when it began is someone else's: it is left running either way.
set -euo pipefail
cd "$(dirname "$0")/.."

keep=${SWEEPD_KEEP_CLUSTER:-0}
pytest_args=()
for arg in "$@"; do
  if [ "$arg" = "--keep-cluster" ]; then keep=1; else pytest_args+=("$arg"); fi
done

# Debian packages the tests need (as root, when missing), installed while pip fills the venv:
# one `apt-get update` for all, without recommends.
# curl: the socket-permission tests ask the daemon as another user, as a person would.
# systemd-analyze: a test verifies the unit file. g++: tests/test_bench_smoke.py builds
# bench/*.cpp. chromium: tests/test_web_dashboard.py opens the dashboard in it, headless.
# Slurm and munge: scripts/slurm-cluster.sh says which of its own are missing.
missing=()
command -v curl >/dev/null || missing+=(curl)
command -v systemd-analyze >/dev/null || missing+=(systemd)
command -v g++ >/dev/null || missing+=(g++)
command -v chromium >/dev/null || missing+=(chromium)
read -r -a slurm_missing <<<"$(bash scripts/slurm-cluster.sh missing)"
missing+=(${slurm_missing[@]+"${slurm_missing[@]}"})
apt_pid=
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  ( export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" ) &
  apt_pid=$!
fi

# (Re)install when the venv is missing or pyproject.toml changed since the last install;
# in the background: the clusters (below) need apt's packages, not the venv, and start
# meanwhile. The venv's own pip is recent enough for an editable install (no upgrade).
stamp=".venv/.installed-test-$(sha256sum pyproject.toml | cut -c1-16)"
(
  if [ ! -e "$stamp" ] || ! .venv/bin/python -c 'import sweepd' 2>/dev/null; then
    [ -x .venv/bin/python ] || python3 -m venv .venv
    # --no-compile: the packages' modules are compiled when first imported (below), only
    # those the tests use (pip compiling every module took 34 s of the fresh setup).
    .venv/bin/pip install --quiet --no-compile -e '.[test,bench]'
    touch "$stamp"
  fi
  # Byte-compile the project before the processes the tests start (daemons, CLIs, each
  # simulated rank) import it at once.
  .venv/bin/python -m compileall -q sweepd >/dev/null
) & venv_pid=$!
# Where the environment sets PYTHONDONTWRITEBYTECODE, no process would keep what it
# compiles, and every one would compile its imports anew: the first import writes them here.
unset PYTHONDONTWRITEBYTECODE
if [ -n "$apt_pid" ]; then wait "$apt_pid"; fi

# Three local clusters (other directories and ports for the second and third): each of three
# test workers runs the Slurm tests of one of them (tests/conftest.py splits them). All start
# at once.
bash scripts/slurm-cluster.sh install
CLUSTERS=(1 2 3)
# A cluster already running when this began is someone else's: left running either way.
ours=()
for c in "${CLUSTERS[@]}"; do
  bash scripts/slurm-cluster.sh status --cluster "$c" >/dev/null 2>&1 || ours+=("$c")
done
if [ ${#ours[@]} -gt 0 ] && [ "$keep" != 1 ]; then
  # On every exit, the test's status kept: the clusters go with the run that started them.
  trap 'for c in "${ours[@]}"; do bash scripts/slurm-cluster.sh stop --cluster "$c" >/dev/null & done; wait' EXIT
fi
pids=()
for c in "${CLUSTERS[@]}"; do bash scripts/slurm-cluster.sh start --cluster "$c" & pids+=($!); done
started=0
for pid in "${pids[@]}"; do wait "$pid" || started=$?; done   # all of them, then the status
[ "$started" = 0 ] || exit "$started"
wait "$venv_pid"

# While the clusters' nodes register and run their sanity jobs, ruff and mypy check the code.
logs=$(mktemp -d)
pids=()
for c in "${CLUSTERS[@]}"; do
  bash scripts/slurm-cluster.sh check --cluster "$c" >"$logs/$c" 2>&1 & pids+=($!)
done
lint=0
.venv/bin/ruff check . || lint=$?
[ "$lint" != 0 ] || .venv/bin/mypy || lint=$?
checked=0
for i in "${!CLUSTERS[@]}"; do
  wait "${pids[$i]}" || checked=$?
  cat "$logs/${CLUSTERS[$i]}"
done
rm -rf "$logs"
[ "$checked" = 0 ] || exit "$checked"
[ "$lint" = 0 ] || exit "$lint"

# Six workers on two cores: three run the Slurm tests of one cluster each (tests/conftest.py
# groups them; mostly waiting on Slurm and the simulated trainer), all six share the rest.
.venv/bin/pytest -q -n 6 --dist loadgroup ${pytest_args[@]+"${pytest_args[@]}"}

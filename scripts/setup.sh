#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv: torch's CPU build first, then the
# package with its dependencies, the test tools and the docs generator (the `docs` extra), every package
# at the version requirements.lock pins (both steps install with it as constraints: -c requirements.lock;
# bash scripts/regenerate_lock.sh regenerates it from pyproject.toml).
# Safe to run again: it reinstalls only when pyproject.toml, requirements.lock (or the extras asked for)
# changed.
# PROMO_UI_TESTS=1 also installs what the browser test of the UI needs (tests/e2e/test_ui_browser.py):
# Debian's chromium through apt-get (as root, or with sudo) and the `ui-test` extra (the playwright
# wheel). Playwright drives that chromium; it never downloads a browser of its own.
# PROMO_PG_TESTS=1 installs Debian's PostgreSQL server (package `postgresql`) through apt-get when its
# binaries are missing, for the tests of the Postgres instance profile (tests/e2e/test_postgres.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  echo "[setup] creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
# apt_install PACKAGE WHY: Debian's PACKAGE with apt-get (root or sudo), its output in .venv/PACKAGE.log
apt_install() {
  echo "[setup] $2: installing Debian's $1 with apt-get (log: .venv/$1.log)"
  local sudo=; [[ $(id -u) == 0 ]] || sudo=sudo
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$1"; } >".venv/$1.log" 2>&1; then
    echo "[setup] FAILED: apt-get install $1 (needs root or sudo and Debian's package lists)" >&2
    tail -20 ".venv/$1.log" >&2
    exit 1
  fi
}
extras=dev,docs
if [[ ${PROMO_UI_TESTS:-0} == 1 ]]; then
  extras=dev,docs,ui-test
  command -v chromium >/dev/null || apt_install chromium "PROMO_UI_TESTS=1 (about 1-2 minutes)"
  echo "[setup] $(chromium --version 2>/dev/null | head -1)"
fi
if [[ ${PROMO_PG_TESTS:-0} == 1 ]]; then
  if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 && ! command -v pg_ctl >/dev/null; then
    apt_install postgresql "PROMO_PG_TESTS=1 (about 1 minute)"
  fi
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  echo "[setup] $("${pg_bin:-$(dirname "$(command -v pg_ctl)")}/postgres" --version)"
fi
stamp=.venv/.promo-installed
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $(sha256sum requirements.lock | cut -d' ' -f1) $extras"
if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
  echo "[setup] .venv is up to date"
  exit 0
fi
echo "[setup] installing torch==2.13.0 (CPU build) and promo_assets[$extras] into .venv from requirements.lock (about 2 minutes; log: .venv/setup.log)"
log=.venv/setup.log
install() {
  if ! .venv/bin/python -m pip install --quiet "$@" >>"$log" 2>&1; then
    echo "[setup] FAILED: pip install $*" >&2
    grep -v "is ignored" "$log" | tail -30 >&2
    exit 1
  fi
}
: > "$log"
install --upgrade pip
install torch==2.13.0 -c requirements.lock  # first: the CPU build; any other torch requirement would pull CUDA
install -e ".[$extras]" -c requirements.lock
.venv/bin/python -c "import torch, dagster, duckdb, promo_assets.cli" # fails loudly if the install did not work
if [[ $extras == *ui-test* ]]; then .venv/bin/python -c "import playwright.sync_api"; fi
echo "$want" > "$stamp"
echo "[setup] done"

#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv: torch's CPU build first, then the
# package with its pinned dependencies and the test tools. Safe to run again: it reinstalls only
# when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  echo "[setup] creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.promo-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
  echo "[setup] .venv is up to date"
  exit 0
fi
echo "[setup] installing torch==2.13.0 (CPU build) and promo_assets[dev] into .venv (about 2 minutes; log: .venv/setup.log)"
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
install torch==2.13.0          # first: the CPU build; any other torch requirement would pull CUDA
install -e '.[dev]'
.venv/bin/python -c "import torch, dagster, duckdb, promo_assets.cli" # fails loudly if the install did not work
echo "$want" > "$stamp"
echo "[setup] done"

#!/usr/bin/env bash
# Set up the environment and run the whole test suite (fast tests and the `slow` ones).
# Under CI (CI=true) the browser test of the UI is required: PROMO_UI_TESTS defaults to 1 there, so
# setup.sh installs Debian's chromium and the playwright wheel, and a missing browser fails the test.
# Elsewhere it runs when PROMO_UI_TESTS=1 is set (or chromium and playwright are present), else it is
# skipped with its reason.
# The suite runs on PROMO_TEST_WORKERS worker processes (pytest-xdist; default 2, CI's cores; 0 = in this
# process), a test file per worker at a time (--dist loadfile: a module's shared fixtures are made once).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${CI:-} == true ]]; then export PROMO_UI_TESTS=${PROMO_UI_TESTS:-1}; fi
bash scripts/setup.sh
workers=${PROMO_TEST_WORKERS:-2}
if [[ $workers == 0 ]]; then
  exec .venv/bin/python -m pytest -m "slow or not slow" "$@"
fi
exec .venv/bin/python -m pytest -m "slow or not slow" -n "$workers" --dist loadfile "$@"

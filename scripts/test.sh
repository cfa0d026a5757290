#!/usr/bin/env bash
# Set up the environment and run the whole test suite (fast tests and the `slow` ones).
# Under CI (CI=true) the browser test of the UI is required: PROMO_UI_TESTS defaults to 1 there, so
# setup.sh installs Debian's chromium and the playwright wheel, and a missing browser fails the test.
# Elsewhere it runs when PROMO_UI_TESTS=1 is set (or chromium and playwright are present), else it is
# skipped with its reason.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${CI:-} == true ]]; then export PROMO_UI_TESTS=${PROMO_UI_TESTS:-1}; fi
bash scripts/setup.sh
exec .venv/bin/python -m pytest -m "slow or not slow" "$@"

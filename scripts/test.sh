#!/usr/bin/env bash
# Set up the environment and run the whole test suite (fast tests and the `slow` ones).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -m "slow or not slow" "$@"

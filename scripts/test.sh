#!/usr/bin/env bash
# Set up the environment and run the whole test suite (fast tests and the `slow` ones).
# Under CI (CI=true) the browser test of the UI is required: PROMO_UI_TESTS defaults to 1 there, so
# setup.sh installs Debian's chromium and the playwright wheel, and a missing browser fails the test.
# Elsewhere it runs when PROMO_UI_TESTS=1 is set (or chromium and playwright are present), else it is
# skipped with its reason. The same holds for the tests of the Postgres instance profile
# (tests/e2e/test_postgres.py) with PROMO_PG_TESTS: under CI setup.sh installs Debian's postgresql and a
# missing server fails them; elsewhere they run when the server binaries are installed.
# The suite runs on PROMO_TEST_WORKERS worker processes (pytest-xdist; default 2, CI's cores; 0 = in this
# process), a test file per worker at a time (--dist loadfile: a module's shared fixtures are made once).
# The tests' throw-away instances (landing folders, warehouses, Dagster's SQLite storage) go to a new
# folder in memory when /dev/shm is a tmpfs with at least 4 GiB free: the runs' SQLite and DuckDB commits
# then skip the disk's fsync. PROMO_TEST_TMP=<folder> picks another parent folder, PROMO_TEST_TMP=default
# keeps pytest's own. The folder is removed when every test passed, and kept (its path printed) otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${CI:-} == true ]]; then
  export PROMO_UI_TESTS=${PROMO_UI_TESTS:-1} PROMO_PG_TESTS=${PROMO_PG_TESTS:-1}
fi
bash scripts/setup.sh
args=(-m "slow or not slow")
workers=${PROMO_TEST_WORKERS:-2}
if [[ $workers != 0 ]]; then args+=(-n "$workers" --dist loadfile); fi
parent=$(bash scripts/test_tmp.sh)
basetemp=
if [[ -n $parent && " $* " != *" --basetemp"* ]]; then
  basetemp=$(mktemp -d "$parent/promo-tests.XXXXXX")
  args+=(--basetemp "$basetemp")
fi
rc=0
.venv/bin/python -m pytest "${args[@]}" "$@" || rc=$?
if [[ -n $basetemp ]]; then
  if [[ $rc == 0 ]]; then rm -rf "$basetemp"; else echo "the tests' files are kept in $basetemp" >&2; fi
fi
exit "$rc"

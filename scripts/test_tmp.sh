#!/usr/bin/env bash
# Print the parent folder of the tests' throw-away instances (scripts/test.sh; benchmarks/suite_time.py
# runs the suite the same way): PROMO_TEST_TMP when set ('default': nothing printed, pytest's own
# folder), else /dev/shm when it is a tmpfs with at least 4 GiB free (the runs' SQLite and DuckDB
# commits then skip the disk's fsync), else nothing.
set -euo pipefail
parent=${PROMO_TEST_TMP:-}
if [[ -z $parent ]] && [[ $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs ]] \
   && (( $(df -Pk /dev/shm | awk 'NR == 2 {print $4}') >= 4 * 1024 * 1024 )); then
  parent=/dev/shm
fi
if [[ $parent != default ]]; then echo "$parent"; fi

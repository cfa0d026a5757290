#!/usr/bin/env bash
# Run the README's test command (CI's .ci/run) with the system date moved, to show that no test depends on the day
# it runs: bash scripts/test_at_date.sh +30d (any offset or date Debian's faketime accepts: -f "+61d",
# "@2027-02-01 09:00:00"). Needs Debian's faketime package (apt-get install faketime).
# The monotonic clock stays real, and scripts/faketime/sitecustomize.py gives every Python process a time.sleep
# libfaketime does not break (that file says why). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 1 ]]; then
  echo "usage: bash scripts/test_at_date.sh OFFSET [pytest arguments]   (OFFSET: +30d, -10d, '@2027-02-01 09:00:00')" >&2
  exit 2
fi
offset=$1
shift
if ! command -v faketime >/dev/null; then
  echo "scripts/test_at_date.sh needs Debian's faketime: apt-get install faketime" >&2
  exit 2
fi
export FAKETIME_DONT_FAKE_MONOTONIC=1
export PYTHONPATH="$PWD/scripts/faketime${PYTHONPATH:+:$PYTHONPATH}"
echo "running the tests with the date moved by $offset: $(faketime -f "$offset" date -u '+%Y-%m-%d %H:%M UTC')" >&2
exec faketime -f "$offset" bash scripts/test.sh "$@"

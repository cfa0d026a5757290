"""How long the test suite takes, and how many tests it holds: wall time, passed / failed / skipped,
the tests collected, the slowest tests, and the machine's load before and after.

Runs, in this checkout (or in another tests folder with --root), what CI runs after its setup:

    CI=true PROMO_UI_TESTS=1 .venv/bin/python -m pytest -m "slow or not slow" -q -p no:cacheprovider \
        --durations=30 [-n WORKERS --dist loadfile] [PATHS]

`--workers 0` runs it in one process (pytest-xdist not used); `--workers 2` is what scripts/test.sh
runs. PATHS (pytest node ids or folders) run a part of the suite, e.g. the slow tests that changed,
with `--tag` naming the result (`benchmarks/results/suite_time--TAG.json`). `--root DIR` runs the
tests of another tree (e.g. an export of main's tests/, for a before / after in one sitting); the
result records it.

    .venv/bin/python benchmarks/suite_time.py --workers 2
    .venv/bin/python benchmarks/suite_time.py --workers 0 --tag changed-after tests/e2e/test_pipeline.py
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import ROOT, Recorder  # noqa: E402


def counts(summary: str) -> dict[str, int]:
    """pytest's closing line ('1 failed, 1246 passed, 3 skipped in 700.1s') as numbers."""
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", summary)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (0: one process); default 2")
    ap.add_argument("--tag", default=None, help="names the result file (suite_time--TAG.json)")
    ap.add_argument("--root", type=Path, default=ROOT, help="the tree whose tests run (default: this checkout)")
    ap.add_argument("paths", nargs="*", help="a part of the suite (default: all of it)")
    args = ap.parse_args()
    rec = Recorder("suite_time")
    python = str(ROOT / ".venv" / "bin" / "python")
    env = {**os.environ, "CI": "true", "PROMO_UI_TESTS": "1"}
    base = [python, "-m", "pytest", "-m", "slow or not slow", "-p", "no:cacheprovider", *args.paths]
    collected = subprocess.run([*base, "--collect-only", "-q"], cwd=args.root, env=env, capture_output=True, text=True)
    n_collected = int(re.search(r"(\d+) tests? collected", collected.stdout).group(1))
    cmd = [*base, "-q", "--durations=30"] + (["-n", str(args.workers), "--dist", "loadfile"] if args.workers else [])
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"suite_time-{os.getpid()}.log"
    uptime_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    start = time.perf_counter()
    with open(log, "w") as fh:
        rc = subprocess.run(cmd, cwd=args.root, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - start
    uptime_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    lines = log.read_text().splitlines()
    summary = next((ln.strip("= ") for ln in reversed(lines) if re.search(r"\d+ (passed|failed)", ln)), "")
    durations = [ln for ln in lines if re.match(r"^\d+\.\d+s (call|setup|teardown) ", ln)]
    failed = [ln for ln in lines if ln.startswith("FAILED ") or ln.startswith("ERROR ")]
    figures = {"pytest": " ".join(cmd[1:]), "root": str(args.root), "exit_code": rc, "collected": n_collected,
               "wall_seconds": round(seconds, 1), "summary": summary, "counts": counts(summary),
               "uptime_before": uptime_before, "uptime_after": uptime_after, "slowest": durations,
               "failed": failed, "log": str(log)}
    headline = {"wall minutes": round(seconds / 60, 1), "collected": n_collected, **counts(summary),
                "workers": args.workers}
    rec.write(figures, headline=headline, tag=args.tag)
    print(f"{summary} | collected {n_collected} | {seconds / 60:.1f} min | {uptime_before} -> {uptime_after} | {log}")
    return rc


if __name__ == "__main__":
    sys.exit(main())

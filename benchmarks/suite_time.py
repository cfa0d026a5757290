"""How long the test suite takes, and how many tests it holds: wall time, passed / failed / skipped,
the tests collected, the slowest tests, and the machine's load before and after.

Runs, in this checkout (or in another tests folder with --root), what CI runs after its setup (the
tests' throw-away instances under the folder scripts/test.sh chooses: /dev/shm when it has room):

    CI=true PROMO_UI_TESTS=1 .venv/bin/python -m pytest -m "slow or not slow" -q -p no:cacheprovider \
        --durations=30 [-n WORKERS --dist loadfile] [--basetemp NEW-FOLDER-UNDER-TMP] [PATHS]

`--workers 0` runs it in one process (pytest-xdist not used); `--workers 2` is what scripts/test.sh
runs. PATHS (pytest node ids or folders) run a part of the suite, e.g. the slow tests that changed,
with `--tag` naming the result (`benchmarks/results/suite_time--TAG.json`). `--root DIR` runs the
tests of another tree (e.g. an export of main's tests/, for a before / after in one sitting); the
result records it.

Side by side: each `--variant NAME:TMP[:VAR=VALUE,...]` is one way of running the same tests: TMP is the
parent folder of the tests' throw-away instances (a new folder under it is pytest's `--basetemp`;
`default` for pytest's own), then environment variables set for that run only. With variants, the
runs alternate over `--rounds` rounds and the result holds every run's wall time and each variant's
median.

    .venv/bin/python benchmarks/suite_time.py --workers 2
    .venv/bin/python benchmarks/suite_time.py --workers 0 --tag changed-after tests/e2e/test_pipeline.py
    .venv/bin/python benchmarks/suite_time.py --workers 0 --tag tmp --rounds 3 \\
        --variant disk:/var/tmp --variant memory:/dev/shm tests/e2e/test_hostile_degenerate.py
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import ROOT, Recorder  # noqa: E402


def counts(summary: str) -> dict[str, int]:
    """pytest's closing line ('1 failed, 1246 passed, 3 skipped in 700.1s') as numbers."""
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", summary)}


def variant(text: str) -> dict:
    """NAME:TMP[:VAR=VALUE,...] (see the module's docstring)."""
    name, _, rest = text.partition(":")
    tmp, _, assignments = rest.partition(":")
    if not name or not tmp:
        raise argparse.ArgumentTypeError(f"--variant {text!r}: expected NAME:TMP[:VAR=VALUE,...]")
    env = dict(a.split("=", 1) for a in assignments.split(",") if a)
    return {"name": name, "tmp": None if tmp == "default" else Path(tmp), "env": env}


def test_sh_tmp() -> Path | None:
    """The parent folder scripts/test.sh gives the tests' throw-away instances (scripts/test_tmp.sh
    chooses it: PROMO_TEST_TMP, else /dev/shm when it has room); None: pytest's own."""
    chosen = subprocess.run(["bash", str(ROOT / "scripts" / "test_tmp.sh")], capture_output=True, text=True,
                            check=True).stdout.strip()
    return Path(chosen) if chosen else None


def run(cmd: list[str], root: Path, env: dict, tmp: Path | None) -> dict:
    """One pytest run: its wall time, counts, slowest tests and failures."""
    basetemp = tempfile.mkdtemp(prefix="promo-tests.", dir=tmp) if tmp is not None else None
    cmd = cmd + (["--basetemp", basetemp] if basetemp else [])
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"suite_time-{os.getpid()}-{time.monotonic_ns()}.log"
    uptime_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    start = time.perf_counter()
    with open(log, "w") as fh:
        rc = subprocess.run(cmd, cwd=root, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - start
    uptime_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    if basetemp is not None:
        shutil.rmtree(basetemp, ignore_errors=True)
    lines = log.read_text().splitlines()
    summary = next((ln.strip("= ") for ln in reversed(lines) if re.search(r"\d+ (passed|failed)", ln)), "")
    print(f"{summary} | {seconds / 60:.1f} min | {uptime_before} -> {uptime_after} | {log}", flush=True)
    return {"pytest": " ".join(cmd[1:]), "exit_code": rc, "wall_seconds": round(seconds, 1), "summary": summary,
            "counts": counts(summary), "uptime_before": uptime_before, "uptime_after": uptime_after,
            "slowest": [ln for ln in lines if re.match(r"^\d+\.\d+s (call|setup|teardown) ", ln)],
            "failed": [ln for ln in lines if ln.startswith("FAILED ") or ln.startswith("ERROR ")], "log": str(log)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (0: one process); default 2")
    ap.add_argument("--tag", default=None, help="names the result file (suite_time--TAG.json)")
    ap.add_argument("--root", type=Path, default=ROOT, help="the tree whose tests run (default: this checkout)")
    ap.add_argument("--variant", type=variant, action="append", default=[],
                    help="NAME:TMP[:VAR=VALUE,...], one way of running the tests; several alternate")
    ap.add_argument("--rounds", type=int, default=1, help="rounds over the variants (default 1)")
    ap.add_argument("paths", nargs="*", help="a part of the suite (default: all of it)")
    args = ap.parse_args()
    rec = Recorder("suite_time")
    python = str(ROOT / ".venv" / "bin" / "python")
    env = {**os.environ, "CI": "true", "PROMO_UI_TESTS": "1"}
    base = [python, "-m", "pytest", "-m", "slow or not slow", "-p", "no:cacheprovider", *args.paths]
    collected = subprocess.run([*base, "--collect-only", "-q"], cwd=args.root, env=env, capture_output=True, text=True)
    n_collected = int(re.search(r"(\d+) tests? collected", collected.stdout).group(1))
    cmd = [*base, "-q", "--durations=30"] + (["-n", str(args.workers), "--dist", "loadfile"] if args.workers else [])
    common = {"root": str(args.root), "collected": n_collected, "workers": args.workers}
    if not args.variant:  # the tests' folder that scripts/test.sh would choose
        tmp = test_sh_tmp()
        figures = {**common, "tmp": str(tmp or "pytest default"), **run(cmd, args.root, env, tmp)}
        headline = {"wall minutes": round(figures["wall_seconds"] / 60, 1), "collected": n_collected,
                    **figures["counts"], "workers": args.workers}
        rec.write(figures, headline=headline, tag=args.tag)
        return figures["exit_code"]
    runs = []
    for r in range(args.rounds):
        for v in args.variant:
            print(f"round {r + 1}, {v['name']}:", end=" ", flush=True)
            runs.append({"round": r + 1, "variant": v["name"], "tmp": str(v["tmp"] or "pytest default"),
                         "env": v["env"], **run(cmd, args.root, {**env, **v["env"]}, v["tmp"])})
    medians = {v["name"]: statistics.median(x["wall_seconds"] for x in runs if x["variant"] == v["name"])
               for v in args.variant}
    figures = {**common, "rounds": args.rounds, "median_wall_seconds": medians, "runs": runs}
    first = args.variant[0]["name"]
    headline = {**{f"median wall s, {n}": s for n, s in medians.items()},
                **{f"{n} / {first}": round(s / medians[first], 3) for n, s in medians.items() if n != first},
                "collected": n_collected, "workers": args.workers}
    rec.write(figures, headline=headline, tag=args.tag)
    print(headline)
    return max(x["exit_code"] for x in runs)


if __name__ == "__main__":
    sys.exit(main())

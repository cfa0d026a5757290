"""The README's two set-up commands on a fresh clone: how long a new user waits.

Clones this repository's committed HEAD into a temporary folder (no `.venv`, no `data/`), then times
there, one after the other:
  - setup:  `bash scripts/setup.sh` (creates `.venv`: torch's CPU build, the package and its pinned
            dependencies, the test and docs tools);
  - demo:   `bash scripts/demo.sh` (setup is then up to date; simulates the demo campaign, runs
            `promo run`, prints the leaderboard);
  - tests:  with `--tests`, `CI=true bash scripts/test.sh` (every test, the slow ones and the browser
            test of the UI included, and the docs build), with pytest's summary line.
The first run of `bash scripts/demo.sh` on a fresh clone costs setup + demo. pip's download cache is
the machine's own (its size is recorded: a cold cache adds the downloads).

    .venv/bin/python benchmarks/first_run.py [--tests] [--keep]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import ROOT, Recorder  # noqa: E402


def timed(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> dict:
    start = time.perf_counter()
    with open(log, "w") as fh:
        rc = subprocess.run(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - start
    tail = log.read_text().splitlines()[-15:]
    print(f"{' '.join(cmd)}: exit {rc}, {seconds:.0f} s", file=sys.stderr)
    return {"command": " ".join(cmd), "exit_code": rc, "seconds": round(seconds, 1), "output_tail": tail}


def pip_cache_bytes() -> int | None:
    cache = Path(os.environ.get("PIP_CACHE_DIR") or Path.home() / ".cache" / "pip")
    if not cache.exists():
        return None
    return sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tests", action="store_true", help="also time CI=true bash scripts/test.sh (the whole suite)")
    ap.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    args = ap.parse_args()
    rec = Recorder("first_run")
    tmp = Path(tempfile.mkdtemp(prefix="promo-first-run-"))
    clone = tmp / "promo_assets"
    subprocess.run(["git", "clone", "--quiet", "--no-local", str(ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROMO_", "VIRTUAL_ENV", "DAGSTER_"))}
    result = {"pip_cache_bytes_before": pip_cache_bytes(), "steps": {}}
    steps = [("setup", ["bash", "scripts/setup.sh"], env), ("demo", ["bash", "scripts/demo.sh"], env)]
    if args.tests:
        steps.append(("tests", ["bash", "scripts/test.sh"], {**env, "CI": "true"}))
    for name, cmd, step_env in steps:
        result["steps"][name] = timed(cmd, clone, step_env, tmp / f"{name}.log")
        if result["steps"][name]["exit_code"] != 0:
            break
    tests = result["steps"].get("tests")
    if tests:
        summary = next((line for line in reversed(tests["output_tail"]) if re.search(r"\d+ passed", line)), None)
        tests["pytest_summary"] = summary
    ok = all(s["exit_code"] == 0 for s in result["steps"].values())
    headline = {}
    if "setup" in result["steps"] and "demo" in result["steps"]:
        s, d = result["steps"]["setup"]["seconds"], result["steps"]["demo"]["seconds"]
        headline |= {"first `bash scripts/demo.sh` on a fresh clone, seconds (setup + demo)": round(s + d),
                     "of which creating .venv (scripts/setup.sh), seconds": round(s),
                     "of which the demo itself, seconds": round(d)}
    if tests:
        headline |= {"`CI=true bash scripts/test.sh`, seconds (.venv present)": round(tests["seconds"]),
                     "pytest summary": tests.get("pytest_summary")}
    headline["every step succeeded"] = ok
    rec.write(result, headline=headline)
    if args.keep:
        print(f"kept {tmp}", file=sys.stderr)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

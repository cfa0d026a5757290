"""The command line and the documentation as a user meets them: how long the strict docs build takes,
how wide `promo --help` and every command's `--help` are, and how long `promo --help` takes to appear.

Runs, from the repository root:
  - docs:  `mkdocs build --strict -q` into a temporary folder (the whole site, the pages generated
           from the code included), `--repeats` times (default 1), with its exit code and wall time;
  - help:  `promo --help` and `promo COMMAND --help` for every command, each with COLUMNS=80, 100 and
           250 (argparse wraps at the terminal's width): the widest line of each (must be <= 100), and
           the wall time of `promo --help` and `promo simulate --help` (median of 5, a fresh process
           each: the import cost a user waits for);
  - report: with `--warehouse W --landing L` (a finished `promo run`), the widest line of
           `promo report` (must be <= 120) and of `promo report --wide`.

    .venv/bin/python benchmarks/cli_docs.py [--repeats N] [--warehouse W --landing L --dagster-home D]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import ROOT, Recorder  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402

BIN = Path(sys.executable).parent
QUIET = {"DISABLE_MKDOCS_2_WARNING": "true", "NO_MKDOCS_2_WARNING": "1"}


def run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[int, str, float]:
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True)
    return out.returncode, out.stdout + out.stderr, time.perf_counter() - start


def commands() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from promo_assets.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=1, help="docs builds to time [1]")
    ap.add_argument("--warehouse", help="a finished run's warehouse: also measure promo report's width")
    ap.add_argument("--landing", help="its landing folder")
    ap.add_argument("--dagster-home", help="its DAGSTER_HOME")
    args = ap.parse_args()
    rec = Recorder("cli_docs")
    promo = str(BIN / "promo")

    builds = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as site:
            rc, out, seconds = run([str(BIN / "mkdocs"), "build", "--strict", "-q", "-d", site], QUIET)
            pages = sum(1 for _ in Path(site).rglob("*.html"))
        builds.append({"exit_code": rc, "seconds": round(seconds, 1), "html_pages": pages,
                       "output_tail": out.splitlines()[-10:]})
        print(f"mkdocs build --strict: exit {rc}, {seconds:.1f} s, {pages} pages", file=sys.stderr)

    widths = {}
    for name in ["", *commands()]:
        argv = [promo, *([name] if name else []), "--help"]
        for columns in ("80", "100", "250"):
            rc, out, _ = run(argv, {"COLUMNS": columns})
            widths[f"promo {name} --help, COLUMNS={columns}".replace("  ", " ")] = {
                "exit_code": rc, "widest_line": max(len(line) for line in out.splitlines())}
    widest_help = max(w["widest_line"] for w in widths.values())
    print(f"widest --help line: {widest_help}", file=sys.stderr)
    timings = {}
    for argv in ([promo, "--help"], [promo, "simulate", "--help", "--start", REFERENCE_START.isoformat()]):
        times = [run(argv)[2] for _ in range(5)]
        timings[" ".join(["promo", *argv[1:]])] = {"median_s": round(statistics.median(times), 3),
                                                    "all_s": [round(t, 3) for t in times]}

    report = None
    if args.warehouse:
        flags = ["--warehouse", args.warehouse] + (["--landing", args.landing] if args.landing else []) + (
            ["--dagster-home", args.dagster_home] if args.dagster_home else [])
        report = {}
        for label, extra in (("default", []), ("wide", ["--wide"])):
            rc, out, seconds = run([promo, "report", *flags, *extra])
            report[label] = {"exit_code": rc, "widest_line": max(len(line) for line in out.splitlines()),
                             "lines": len(out.splitlines()), "seconds": round(seconds, 2)}
        print(f"promo report widest line: {report['default']['widest_line']} (--wide {report['wide']['widest_line']})",
              file=sys.stderr)

    headline = {"docs build s (strict, whole site)": builds[0]["seconds"] if builds else None,
                "docs build exit code": builds[0]["exit_code"] if builds else None,
                "widest --help line (columns)": widest_help,
                "promo --help s (median of 5)": timings["promo --help"]["median_s"],
                "promo simulate --help s (median of 5)": timings["promo simulate --help"]["median_s"]}
    if report:
        headline["promo report widest line (columns)"] = report["default"]["widest_line"]
        headline["promo report --wide widest line (columns)"] = report["wide"]["widest_line"]
    rec.write({"docs_builds": builds, "help_widths": widths, "help_timings": timings, "report": report},
              headline=headline)
    ok = all(b["exit_code"] == 0 for b in builds) and widest_help <= 100 and all(
        w["exit_code"] == 0 for w in widths.values()) and (report is None or report["default"]["widest_line"] <= 120)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Count the hostile-input suite: inputs tried / clear error / documented acceptance / traceback / silent.

Every bad or hostile input the project is tested against is a pytest case marked `hostile`, with an
id that starts `error-` (the input must be refused with a clear error naming the offending thing:
the test asserts the message) or `accepted-` (documented as accepted, e.g. clipped with a warning:
the test asserts the documented behaviour). This script runs exactly those cases (the `slow` ones
too: they go through `promo run`) and counts them:

- clear error: an `error-` case that passed (the refusal and its message were asserted);
- documented acceptance: an `accepted-` case that passed;
- traceback: a case that failed with an exception other than a failed assertion (the code raised
  something nobody expected; must be 0);
- silent: a case that failed on an assertion or "DID NOT RAISE" (the input went through without
  the expected refusal or message; must be 0);
- skipped: a case that could not run here (its reason is printed; e.g. no user namespaces for the
  read-only mount).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/hostile_inputs.py [--no-hang-cases]

It prints a table per test module and the totals, and records them (benchmarks/_results.py) in
benchmarks/results/hostile_inputs.json.

Then it times the inputs that used to hang a run (the same inputs as tests/unit/ingestion/test_hostile_landing.py):
each campaign.yaml bomb through `CampaignConfig.load`, a FIFO day file through the day scan, and
each of them end to end through `promo run --ingest-only` in a fresh process (Dagster's start
included; the baseline is the same run of a campaign with no day file), with the message shown;
each must be refused within 10 s and make `promo run` no more than 10 s slower than the baseline
(`--no-hang-cases` skips this part).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _results import Recorder  # noqa: E402

COLUMNS = ["tried", "clear_error", "documented_acceptance", "traceback", "silent", "skipped"]


def _case_id(name: str) -> str:
    return name[name.index("[") + 1:-1] if "[" in name else name


def classify(case: ET.Element) -> str:
    """The column of one junit test case (COLUMNS, 'tried' aside)."""
    if case.find("skipped") is not None:
        return "skipped"
    bad = case.find("failure") if case.find("failure") is not None else case.find("error")
    if bad is not None:
        text = (bad.get("message") or "") + (bad.text or "")
        silent = bad.tag == "failure" and (text.startswith("AssertionError") or "DID NOT RAISE" in text
                                           or text.startswith("assert "))
        return "silent" if silent else "traceback"
    return "documented_acceptance" if _case_id(case.get("name", "")).startswith("accepted-") else "clear_error"


def _first_line_with(text: str, *needles: str) -> str:
    return next((line.strip() for line in text.splitlines() if any(n in line for n in needles)), "")


def hang_cases() -> list[dict]:
    """Time every input that used to hang a run: in-process, then through `promo run` (a subprocess)."""
    sys.path.insert(0, str(ROOT))
    from promo_assets.config.campaign import CampaignConfig, CampaignConfigError
    from promo_assets.ingestion import scan_day_files
    from tests.unit.ingestion.test_hostile_landing import BOMBS, GOOD_YAML, HOSTILE_YAML

    yaml_cases = {**BOMBS, **{i: t for i, t, _ in HOSTILE_YAML if i in ("error-10000-deep-nested-list",
                                                                      "error-10000-levels", "error-alias-cycle")}}
    out = []
    cases = [*yaml_cases.items(), ("error-fifo-day-file", None), ("baseline-campaign-without-day-files", "")]
    for name, text in cases:
        with tempfile.TemporaryDirectory() as tmp:
            landing = Path(tmp) / "landing"
            folder = landing / "c1"
            (folder / "events").mkdir(parents=True)
            if not text:  # the FIFO, or the baseline: promo run's own start with nothing to load
                (folder / "campaign.yaml").write_text(GOOD_YAML)
            if text == "":
                seconds, message = 0.0, "(nothing to refuse: the time of promo run itself)"
            elif text is None:
                os.mkfifo(folder / "events" / "2026-03-02.csv")
                start = time.perf_counter()
                scan = scan_day_files(landing, "c1")
                seconds, message = time.perf_counter() - start, str(scan.skipped[0])
            else:
                (folder / "campaign.yaml").write_bytes(text.encode())
                start = time.perf_counter()
                try:
                    CampaignConfig.load(folder / "campaign.yaml")
                    message = "accepted"
                except CampaignConfigError as exc:
                    message = str(exc)
                seconds = time.perf_counter() - start
            env = {**os.environ, "PROMO_LANDING_DIR": str(landing), "PROMO_WAREHOUSE": f"{tmp}/w.duckdb",
                   "PROMO_ARTIFACTS_DIR": f"{tmp}/artifacts", "DAGSTER_HOME": f"{tmp}/dagster_home"}
            Path(env["DAGSTER_HOME"]).mkdir()
            (Path(env["DAGSTER_HOME"]) / "dagster.yaml").write_text((ROOT / "dagster_home" / "dagster.yaml").read_text())
            start = time.perf_counter()
            try:
                proc = subprocess.run([sys.executable, "-m", "promo_assets.cli", "run", "--ingest-only", "--no-progress"],
                                      cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
                cli = {"exit_code": proc.returncode, "seconds": round(time.perf_counter() - start, 2),
                       "line": _first_line_with(proc.stderr + proc.stdout, "campaign.yaml", "skipped", "FIFO")[:300],
                       "traceback": "Traceback" in proc.stderr}
            except subprocess.TimeoutExpired:
                cli = {"exit_code": None, "seconds": 300.0, "line": "timed out after 300 s", "traceback": False}
        out.append({"case": name, "seconds": round(seconds, 3), "message": message[:400], "promo_run": cli})
        print(f"{name:<40} {seconds:7.3f} s  promo run: exit {cli['exit_code']} in {cli['seconds']:.1f} s  {message[:150]}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-hang-cases", action="store_true", help="do not time the inputs that used to hang a run")
    args = parser.parse_args(argv)
    rec = Recorder("hostile_inputs")
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "hostile.xml"
        pytest_args = ["-m", "pytest", "-m", "hostile", "-q", "-p", "no:cacheprovider", "-rs", f"--junitxml={report}"]
        proc = subprocess.run([sys.executable, *pytest_args], cwd=ROOT, capture_output=True, text=True)
        if not report.exists():
            print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
            return 2
        cases = list(ET.parse(report).getroot().iter("testcase"))
    per_file: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    bad: dict[str, list[str]] = {"traceback": [], "silent": [], "skipped": []}
    for case in cases:
        module = case.get("classname", "").split(".")[-1]
        column = classify(case)
        per_file[module]["tried"] += 1
        per_file[module][column] += 1
        if column in bad:
            bad[column].append(f"{module}::{_case_id(case.get('name', ''))}")
    total = sum(per_file.values(), collections.Counter())
    width = max([len(m) for m in per_file] + [len("total")])
    print(f"{'suite':<{width}}  " + "  ".join(f"{c:>21}" for c in COLUMNS))
    for module, counts in sorted(per_file.items()):
        print(f"{module:<{width}}  " + "  ".join(f"{counts[c]:>21}" for c in COLUMNS))
    print(f"{'total':<{width}}  " + "  ".join(f"{total[c]:>21}" for c in COLUMNS))
    for column, names in bad.items():
        if names:
            print(f"{column}:", *names, sep="\n  ")
    hangs = [] if args.no_hang_cases else hang_cases()
    # a case hangs when its refusal takes 10 s, or promo run takes 10 s more than with nothing to load
    base = next((h["promo_run"]["seconds"] for h in hangs if h["case"].startswith("baseline")), 0.0)
    slow_hangs = [h["case"] for h in hangs if h["seconds"] >= 10 or h["promo_run"]["seconds"] >= base + 10]
    figures = {"pytest": " ".join(pytest_args[2:-1]), "total": {c: total[c] for c in COLUMNS},
               "per_module": {m: {c: counts[c] for c in COLUMNS} for m, counts in sorted(per_file.items())},
               **{column: names for column, names in bad.items()},
               "hang_cases": hangs, "hang_cases_over_10_s": slow_hangs}
    print(json.dumps({"total": figures["total"]}))
    rec.write(figures, headline={"inputs tried": total["tried"], "refused with a clear, specific error": total["clear_error"],
                                "documented as accepted": total["documented_acceptance"], "traceback": total["traceback"],
                                "silent": total["silent"], "skipped": total["skipped"],
                                "hang cases over 10 s": len(slow_hangs)})
    return 0 if not (bad["traceback"] or bad["silent"] or slow_hangs) and total["tried"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""Count the hostile-input suite: inputs tried / clear specific error / traceback / silently accepted.

Every bad or hostile input the project is tested against is a pytest case marked `hostile`, with an
id that starts `error-` (the input must be refused with a clear error naming the offending thing:
the test asserts the message) or `accepted-` (documented as accepted, e.g. clipped with a warning:
the test asserts the documented behaviour). This script runs exactly those cases and counts them:

- clear specific error: an `error-` case that passed (the refusal and its message were asserted);
- documented accepted: an `accepted-` case that passed;
- traceback / unclear: any case that failed or raised (must be 0);
- silently accepted: a case that failed because the input went through without a word (must be 0);
  reported together with the failures, since a failing `error-` case is either.

    .venv/bin/python benchmarks/hostile_inputs.py            # prints a table and JSON
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _results import Recorder  # noqa: E402


def _case_id(name: str) -> str:
    return name[name.index("[") + 1:-1] if "[" in name else name


def main() -> int:
    rec = Recorder("hostile_inputs")
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "hostile.xml"
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-m", "hostile", "-q", "-p", "no:cacheprovider",
             f"--junitxml={report}"],
            cwd=ROOT, capture_output=True, text=True,
        )
        if not report.exists():
            print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
            return 2
        cases = ET.parse(report).getroot().iter("testcase")
        per_file: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        failed: list[str] = []
        for case in cases:
            module = case.get("classname", "").split(".")[-1]
            cid = _case_id(case.get("name", ""))
            bad = case.find("failure") is not None or case.find("error") is not None
            skipped = case.find("skipped") is not None
            counts = per_file[module]
            counts["tried"] += 1
            if skipped:
                counts["skipped"] += 1
            elif bad:
                counts["traceback_or_unclear"] += 1
                failed.append(f"{module}::{cid}")
            elif cid.startswith("accepted-"):
                counts["documented_accepted"] += 1
            else:
                counts["clear_error"] += 1
    total = sum(per_file.values(), collections.Counter())
    cols = ["tried", "clear_error", "documented_accepted", "traceback_or_unclear", "skipped"]
    width = max([len(m) for m in per_file] + [len("total")])
    print(f"{'suite':<{width}}  " + "  ".join(f"{c:>20}" for c in cols))
    for module, counts in sorted(per_file.items()):
        print(f"{module:<{width}}  " + "  ".join(f"{counts[c]:>20}" for c in cols))
    print(f"{'total':<{width}}  " + "  ".join(f"{total[c]:>20}" for c in cols))
    if failed:
        print("failed cases:", *failed, sep="\n  ")
    figures = {"total": {c: total[c] for c in cols}, "per_suite": {m: {c: n[c] for c in cols} for m, n in sorted(per_file.items())},
               "failed": failed}
    print(json.dumps(figures))
    rec.write(figures, headline={"inputs tried": total["tried"], "refused with a clear, specific error": total["clear_error"],
                                "documented as accepted": total["documented_accepted"],
                                "traceback or unclear": total["traceback_or_unclear"], "skipped": total["skipped"]})
    return 0 if not failed and total["tried"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""One result from several runs of benchmarks/champion.py or benchmarks/champion_rules.py made apart (one
campaign per process, e.g. on a machine with many cores, each with its own --tag): their per-campaign
rows joined, the summary computed again over all of them as the script computes it, and each run's
own record (command, commit, date, load, machine, seconds) kept under `sources`.

    .venv/bin/python benchmarks/merge_results.py champion_rules --tag T [--seeds-from 100] \
        [--note TEXT] FILE [FILE ...]

`--seeds-from` / `--seeds-below` keep the campaigns of those seeds only (e.g. the tuning seeds 100-114
or the report seeds 0-4 of the same runs). `--only-evidence` keeps those evidence kinds of a
champion_rules result (e.g. holdout xfit-day). Writes benchmarks/results/<benchmark>--<tag>.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import Recorder  # noqa: E402

SOURCE_KEYS = ("command", "git_commit", "modified_code", "date", "seconds", "load_start", "load_end", "cpu_count",
               "python", "env")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("benchmark", choices=["champion", "champion_rules"])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--seeds-from", type=int, default=None, help="keep the campaigns of seeds >= this")
    ap.add_argument("--seeds-below", type=int, default=None, help="keep the campaigns of seeds < this")
    ap.add_argument("--only-evidence", nargs="+", default=None, help="champion_rules: keep these evidence kinds")
    ap.add_argument("--note", default=None, help="what the reader needs to know about where the runs were made")
    args = ap.parse_args()
    docs = [json.loads(f.read_text()) for f in args.files]
    wrong = [str(f) for f, d in zip(args.files, docs) if d.get("benchmark") != args.benchmark]
    if wrong:
        raise SystemExit(f"not results of benchmarks/{args.benchmark}.py: {', '.join(wrong)}")
    rows = pd.DataFrame([r for d in docs for r in d["figures"]["campaigns"]])
    if args.seeds_from is not None:
        rows = rows[rows["seed"] >= args.seeds_from]
    if args.seeds_below is not None:
        rows = rows[rows["seed"] < args.seeds_below]
    if args.only_evidence and "evidence" in rows:
        rows = rows[rows["evidence"].isin(args.only_evidence)]
    if rows.empty:
        raise SystemExit("no campaign rows left to merge")
    rec = Recorder(args.benchmark)
    sources = [{"file": f.name, **{k: d.get(k) for k in SOURCE_KEYS}} for f, d in zip(args.files, docs)]
    merged = {"merged_from": len(docs), "note": args.note, "sources": sources}
    if args.benchmark == "champion_rules":
        import champion_rules

        summary = champion_rules.summarize(rows)
        chosen, score = champion_rules.choose_rule(summary["rules"])
        rec.write({**merged, "targets": champion_rules.TARGETS, "nearest_to_targets": chosen, "target_score": score,
                   **summary, "campaigns": rows.to_dict(orient="records")}, tag=args.tag,
                  headline=champion_rules.headline(summary))
        print(f"{len(rows)} rows; nearest to the targets: {chosen} (score {score[chosen]})")
    else:
        import champion

        summary = champion.summarize(rows)
        rec.write({**merged, "summary": summary, "campaigns": rows.to_dict(orient="records")}, tag=args.tag,
                  headline=champion.headline(summary))
        print(f"{summary['campaigns']} campaigns; mean {json.dumps(summary['mean'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

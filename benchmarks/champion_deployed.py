"""Deployed days as the champion's evidence (campaign.yaml `champion.deployed_days`), on the closed loop.

For each seed, in a fresh temporary folder and through the CLI (as benchmarks/closed_loop.py):

    promo simulate --preset demo --campaign loop --days 3 --users U --seed S   (+ exploration, models)
    for each loop day: promo run; the simulated users answer the decision file of --budget

with PROMO_KEEP_RUNS=--keep-runs (the deployed days whose decisions are still stored can be evidence).
The loop itself runs with the default (`deployed_days: true`). After every `promo run` the champion is
chosen again from the same warehouse, with the incumbent that run saw (the champion before it), twice:
with the deployed days and without them (the holdout alone). Both are scored with the truth, kept for
auditing only: % of the oracle at matched true spend on the holdout users, as the champion asset's
`truth` line. Per day it records the evidence events (holdout, deployed, the days used and those left
out with the reason), both champions and proposals with their % of the oracle, the best candidate in
truth, and whether the choice with deployed days reproduces the pipeline's champion. Writes
benchmarks/results/champion_deployed[--TAG].json.

    .venv/bin/python benchmarks/champion_deployed.py [--seeds 100 101 102] [--days 6] [--users 1500]
        [--models lgbm_s lgbm_s_mono lgbm_t] [--keep-runs 10] [--share 0.05] [--max-epochs 1] [--tag T]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _pipeline_bench import folder_env  # noqa: E402
from _results import Recorder  # noqa: E402
from closed_loop import cli  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402

START = REFERENCE_START
CAMPAIGN = "loop"


def both_ways(folder: Path) -> dict:
    """The champion of the latest run chosen again with and without the deployed days (module docstring)."""
    from promo_assets.config.campaign import CampaignConfig
    from promo_assets.decisions.champion_run import choose, read_champion_inputs, with_deployed_days
    from promo_assets.decisions.deployed import source_counts
    from promo_assets.evaluation.champion import Candidate
    from promo_assets.evaluation.inputs import read_evaluation_inputs
    from promo_assets.simulation.truth import truth_arrays
    from promo_assets.store.warehouse import connect, sql

    landing = folder / "landing"
    config = CampaignConfig.load(landing / CAMPAIGN)
    with connect(folder / "warehouse.duckdb", read_only=True) as con:
        latest = con.execute(sql("decisions", "latest_champion"), [CAMPAIGN, ""]).df().iloc[0]
        before = con.execute("SELECT champion_members FROM champion WHERE campaign = ? ORDER BY decided_at DESC "
                             "LIMIT 1 OFFSET 1", [CAMPAIGN]).fetchone()
        ev = read_evaluation_inputs(con, CAMPAIGN, config, None, lambda ids: truth_arrays(landing / CAMPAIGN, ids))
        board = latest["leaderboard_run_id"]
        plain = read_champion_inputs(con, CAMPAIGN, ev, board, "", config.n_levels)
        plain = dataclasses.replace(plain, incumbent=Candidate.from_dict(json.loads(before[0])) if before else None)
        t0 = time.perf_counter()
        with_days = with_deployed_days(con, CAMPAIGN, config, plain)
        read_seconds = time.perf_counter() - t0
    out = {"pipeline_champion": latest["champion"], "pipeline_pct": 100 * float(latest["pct_oracle"]),
           "pipeline_evidence_events": int(latest["evidence_events"]), "read_deployed_seconds": round(read_seconds, 2),
           "incumbent": plain.incumbent.name if plain.incumbent else None,
           "deployed_days": [{"day": d.day.isoformat(), "events": d.events, "used": d.used, "reason": d.reason}
                             for d in with_days.deployed]}
    best = {}
    for key, inputs in (("with", with_days), ("without", plain)):
        t0 = time.perf_counter()
        choice = choose(inputs, config, board)
        d = choice.decision
        pct = {n: 100 * float(np.mean(v)) for n, v in choice.pct.items()}
        best.update(pct)
        out[key] = {"evidence_events": choice.evidence.n, "sources": source_counts(choice.evidence),
                    "champion": d.champion.name, "champion_pct": pct[d.champion.name], "changed": d.changed,
                    "proposal": d.proposal.name, "proposal_pct": pct[d.proposal.name], "decided_by": d.decided_by,
                    "choose_seconds": round(time.perf_counter() - t0, 2)}
    name = max(best, key=best.get)
    out["best_candidate"], out["best_pct"] = name, best[name]
    for key in ("with", "without"):
        out[key]["regret"] = best[name] - out[key]["champion_pct"]
        out[key]["proposal_regret"] = best[name] - out[key]["proposal_pct"]
    out["with_reproduces_pipeline"] = out["with"]["champion"] == out["pipeline_champion"]
    return out


def run_seed(seed: int, args) -> list[dict]:
    tmp = Path(tempfile.mkdtemp(prefix=f"champion-deployed-{seed}-"))
    env = {**folder_env(tmp), "PROMO_KEEP_RUNS": str(args.keep_runs)}
    if args.max_epochs:
        env["PROMO_MAX_EPOCHS"] = str(args.max_epochs)
    rows = []
    try:
        rc, out, _ = cli(["simulate", "--preset", "demo", "--campaign", CAMPAIGN, "--days", "3", "--users",
                          str(args.users), "--seed", str(seed), "--start", START.isoformat()], env, tmp)
        if rc:
            raise RuntimeError(f"promo simulate failed: {out[-2000:]}")
        with open(tmp / "landing" / CAMPAIGN / "campaign.yaml", "a") as f:
            f.write(f"exploration:\n  share: {args.share}\n  seed: {seed}\nmodels:\n  include: [{', '.join(args.models)}]\n"
                    f"monitoring:\n  budget: {args.budget}\n")  # the budget whose file the loop answers
        for i in range(1, args.days + 1):
            day = START + dt.timedelta(days=2 + i)
            rc, out, secs = cli(["run", "--campaign", CAMPAIGN, "--no-progress"], env, tmp)
            if rc:
                raise RuntimeError(f"promo run before {day} failed (exit {rc}): {out[-3000:]}")
            row = {"seed": seed, "loop_day": i, "decided_for": day.isoformat(), "run_seconds": round(secs, 1),
                   **both_ways(tmp)}
            rows.append(row)
            w, wo = row["with"], row["without"]
            print(f"seed {seed} day {i}: evidence {w['evidence_events']} ({w['sources']}) vs {wo['evidence_events']}; "
                  f"champion {w['champion']} {w['champion_pct']:.2f}% vs {wo['champion']} {wo['champion_pct']:.2f}%; "
                  f"proposal {w['proposal_pct']:.2f}% vs {wo['proposal_pct']:.2f}%; best {row['best_pct']:.2f}%; "
                  f"pipeline reproduced {row['with_reproduces_pipeline']}; run {secs:.0f}s, load {os.getloadavg()[0]:.1f}",
                  flush=True)
            folder = tmp / "outbox" / CAMPAIGN / day.isoformat()
            manifest = json.loads((folder / "manifest.json").read_text())
            entry = next(e for e in manifest["budgets"] if abs(e["budget_per_capita"] - args.budget) < 1e-9)
            rc, out, _ = cli(["simulate", "--respond-to", str(folder / entry["file"]), "--day", day.isoformat(),
                              "--campaign", CAMPAIGN], env, tmp)
            if rc:
                raise RuntimeError(f"promo simulate --respond-to {day} failed: {out[-2000:]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def summarize(rows: list[dict]) -> dict:
    """Over the loop days that had deployed evidence: the mean % of the oracle and regret of the
    champion and of the proposal with and without it, the paired differences and their standard error."""
    used = [r for r in rows if r["with"]["sources"].get("deployed")]
    out = {"loop_days": len(rows), "days_with_deployed_evidence": len(used),
           "pipeline_reproduced": sum(r["with_reproduces_pipeline"] for r in rows)}
    for what in ("champion", "proposal"):
        d = np.asarray([r["with"][f"{what}_pct"] - r["without"][f"{what}_pct"] for r in used])
        out[what] = {
            "with_pct": float(np.mean([r["with"][f"{what}_pct"] for r in used])) if used else None,
            "without_pct": float(np.mean([r["without"][f"{what}_pct"] for r in used])) if used else None,
            "difference": float(d.mean()) if d.size else None,
            "difference_se": float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else None,
            "days_better": int((d > 1e-9).sum()), "days_worse": int((d < -1e-9).sum()), "days_same": int((abs(d) <= 1e-9).sum())}
    out["evidence_by_loop_day"] = {int(day): {"with": float(np.mean([r["with"]["evidence_events"] for r in rows
                                                                    if r["loop_day"] == day])),
                                              "without": float(np.mean([r["without"]["evidence_events"] for r in rows
                                                                       if r["loop_day"] == day]))}
                                   for day in sorted({r["loop_day"] for r in rows})}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[100, 101, 102])
    ap.add_argument("--days", type=int, default=6, help="loop days (promo run + answer) per seed [6]")
    ap.add_argument("--users", type=int, default=1500)
    ap.add_argument("--models", nargs="+", default=["lgbm_s", "lgbm_s_mono", "lgbm_t"])
    ap.add_argument("--keep-runs", type=int, default=10, help="PROMO_KEEP_RUNS [10]")
    ap.add_argument("--share", type=float, default=0.05, help="the exploration share [0.05]")
    ap.add_argument("--budget", type=float, default=1.0, help="the budget whose decisions are deployed [1.0]")
    ap.add_argument("--max-epochs", type=int, default=1)
    ap.add_argument("--tag", default=None)
    args = ap.parse_args()
    rec = Recorder("champion_deployed")
    rows = []
    for seed in args.seeds:
        rows += run_seed(seed, args)
        summary = summarize(rows)
        result = {"preset": "demo", "users": args.users, "loop_days": args.days, "models": args.models,
                  "keep_runs": args.keep_runs, "share": args.share, "budget": args.budget, "seeds": args.seeds,
                  "done_seeds": sorted({r["seed"] for r in rows}), "summary": summary, "rows": rows}
        c = summary["champion"]
        path = rec.write(result, tag=args.tag, headline={
            "evidence events by loop day (with / without deployed days)":
                "; ".join(f"{k}: {v['with']:.0f}/{v['without']:.0f}" for k, v in summary["evidence_by_loop_day"].items()),
            "champion % of oracle with - without deployed days (days with deployed evidence)":
                None if c["difference"] is None else f"{c['difference']:+.3f} (se {c['difference_se']})",
            "proposal % of oracle with - without":
                None if summary["proposal"]["difference"] is None else f"{summary['proposal']['difference']:+.3f}"})
    print(json.dumps({"written": str(path), "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The monitoring of deployed decisions on the closed loop, against the simulator's truth.

For every case and seed, in a fresh folder (its own landing root, warehouse, artefact store, outbox and
DAGSTER_HOME), the production path — `promo run` then `promo simulate --respond-to` every day — run in
one Python process per loop (the CLI's `main`, as the `promo` command runs it, without paying the
imports again every day):

    promo simulate --preset demo --campaign loop --days 3 --users U --seed S --start 2026-03-01 [change]
    for each day D = 4 .. --days:   promo run --campaign loop;   promo simulate --respond-to <D>/<budget> --day D

Cases (the change on day --change-day, 12 by default):
  a          no change
  b_warn     a response shift (the coupon's effect moves from one city to another), reactions: warn
  b_react    the same shift, campaign.yaml monitoring.reactions realized_vs_predicted / effect_below_zero: retrain
             (with the monitoring settings of --react, e.g. --react stale_scope=segments stale_weight=0.01)
  a_react    no change, with the reactions of b_react (does the reaction fire or harm without a change?)
  c          a population shift: a new city and a feature beyond its training range
  d          a coupon system that applies 80 % of the decisions

Per loop day it records the deployed decision's true value and spend (`truth_on`, the day's truth), the
oracle at that true spend (% of the oracle), the true effect of the champion against the cost-matched
random reference at equal spend (the champion's levels of every user decided for, intent to treat under
non-compliance), the outcomes run's cumulative effect with its confidence sequence, and every check that
failed. It reports the interval's coverage (per look and per loop: ever excluded), its width against the
difference of means, the days until the right check fires after the change, false alarms in case a, and
the true % of the oracle over days 12–21 with the reaction against warn-only.

    .venv/bin/python benchmarks/monitoring.py [--cases a b_warn b_react c d] [--seeds 0 1 2 3 4]
        [--days 21] [--change-day 12] [--users 5000] [--share 0.05] [--budget 1.0]
        [--models lgbm_s lgbm_s_mono] [--react KEY=VALUE ...] [--jobs 2] [--tag NAME] [--summary-only]

Every loop's rows are kept in benchmarks/results/monitoring-loops/<case>-<seed>.json as soon as it
ends (a later run with the same settings skips it; the settings of a reacting case include --react),
so a long run can be resumed. PROMO_BENCH_RESULTS=DIR keeps them (and the JSON) elsewhere, e.g. while
tuning the reaction on other seeds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _pipeline_bench import folder_env  # noqa: E402
from _results import RESULTS, Recorder, plain  # noqa: E402
from promo_assets.simulation import REFERENCE_START  # noqa: E402

START = REFERENCE_START
CAMPAIGN = "loop"
REACTING = ("b_react", "a_react")
RIGHT_CHECK = {"b_warn": ("realized_vs_predicted", "effect_below_zero"), "b_react": ("realized_vs_predicted", "effect_below_zero"),
               "c": ("population_drift",), "d": ("compliance",)}
SHIFTS = {
    "b_warn": ["--response-shift", "city=chengdu:uplift=-1,city=beijing:uplift=3"],
    "b_react": ["--response-shift", "city=chengdu:uplift=-1,city=beijing:uplift=3"],
    "c": ["--population-shift", "city=shenzhen:share=0.2,avg_spend:scale=8:share=0.3"],
    "d": ["--compliance", "0.8"],
}


def settings_key(args, case: str | None = None) -> dict:
    key = {"days": args.days, "change_day": args.change_day, "users": args.users, "share": args.share,
           "budget": args.budget, "models": list(args.models), "rct_days": args.rct_days}
    if case in REACTING:
        key["react"] = dict(react_settings(args))
    return key


def react_settings(args) -> list[tuple[str, str]]:
    """The campaign.yaml `monitoring:` settings of the reacting cases (--react KEY=VALUE)."""
    out = []
    for item in args.react or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--react takes KEY=VALUE (a campaign.yaml monitoring: setting), got {item!r}")
        out.append((key.strip(), value.strip()))
    return out


def campaign_yaml(case: str, args) -> str:
    text = (f"exploration:\n  share: {args.share}\n  seed: 0\nmodels:\n  include: [{', '.join(args.models)}]\n"
            f"monitoring:\n  budget: {args.budget}\n")
    if case in REACTING:
        text += "".join(f"  {k}: {v}\n" for k, v in react_settings(args))
        text += "  reactions:\n    realized_vs_predicted: retrain\n    effect_below_zero: retrain\n"
    return text


def score_day(campaign_dir: Path, day: dt.date, file: Path, champion_levels: np.ndarray, compliance: float) -> dict:
    """The day's deployed decision against the day's truth (truth_on)."""
    from promo_assets.allocation import solve
    from promo_assets.decisions import read_decision_file
    from promo_assets.monitoring import true_effect
    from promo_assets.simulation import truth_on

    frame = read_decision_file(file)
    tv, tc = truth_on(campaign_dir, day, frame["user_id"].tolist())
    rows = np.arange(len(frame))
    lv = frame["level"].to_numpy().astype(int)
    value, spend = float(tv[rows, lv].mean()), float(tc[rows, lv].mean())
    oracle = float(solve(tv, tc, spend, per_capita=True, rounding="down").lp_response) / len(frame)
    # intent to treat: a decision not applied gives the cheapest level
    ev = compliance * tv + (1 - compliance) * tv[:, [0]]
    ec = compliance * tc + (1 - compliance) * tc[:, [0]]
    incentives = np.arange(tv.shape[1], dtype=float)
    truth = true_effect(ev, ec, champion_levels, incentives)
    return {"true_value": value, "true_spend": spend, "oracle_at_spend": oracle,
            "pct_oracle": value / oracle if oracle > 0 else float("nan"), "true_effect": truth["effect"],
            "true_vs_cheapest": truth["vs_cheapest"], "users": int(len(frame))}


def one_loop(case: str, seed: int, args) -> dict:
    """One loop, in this process (started by `run_loop` with the loop's environment)."""
    import pandas as pd

    import promo_assets.cli.main as cli
    from promo_assets.store import decisions as decisions_store
    from promo_assets.store import monitoring as monitoring_store
    from promo_assets.store.warehouse import connect, sql

    tmp = Path(os.environ["PROMO_LANDING_DIR"]).parent
    change = START + dt.timedelta(days=args.change_day - 1)
    sim = ["simulate", "--preset", "demo", "--campaign", CAMPAIGN, "--days", str(args.rct_days), "--users",
           str(args.users), "--seed", str(seed), "--start", START.isoformat()]
    if case in SHIFTS:
        sim += ["--change-day", change.isoformat(), *SHIFTS[case]]
    if cli.main(sim):
        raise RuntimeError("promo simulate failed")
    with open(tmp / "landing" / CAMPAIGN / "campaign.yaml", "a") as f:
        f.write(campaign_yaml(case, args))
    compliance_from = change if case == "d" else None
    rows = []
    for d in range(args.rct_days + 1, args.days + 1):
        day = START + dt.timedelta(days=d - 1)
        rc = cli.main(["run", "--campaign", CAMPAIGN, "--no-progress"])
        if rc:
            raise RuntimeError(f"promo run before day {day} failed (exit {rc})")
        folder = tmp / "outbox" / CAMPAIGN / day.isoformat()
        manifest = json.loads((folder / "manifest.json").read_text())
        entry = next(e for e in manifest["budgets"] if abs(e["budget_per_capita"] - args.budget) < 1e-9)
        with connect(tmp / "warehouse.duckdb", read_only=True) as con:
            run = monitoring_store.latest_run(con, CAMPAIGN) or ""  # its checks are written every run
            effect = monitoring_store.of_run(con, CAMPAIGN, run, "outcome_effect")
            outs = monitoring_store.of_run(con, CAMPAIGN, run, "outcomes")
            checks = monitoring_store.of_run(con, CAMPAIGN, run, "checks")
            dec_run = con.execute(sql("decisions", "latest_decisions_run"), [CAMPAIGN]).fetchone()[0]
            levels = con.execute(sql("monitoring", "decisions_with_champion_level"),
                                 [CAMPAIGN, dec_run, args.budget]).df()
            champ = decisions_store.latest_champion(con, CAMPAIGN).iloc[0].to_dict()
            window = monitoring_store.training_change_day(con, CAMPAIGN)
        decision = pd.read_parquet(folder / entry["file"])
        pi = levels.set_index("user_id").loc[decision["user_id"].astype(str), "champion_level"].to_numpy().astype(int)
        compliance = 0.8 if compliance_from is not None and day >= compliance_from else 1.0
        scored = score_day(tmp / "landing" / CAMPAIGN, day, folder / entry["file"], pi, compliance)
        if cli.main(["simulate", "--respond-to", str(folder / entry["file"]), "--day", day.isoformat(), "--campaign",
                     CAMPAIGN]):
            raise RuntimeError(f"promo simulate --respond-to {day} failed")
        last = effect.iloc[-1].to_dict() if len(effect) else {}
        rows.append({"day": d, "date": day.isoformat(), **scored,
                     "failed_checks": sorted(checks.loc[~checks["passed"], "check_name"]),
                     "effect_as_of": str(last.get("decision_date", ""))[:10] or None,
                     "effect": last.get("effect"), "low": last.get("low"), "high": last.get("high"),
                     "fixed_low": last.get("fixed_low"), "fixed_high": last.get("fixed_high"),
                     "dm_low": last.get("dm_low"), "dm_high": last.get("dm_high"),
                     "joined_by_day": {str(r.decision_date)[:10]: int(r.joined) for r in outs.itertuples()
                                       if r.status == "ok"},
                     "explored": int((decision["policy"] == "explore").sum()),
                     "champion": champ["champion"], "champion_holdout_pct_oracle": champ["pct_oracle"],
                     "best_candidate": champ["best_candidate"], "best_holdout_pct_oracle": champ["best_pct_oracle"],
                     "training_change_day": None if window is None else window.isoformat(),
                     "scored_users": int(len(decision))})
        print(f"{case} seed {seed} day {d}: {100 * scored['pct_oracle']:.2f}% of the oracle, true effect "
              f"{scored['true_effect']:+.4f}, estimate {last.get('effect', float('nan')):+.4f} "
              f"[{last.get('low', float('nan')):+.4f}, {last.get('high', float('nan')):+.4f}], failed "
              f"{rows[-1]['failed_checks']}", flush=True)
    return {"case": case, "seed": seed, "change_date": change.isoformat(), "days": rows}


def run_loop(case: str, seed: int, args, store: Path) -> dict:
    """One loop in a subprocess of its own (its own environment), its rows kept in `store`."""
    path = store / f"{case}-{seed}.json"
    key = settings_key(args, case)
    if path.exists():
        done = json.loads(path.read_text())
        if done.get("settings") == key:
            return done
    tmp = Path(tempfile.mkdtemp(prefix=f"monitoring-{case}-{seed}-"))
    env = {**folder_env(tmp), "PROMO_REPORT_DIR": str(tmp / "reports")}
    out = tmp / "loop.json"
    cmd = [sys.executable, __file__, "--one", case, str(seed), "--out", str(out), *args.passthrough]
    try:
        proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True)
        (store / f"{case}-{seed}.log").write_text(proc.stdout[-20000:] + proc.stderr[-20000:])
        if proc.returncode:
            raise RuntimeError(f"loop {case} seed {seed} failed: {proc.stderr[-3000:]}")
        result = {**json.loads(out.read_text()), "settings": key}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    path.write_text(json.dumps(plain(result), indent=1) + "\n")
    return result


def summarize(loops: list[dict], args) -> dict:
    """Coverage, widths, detection, false alarms and % of the oracle after the change, per case."""
    out: dict = {}
    change_index = args.change_day
    for case in sorted({lp["case"] for lp in loops}):
        mine = [lp for lp in loops if lp["case"] == case]
        looks = inside = 0
        ever = 0
        widths, fixed, dm = [], [], []
        delays, false_alarms, pct_after = [], 0, []
        for lp in mine:
            truth_by_date = {r["date"]: r["true_effect"] for r in lp["days"]}
            excluded = False
            for r in lp["days"]:
                if r["low"] is None or r["high"] is None:
                    continue
                joined = r["joined_by_day"]
                w = np.array([joined[d] for d in joined if d in truth_by_date], dtype=float)
                t = np.array([truth_by_date[d] for d in joined if d in truth_by_date])
                if not len(w):
                    continue
                truth = float((w * t).sum() / w.sum())
                ok = r["low"] <= truth <= r["high"]
                looks += 1
                inside += ok
                excluded |= not ok
                widths.append(r["high"] - r["low"])
                fixed.append(r["fixed_high"] - r["fixed_low"])
                if r["dm_low"] is not None:
                    dm.append(r["dm_high"] - r["dm_low"])
            ever += excluded
            right = RIGHT_CHECK.get(case, ())
            for r in lp["days"]:
                if r["day"] < change_index and r["failed_checks"]:
                    false_alarms += 1
                if case in ("a", "a_react") and r["failed_checks"]:
                    false_alarms += r["day"] >= change_index
            hit = [r["day"] - change_index for r in lp["days"] if r["day"] >= change_index
                   and set(r["failed_checks"]) & set(right)]
            if right:
                delays.append(hit[0] if hit else None)
            pct_after.append(float(np.mean([r["pct_oracle"] for r in lp["days"] if r["day"] >= change_index])))
        out[case] = {"loops": len(mine), "looks": looks, "coverage": inside / looks if looks else None,
                     "loops_ever_excluding_truth": ever / len(mine) if mine else None,
                     "mean_width_confidence_sequence": float(np.mean(widths)) if widths else None,
                     "mean_width_fixed_sample": float(np.mean(fixed)) if fixed else None,
                     "mean_width_difference_of_means": float(np.mean(dm)) if dm else None,
                     "days_until_flagged": delays, "false_alarm_days": false_alarms,
                     "pct_oracle_after_change_per_loop": pct_after,
                     "pct_oracle_after_change": float(np.mean(pct_after)) if pct_after else None}
    for react, warn in (("b_react", "b_warn"), ("a_react", "a")):
        if react in out:  # the loops that retrained (a training window set) and on which day first
            reacted = {lp["seed"]: next((r["day"] for r in lp["days"] if r.get("training_change_day")), None)
                       for lp in loops if lp["case"] == react}
            out[react]["first_retrain_day_per_seed"] = reacted
        if react in out and warn in out:
            after = {c: {lp["seed"]: float(np.mean([r["pct_oracle"] for r in lp["days"] if r["day"] >= change_index]))
                         for lp in loops if lp["case"] == c} for c in (react, warn)}
            both = sorted(set(after[react]) & set(after[warn]))
            gains = {s: 100 * (after[react][s] - after[warn][s]) for s in both}
            out[f"{react}_minus_{warn}_points_per_seed"] = gains
            out[f"{react}_minus_{warn}_points"] = float(np.mean(list(gains.values()))) if gains else None
    if "b_react_minus_b_warn_points" in out:
        out["reaction_gain_points"] = out["b_react_minus_b_warn_points"]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", nargs="+", default=["a", "b_warn", "b_react", "c", "d"],
                   choices=["a", "a_react", "b_warn", "b_react", "c", "d"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    p.add_argument("--days", type=int, default=21)
    p.add_argument("--rct-days", type=int, default=3)
    p.add_argument("--change-day", type=int, default=12)
    p.add_argument("--users", type=int, default=5000)
    p.add_argument("--share", type=float, default=0.05)
    p.add_argument("--budget", type=float, default=1.0)
    p.add_argument("--models", nargs="+", default=["lgbm_s", "lgbm_s_mono"])
    p.add_argument("--react", nargs="*", default=[], metavar="KEY=VALUE",
                   help="campaign.yaml monitoring: settings of the reacting cases (b_react, a_react)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--tag", default=None)
    p.add_argument("--summary-only", action="store_true",
                   help="summarize the loops already stored with these settings, run none (missing ones are said)")
    p.add_argument("--one", nargs=2, metavar=("CASE", "SEED"), help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.passthrough = ["--days", str(args.days), "--rct-days", str(args.rct_days), "--change-day", str(args.change_day),
                        "--users", str(args.users), "--share", str(args.share), "--budget", str(args.budget),
                        "--models", *args.models, *(["--react", *args.react] if args.react else [])]
    if args.one:
        result = one_loop(args.one[0], int(args.one[1]), args)
        Path(args.out).write_text(json.dumps(plain(result)))
        return
    rec = Recorder("monitoring")
    store = Path(os.environ.get("PROMO_BENCH_RESULTS") or RESULTS) / "monitoring-loops"
    store.mkdir(parents=True, exist_ok=True)
    jobs = [(c, s) for s in args.seeds for c in args.cases]
    if args.summary_only:  # the stored loops of these settings only (a loop not run yet is left out, and said)
        loops = []
        for case, seed in jobs:
            path = store / f"{case}-{seed}.json"
            done = json.loads(path.read_text()) if path.exists() else None
            if done is None or done.get("settings") != settings_key(args, case):
                print(f"{case} seed {seed}: not run with these settings, left out", flush=True)
                continue
            loops.append(done)
    else:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            loops = list(pool.map(lambda cs: run_loop(cs[0], cs[1], args, store), jobs))
    summary = summarize(loops, args)
    print(json.dumps(plain(summary), indent=1))
    rec.write({"settings": {**settings_key(args), "react": dict(react_settings(args))}, "summary": summary, "loops": loops}, headline={
        c: {k: v for k, v in s.items() if k in ("coverage", "loops_ever_excluding_truth", "days_until_flagged",
                                                 "false_alarm_days", "pct_oracle_after_change")}
        for c, s in summary.items() if isinstance(s, dict)}, tag=args.tag)


if __name__ == "__main__":
    main()

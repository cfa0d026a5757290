"""The champion chosen without ground truth, against the truth: demo, dipn_synthetic_2, e2e_synthetic,
uplift_two_arm and dfcl_discount, several seeds each, through the production path.

Each (preset, seed) is simulated into a temporary landing folder and run with `promo run` (the CLI,
default models, in a temporary warehouse / artefact store / outbox / DAGSTER_HOME; the `champion`
asset runs in it). From the warehouse it reads, as % of the oracle at matched true spend on the
holdout users, mean over the campaign's budgets:

  (a) the champion (table champion: chosen without the truth; the truth only scores it),
  (b) the best candidate in truth (table champion_evidence: every model, the stacked blend and the
      equal blend of all models that the champion asset evaluated), and the best single model,
  (c) lgbm_s_mono (lgbm_s where lgbm_s_mono does not apply),
  (d) the old rule: at each budget the model with the highest DR Q (policy_evaluation.dr_q_value),
and the regret b - a. Prints one line per campaign, a table per preset and the means, then one JSON
object; writes it to benchmarks/results/. Tune on seeds 100-114, report on 0-4.

    .venv/bin/python benchmarks/champion.py [--seeds 0 1 2 3 4] [--presets ...] [--max-epochs N]
        [--rows FILE]   (summarize rows saved by an earlier run: benchmarks/results/champion_rows-*.parquet)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _pipeline_bench import evaluate_campaign  # noqa: E402
from _results import Recorder  # noqa: E402

PRESETS = ("demo", "dipn_synthetic_2", "e2e_synthetic", "uplift_two_arm", "dfcl_discount")
SIZES = {"demo": (8, 5000), "dipn_synthetic_2": (8, 10000), "e2e_synthetic": (8, 2500),
         "uplift_two_arm": (8, 5000), "dfcl_discount": (8, 5000)}  # (days, users): holdout days of 2,500-5,000 events


def campaign_row(preset: str, seed: int, max_epochs: int | None) -> dict:
    """One campaign through `promo run`, and what its warehouse says (module docstring)."""
    from promo_assets.store.warehouse import connect, sql

    days, users = SIZES.get(preset, (8, 5000))
    keep = Path(tempfile.mkdtemp(prefix="champion-bench-"))
    t0 = time.perf_counter()
    try:
        rows, info = evaluate_campaign(preset, seed, days=days, users=users, max_epochs=max_epochs, keep=keep)
        folder = next(keep.iterdir())
        campaign = info["campaign"]
        with connect(folder / "warehouse.duckdb", read_only=True) as con:
            champ = con.execute(sql("decisions", "latest_champion"), [campaign, ""]).df()
            evidence = (con.execute(sql("decisions", "champion_evidence_of_run"), [campaign, champ["run_id"].iloc[0]]).df()
                        if len(champ) else pd.DataFrame())
    finally:
        shutil.rmtree(keep, ignore_errors=True)
    out = {"preset": preset, "seed": seed, "campaign": info["campaign"], "run_exit_code": info.get("run_exit_code"),
           "run_seconds": info.get("run_seconds"), "wall_seconds": round(time.perf_counter() - t0, 1)}
    if champ.empty:
        return {**out, "error": "no champion: " + str(info.get("run_output_tail", ""))[-1500:]}
    c = champ.iloc[0]
    pooled = evidence[(evidence["evidence_kind"] == "candidate") & evidence["budget_per_capita"].isna()]
    pct = {r.champion_candidate: 100 * float(r.pct_oracle) for r in pooled.itertuples() if np.isfinite(r.pct_oracle)}
    models = rows[rows["model"] != "random"]
    per_model = models.groupby("model")["pct_oracle"].agg(lambda s: 100 * s.mean() if s.notna().all() else np.nan)
    base_name = "lgbm_s_mono" if "lgbm_s_mono" in per_model.index else "lgbm_s"
    old = [100 * g.sort_values("dr_q_value", ascending=False).iloc[0]["pct_oracle"]
           for _, g in models.groupby("budget_per_capita")]
    best_name = max(pct, key=pct.get)
    return {**out, "champion": c["champion"], "champion_pct": 100 * float(c["pct_oracle"]),
            "best_candidate": best_name, "best_pct": pct[best_name],
            "best_single": per_model.idxmax(), "best_single_pct": float(per_model.max()),
            "base": base_name, "base_pct": float(per_model[base_name]), "old_rule_pct": float(np.mean(old)),
            "candidates": pct, "models": per_model.round(3).to_dict(), "reason": c["champion_reason"]}


def summarize(rows: pd.DataFrame) -> dict:
    ok = rows[rows["champion_pct"].notna()].copy()
    ok["regret"] = ok["best_pct"] - ok["champion_pct"]
    ok["regret_vs_best_single"] = ok["best_single_pct"] - ok["champion_pct"]
    ok["vs_base"] = ok["champion_pct"] - ok["base_pct"]
    ok["old_regret"] = ok["best_pct"] - ok["old_rule_pct"]
    ok["old_vs_base"] = ok["old_rule_pct"] - ok["base_pct"]
    cols = ["champion_pct", "best_pct", "best_single_pct", "base_pct", "old_rule_pct", "regret",
            "regret_vs_best_single", "vs_base", "old_regret", "old_vs_base"]
    per = ok.groupby("preset")[cols].mean()
    return {"per_preset": per.round(3).reset_index().to_dict(orient="records"),
            "mean": ok[cols].mean().round(3).to_dict(),
            "presets_ahead_of_base": int((per["vs_base"] > 0).sum()),
            "campaigns_ahead_of_base": int((ok["vs_base"] > 0).sum()), "campaigns": int(len(ok)),
            "failed": rows[rows["champion_pct"].isna()][["preset", "seed"]].to_dict(orient="records")
            if "champion_pct" in rows else []}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--presets", nargs="+", default=list(PRESETS))
    ap.add_argument("--max-epochs", type=int, default=None, help="PROMO_MAX_EPOCHS (default: unset, as the demo)")
    ap.add_argument("--rows", type=Path, default=None,
                    help="summarize the campaigns of a result this script wrote (benchmarks/results/champion.json) instead of running")
    args = ap.parse_args()
    rec = Recorder("champion")
    if args.rows:
        rows = pd.DataFrame(json.loads(args.rows.read_text())["figures"]["campaigns"])
    else:
        out = []
        for seed in args.seeds:
            for preset in args.presets:
                r = campaign_row(preset, seed, args.max_epochs)
                out.append(r)
                if "error" in r:
                    print(f"{preset} seed {seed}: FAILED {r['error'][-300:]}", flush=True)
                    continue
                print(f"{preset} seed {seed}: champion {r['champion']} {r['champion_pct']:.2f}% | best {r['best_candidate']} "
                      f"{r['best_pct']:.2f}% | {r['base']} {r['base_pct']:.2f}% | old rule {r['old_rule_pct']:.2f}% | "
                      f"promo run {r['run_seconds']}s, load {os.getloadavg()[0]:.1f}", flush=True)
        rows = pd.DataFrame(out)
    summary = summarize(rows)
    print(pd.DataFrame(summary["per_preset"]).to_string(index=False))
    print("mean over campaigns:", json.dumps(summary["mean"]))
    print(f"ahead of lgbm_s_mono on {summary['presets_ahead_of_base']} of {len(summary['per_preset'])} presets, "
          f"{summary['campaigns_ahead_of_base']} of {summary['campaigns']} campaigns")
    result = {"seeds": args.seeds, "presets": args.presets, "sizes": {p: SIZES.get(p) for p in args.presets},
              "summary": summary, "campaigns": rows.to_dict(orient="records")}
    m = summary["mean"]
    path = rec.write(result, headline={"regret (points of the oracle)": m["regret"],
                                       "champion - lgbm_s_mono (points)": m["vs_base"],
                                       "old rule's regret (points)": m["old_regret"],
                                       "presets ahead of lgbm_s_mono": summary["presets_ahead_of_base"]})
    print(json.dumps({"written": str(path), **summary["mean"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Champion rules scored on the same campaigns without running them again: the evidence that
benchmarks/champion.py saved with --evidence (one .npz per campaign: the holdout events, the outcome
model's predictions, every candidate model's holdout coefficients and the truth of the holdout users).

For each campaign and each rule (a `ChampionSettings` guard and level, module
promo_assets.evaluation.champion) the first champion is chosen with `choose_champion` exactly as the
`champion` asset chooses it (no truth), then scored with the truth: % of the oracle at matched true
spend on the holdout users, mean over the campaign's budgets. The regret is the best candidate in
truth (the single models, the unguarded stacked blend and the equal blend of all models: the
candidates the asset evaluated before the guard, as benchmarks/champion.py counted them) minus the rule's
champion; lgbm_s_mono (lgbm_s where it does not apply) is the baseline. With --kinds, each rule is
also scored with the cross-fitted evidence saved beside the holdout's (user or day folds; every refitted
LightGBM model, every model with the torch ones (day or user folds, "xfit-day-all", "xfit-user-all"; on 2 user folds "xfit-user-all-2", and
"xfit-user-all-2e" with each torch refit trained for its full fit's epochs), or the S-learners only), and the rule nearest to the issue's targets is named
(`choose_rule`: the lowest max of mean regret / 0.12, worst regret / 0.6, worst preset mean / 0.25). With --rows (a
benchmarks/champion.py result of the same campaigns, run without the guard) the unguarded rule's champion is checked against
the one the pipeline chose, so the evidence is known to be the asset's. `choose_seconds`: the time of
`choose_champion` with each rule (the guard's own cost; the machine's load is recorded).

    .venv/bin/python benchmarks/champion_rules.py --evidence DIR --seeds 100 101 102 103 104 --tag tuning
        [--rows benchmarks/results/champion--seeds-100-104.json] [--rules R ...] [--reuse EARLIER.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import Recorder  # noqa: E402

from promo_assets.evaluation.champion import Candidate, ChampionSettings, Evidence, choose_champion  # noqa: E402
from promo_assets.evaluation.honest import pct_oracle_at_matched_spend  # noqa: E402
from promo_assets.evaluation.records import Truth  # noqa: E402

RULES = {  # name -> (guard, level)
    "stack (old)": ("none", 0.0),
    "shrink 0.25": ("shrink", 0.25),
    "shrink 0.5": ("shrink", 0.5),
    "shrink 0.75": ("shrink", 0.75),
    "members mean": ("members", 0.0),
    "members 1 se": ("members", 1.0),
    "drop_worse": ("drop_worse", 0.0),
    "single": ("single", 0.0),
    "bag": ("bag", 0.0),
    "equal 0.5": ("equal", 0.5),
}


# evidence -> (npz prefix of its cross-fitted part, the refitted models kept: None = every one saved)
KINDS = {"holdout": (None, None), "xfit-user": ("xu", None), "xfit-day": ("xd", None), "xfit-day-all": ("xa", None),
         "xfit-user-all": ("xua", None), "xfit-user-all-2": ("xua2", None), "xfit-user-all-2e": ("xua2e", None),
         "xfit-user-s": ("xu", ("lgbm_s", "lgbm_s_mono")), "xfit-day-s": ("xd", ("lgbm_s", "lgbm_s_mono"))}


def load(path: Path) -> tuple[Evidence, list[float], np.ndarray, np.ndarray]:
    z = np.load(path, allow_pickle=False)
    models = [str(m) for m in z["models"]]
    coefs = {m: (z[f"v:{m}"], z[f"c:{m}"]) for m in models}
    ev = Evidence(z["logged"], z["response"], z["cost"], z["propensity"], z["dm_values"], z["dm_costs"], coefs)
    return ev, [float(b) for b in z["budgets"]], z["true_values"], z["true_costs"]


def load_cross_fitted(path: Path, prefix: str, keep=None) -> Evidence | None:
    """The cross-fitted part `prefix` (benchmarks/champion.py XFIT) saved beside the evidence, with the
    refitted models `keep` only (None: all), or None."""
    z = np.load(path, allow_pickle=False)
    if f"{prefix}:models" not in z:
        return None
    models = [str(m) for m in z[f"{prefix}:models"] if keep is None or str(m) in keep]
    if not models:
        return None
    return Evidence(*(z[f"{prefix}:{k}"] for k in ("logged", "response", "cost", "propensity", "dm_values", "dm_costs")),
                    {m: (z[f"{prefix}:v:{m}"], z[f"{prefix}:c:{m}"]) for m in models})


def campaign_rows(path: Path, rules: list[str], kinds: list[str] = ("holdout",)) -> list[dict]:
    """One row per rule and evidence kind of one campaign (module docstring)."""
    preset, seed = path.stem.rsplit("-", 1)
    ev, budgets, tv, tc = load(path)
    parts = {k: None if KINDS[k][0] is None else load_cross_fitted(path, *KINDS[k]) for k in kinds}
    cache: dict[str, float] = {}

    def pct(cand: Candidate) -> float:
        if cand.name not in cache:
            cache[cand.name] = 100 * float(np.mean(pct_oracle_at_matched_spend(
                cand.coefficients(ev.coefficients), Truth(tv, tc), budgets, seed=0)))
        return cache[cand.name]

    t0 = time.perf_counter()
    old = choose_champion(ev, budgets, ChampionSettings(guard="none"))
    old_seconds = time.perf_counter() - t0
    best = max(pct(r.candidate) for r in old.results.values())
    base = "lgbm_s_mono" if "lgbm_s_mono" in ev.coefficients else "lgbm_s"
    out = []
    for kind, xfit in parts.items():
        if KINDS[kind][0] is not None and xfit is None:
            continue
        for rule in rules:
            guard, level = RULES[rule]
            settings = ChampionSettings(blends=guard != "single", guard="none" if guard == "single" else guard,
                                        guard_level=level)
            t0 = time.perf_counter()
            reuse = rule == "stack (old)" and xfit is None
            d = old if reuse else choose_champion(ev, budgets, settings, cross_fitted=xfit)
            seconds = old_seconds if reuse else time.perf_counter() - t0
            out.append({"preset": preset, "seed": int(seed), "rule": rule if xfit is None else f"{rule} [{kind}]",
                        "evidence": kind, "champion": d.champion.name,
                        "champion_pct": pct(d.champion), "best_pct": best, "regret": best - pct(d.champion),
                        "base_pct": pct(Candidate((base,))), "vs_base": pct(d.champion) - pct(Candidate((base,))),
                        "evidence_events": ev.n + (0 if xfit is None else xfit.n), "holdout_events": ev.n,
                        "choose_seconds": round(seconds, 3)})
    return out


TARGETS = {"mean_regret": 0.12, "worst_regret": 0.6, "worst_preset_mean_regret": 0.25}  # the targets


def choose_rule(rules: dict) -> tuple[str, dict]:
    """The rule nearest to meeting every target at once (fixed before any rule is scored): the lowest
    max over TARGETS of figure / target; ties by the mean regret. (name, each rule's score)."""
    score = {r: round(max(v[k] / t for k, t in TARGETS.items()), 4) for r, v in rules.items()}
    return min(rules, key=lambda r: (score[r], rules[r]["mean_regret"])), score


def headline(summary: dict) -> dict:
    """Each rule's mean and worst regret and its lead over lgbm_s_mono, from `summarize`."""
    return {r: {k: v[k] for k in ("mean_regret", "worst_regret", "vs_base")} for r, v in summary["rules"].items()}


def summarize(rows: pd.DataFrame) -> dict:
    per = rows.groupby(["rule", "preset"]).agg(mean_regret=("regret", "mean"), worst_regret=("regret", "max"),
                                               vs_base=("vs_base", "mean")).reset_index()
    rules = {}
    for rule, g in rows.groupby("rule"):
        p = per[per["rule"] == rule]
        rules[rule] = {"mean_regret": round(float(g["regret"].mean()), 3), "worst_regret": round(float(g["regret"].max()), 3),
                       "worst_preset_mean_regret": round(float(p["mean_regret"].max()), 3),
                       "campaigns_over_0.6": int((g["regret"] > 0.6).sum()),
                       "vs_base": round(float(g["vs_base"].mean()), 3),
                       "presets_ahead_of_base": int((p["vs_base"] > 0).sum()), "campaigns": int(len(g)),
                       "choose_seconds_mean": round(float(g["choose_seconds"].mean()), 3),
                       **({"evidence_events_mean": round(float(g["evidence_events"].mean()), 1),
                           "holdout_events_mean": round(float(g["holdout_events"].mean()), 1)}
                          if "holdout_events" in g else {})}
    return {"rules": rules, "per_preset": per.round(3).to_dict(orient="records")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--evidence", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--rows", type=Path, default=None, help="a benchmarks/champion.py result of the same campaigns")
    ap.add_argument("--reuse", type=Path, default=None,
                    help="an earlier result of this script: its rows are kept, only the missing (campaign, rule) are scored")
    ap.add_argument("--rules", nargs="+", default=list(RULES), choices=list(RULES), help="the rules to score [all]")
    ap.add_argument("--kinds", nargs="+", default=["holdout"], choices=list(KINDS),
                    help="the evidence each rule is scored on: the holdout, and the holdout with the cross-fitted events "
                         "by user or by day folds (saved by benchmarks/champion.py), every LightGBM model refitted, "
                         "(-all) every model refitted, the torch ones included, or (-s) the S-learners only [holdout]")
    args = ap.parse_args()
    rec = Recorder("champion_rules")
    files = sorted(p for p in args.evidence.glob("*.npz") if int(p.stem.rsplit("-", 1)[1]) in args.seeds)
    rules = ["stack (old)", *(r for r in args.rules if r != "stack (old)")]
    kept = [] if args.reuse is None else [r for r in json.loads(args.reuse.read_text())["figures"]["campaigns"]
                                          if r["seed"] in args.seeds and r["rule"] in rules]
    done = {(r["preset"], r["seed"], r["rule"]) for r in kept}

    def missing(p: Path) -> list[str]:
        preset, seed = p.stem.rsplit("-", 1)
        return [r for r in rules if (preset, int(seed), r) not in done]

    rows = pd.DataFrame(kept + [r for p in files if missing(p) for r in campaign_rows(p, missing(p), args.kinds)])
    check = None
    if args.rows:
        piped = {(r["preset"], r["seed"]): r for r in json.loads(args.rows.read_text())["figures"]["campaigns"]
                 if r.get("champion")}
        old = rows[rows["rule"] == "stack (old)"]
        same = [(r.preset, r.seed) for r in old.itertuples() if (r.preset, r.seed) in piped
                and piped[(r.preset, r.seed)]["champion"] == r.champion
                and abs(piped[(r.preset, r.seed)]["champion_pct"] - r.champion_pct) < 1e-6]
        check = {"campaigns_in_both": sum((r.preset, r.seed) in piped for r in old.itertuples()),
                 "same_champion_and_pct": len(same)}
    summary = summarize(rows)
    chosen, score = choose_rule(summary["rules"])
    print(pd.DataFrame(summary["rules"]).T.assign(score=pd.Series(score)).sort_values("score").to_string())
    print(f"nearest to the targets (max of figure / target over {TARGETS}): {chosen} (score {score[chosen]})")
    rec.write({"seeds": args.seeds, "evidence_dir": str(args.evidence), "rules": {r: RULES[r] for r in rules},
               "pipeline_check": check, "targets": TARGETS, "nearest_to_targets": chosen, "target_score": score,
               **summary, "campaigns": rows.to_dict(orient="records")}, tag=args.tag, headline=headline(summary))
    if check:
        print("pipeline check:", check)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

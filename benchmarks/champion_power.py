"""Does the evidence name the best model? For each campaign whose evidence benchmarks/champion.py saved
(--evidence DIR), the single model that is best in truth (% of the oracle at matched true spend on the
holdout users, mean over the budgets) is compared, without the truth, with the model each statistic
ranks first, on the holdout events and on the holdout with the cross-fitted training-day events
(prefixes --xfit, default 'xa' and 'xua': day or user folds, every model refitted, so that every model
has the same events):

  - the decision loss (promo_assets.evaluation.champion.LossTerms; lower is better),
  - the DR value at equal spend (evaluate_candidate; pooled over the budgets; higher is better),

each with the paired difference "truth-best minus the statistic's leader" and its interval at 90 %,
and the verdict: the statistic names the truth-best model; it prefers another one but cannot tell them
apart; or it prefers another one at 90 %. With the regret of the default champion rule
(choose_champion with the campaign's default settings and the LightGBM-only day-fold evidence 'xd',
as the `champion` asset chooses) beside it, and the time of each saved cross-fitted part's refits
('<prefix>_refit_seconds'). A campaign where every statistic prefers another model at
90 % on all the evidence is one where no rule built on these statistics can find the best model.

    .venv/bin/python benchmarks/champion_power.py --evidence DIR --seeds 100 ... 114 --tag T [--xfit xa xua]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import Recorder  # noqa: E402
from champion_rules import load, load_cross_fitted  # noqa: E402

from promo_assets.evaluation.champion import (  # noqa: E402
    Candidate,
    ChampionSettings,
    Evidence,
    choose_champion,
    decision_lambdas,
    evaluate_candidate,
    loss_terms,
    paired_difference,
)
from promo_assets.evaluation.honest import pct_oracle_at_matched_spend  # noqa: E402
from promo_assets.evaluation.records import Truth  # noqa: E402

CONFIDENCE = 0.9


def verdict(diff: float, low: float, high: float, lower_is_better: bool) -> str:
    """'names it' when the truth-best model is the leader (diff 0), else whether the preference for the
    leader is clear at CONFIDENCE."""
    if diff == 0.0:
        return "names it"
    wrong = low > 0 if lower_is_better else high < 0
    return "prefers another at 90%" if wrong else "cannot tell"


def statistics(ev: Evidence, models: list[str], budgets: list[float], best: str) -> dict:
    """The decision loss and the DR value of every model on `ev`: each statistic's leader and the paired
    difference of the truth-best model `best` against it."""
    lams = decision_lambdas(ev, models, budgets)
    terms = loss_terms(ev, models, lams[np.isfinite(lams)] if np.isfinite(lams).any() else np.asarray([0.0]))
    eye = np.eye(len(models))
    loss = {m: terms.loss(eye[i]) for i, m in enumerate(models)}
    phi = {m: evaluate_candidate(ev, Candidate((m,)), budgets, confidence=CONFIDENCE).phi for m in models}
    out = {}
    for name, per, lower in (("loss", loss, True), ("dr", phi, False)):
        means = {m: float(np.nanmean(v)) for m, v in per.items()}
        lead = (min if lower else max)(means, key=means.get)
        d, lo, hi = (0.0, 0.0, 0.0) if lead == best else paired_difference(per[best], per[lead], CONFIDENCE)
        out.update({f"{name}_leader": lead, f"{name}_diff": d, f"{name}_low": lo, f"{name}_high": hi,
                    f"{name}_verdict": verdict(d, lo, hi, lower)})
    return out


def campaign_rows(path: Path, prefixes: list[str]) -> list[dict]:
    preset, seed = path.stem.rsplit("-", 1)
    ev, budgets, tv, tc = load(path)
    models = list(ev.coefficients)
    truth = Truth(tv, tc)

    def pct(cand: Candidate) -> float:
        return 100 * float(np.mean(pct_oracle_at_matched_spend(cand.coefficients(ev.coefficients), truth, budgets,
                                                               seed=0)))

    single = {m: pct(Candidate((m,))) for m in models}
    if not all(np.isfinite(list(single.values()))):
        return []
    best = max(single, key=single.get)
    default = choose_champion(ev, budgets, ChampionSettings(), cross_fitted=load_cross_fitted(path, "xd"))
    regret = max(single[best], pct(default.proposal), pct(default.champion)) - pct(default.champion)
    z = np.load(path, allow_pickle=False)
    refits = {f"{k.split(':')[0]}_refit_seconds": float(z[k]) for k in z.files if k.endswith(":seconds")}
    base = {"preset": preset, "seed": int(seed), **refits, "truth_best": best, "truth_best_pct": single[best],
            "truth_gap_to_second": single[best] - sorted(single.values())[-2],
            "default_champion": default.champion.name, "default_regret": regret}
    rows = [{**base, "evidence": "holdout", "events": ev.n, **statistics(ev, models, budgets, best)}]
    for prefix in prefixes:
        xf = load_cross_fitted(path, prefix)
        if xf is not None and set(xf.coefficients) == set(models):
            wide = Evidence.concat([ev.only(models), xf.only(models)])
            rows.append({**base, "evidence": f"holdout + cross-fitted ({prefix})", "events": wide.n,
                         **statistics(wide, models, budgets, best)})
    return rows


def summarize(rows: pd.DataFrame) -> dict:
    out = {}
    for kind, g in rows.groupby("evidence"):
        out[kind] = {"campaigns": int(len(g)), "events_mean": round(float(g["events"].mean()), 1),
                     **{f"{c}_mean": round(float(g[c].mean()), 2) for c in g if c.endswith("_refit_seconds")},
                     **{f"{s}_{v}": int((g[f"{s}_verdict"] == v).sum())
                        for s in ("loss", "dr") for v in ("names it", "cannot tell", "prefers another at 90%")}}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--evidence", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--xfit", nargs="+", default=["xa", "xua"],
                    help="the cross-fitted parts used beside the holdout, each in turn [xa xua]")
    args = ap.parse_args()
    rec = Recorder("champion_power")
    files = sorted(p for p in args.evidence.glob("*.npz") if int(p.stem.rsplit("-", 1)[1]) in args.seeds)
    rows = pd.DataFrame([r for p in files for r in campaign_rows(p, args.xfit)])
    summary = summarize(rows)
    cols = ["preset", "seed", "evidence", "events", "truth_best", "truth_gap_to_second", "default_regret",
            "loss_leader", "loss_verdict", "dr_leader", "dr_verdict"]
    print(rows[cols].round(3).to_string(index=False))
    print(pd.DataFrame(summary).T.to_string())
    worst = rows[rows["default_regret"] > 0.6]
    rec.write({"seeds": args.seeds, "evidence_dir": str(args.evidence), "xfit": args.xfit, "confidence": CONFIDENCE,
               "summary": summary, "campaigns_with_default_regret_over_0.6": worst.to_dict(orient="records"),
               "campaigns": rows.to_dict(orient="records")}, tag=args.tag, headline=summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

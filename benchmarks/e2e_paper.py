"""Reproduce the end-to-end paper's synthetic figure Q(v_gt, c_gt) = 0.2123 (§4.4) and the oracle.

For each seed: simulate `e2e_synthetic` (10,000 RCT users, K = 4 uniform treatments, cost of
treatment j = j, one day), read the events and the truth, and compute
  - Q(v_gt, c_gt): the end-to-end paper's Algorithm 1 (bisection on the multiplier, EOM on the
    RCT users, empirical per-capita cost matched to the budget 2.0) with the true curves as the
    model; also its n-ary variant (8-ary);
  - the true value of that allocation (mean of v_gt at the assigned levels) and its true cost;
  - the oracle: the allocator (`promo_assets.allocation.solve`) on the true curves at per-capita
    budget 2.0, its true value and cost, and its EOM value on the RCT;
  - the random policy's true value at the same budget (reference).
Prints JSON (one object: per-seed rows and the means) and a readable table.

    .venv/bin/python benchmarks/e2e_paper.py [--seeds 10] [--users 10000] [--budget 2.0]

Issue #15 sections (each prints its own JSON object; `--section` picks, default `q`):
  fig2      Fig. 2 reproduction on `e2e_synthetic` without features (10,000 users, K = 4, budget 2.0):
            a re-generated monotone concave v (the generator, another seed), c = c_gt, 100 Adam steps
            (lr 0.005) ascending Q with each estimator (promo_assets.models.decision_loss: FD with
            `--fd-entries`, `--fd-h`; NES with `--nes-directions`, `--nes-sigma`); Q (the project's
            `q_at_budget`) at steps 0, 25, 50, 100 against Q(v_gt, c_gt); Fig. 2b: cosine similarity
            of the NES gradient to the full finite-difference gradient (F' = every entry) for
            N' in `--cosine-directions`; seconds per Q evaluation and per step.
  pipeline  decision quality and AUCC through the production path (`_pipeline_bench.evaluate_campaign`:
            `promo simulate` + `promo run`, PROMO_MAX_EPOCHS=`--max-epochs`) on `--presets`
            (default e2e_synthetic, dipn_synthetic_2, uplift_two_arm) with campaign.yaml
            `models.include` = s_learner, e2e_fd, e2e_nes and the LightGBM baselines: mean pct_oracle
            at matched true spend per model x preset x budget, per-seed wins of e2e over s_learner,
            AUCC per model on two-arm presets (the Table 1 analogue).
  library   the pipeline section's comparison on the library path (one S-learner per campaign shared
            as the e2e warm start, `solve` on the population, pct_oracle at matched true spend, AUCC
            on the holdout rows): what a loaded machine finishes for 5 seeds.
            `--models` replaces the models beside s_learner; `--oracle e2e_nes_oracle` (or
            e2e_fd_oracle, slow on many levels) adds the diagnostic fine-tuning with the TRUE value
            as Q in every step (the registered model otherwise unchanged).
  cost      seconds per training epoch of s_learner, e2e_fd, e2e_nes (equal hidden sizes: the e2e
            models are the S-learner's network) trained back to back on one campaign (library path),
            and the measured Q time per fine-tuning step.
  snr       does the RCT Q's gradient point where the true value rises? Per campaign (library sizes,
            `--first-seed`, `--seeds`), the warm start's predictions on the training rows, batches of
            `--snr-batches` rows (`--snr-repeats` draws), `--nes-directions` antithetic directions of
            scale `--nes-sigma`: the correlation over directions of Q(x + sigma d) - Q(x - sigma d) on
            the RCT rows with the same change of the true value of the batch's KKT allocation.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _model_frames import load_events  # noqa: E402  (the pipeline's landing reader)
from _results import Recorder  # noqa: E402

from promo_assets.evaluation import (  # noqa: E402
    LoggedEvents,
    eom,
    levels_at_lambdas,
    oracle_policy,
    q_at_budget,
    random_policy,
    true_policy_value,
)
from promo_assets.simulation import REFERENCE_START, SimulationRequest, simulate, truth_arrays  # noqa: E402

PAPER_Q = 0.2123
PAPER_ORACLE_APPROX = 0.216


def run_seed(seed: int, users: int, budget: float, landing: Path) -> dict:
    campaign = f"e2e_seed{seed}"
    simulate("e2e_synthetic", SimulationRequest(campaign, landing, days=1, users=users, seed=seed,
                                                start=REFERENCE_START))
    cdir = landing / campaign
    events, cfg, _, _ = load_events(cdir)
    logged = events["level"].to_numpy(dtype=np.int64)
    response = events["response"].to_numpy(dtype=float)
    cost = events["cost"].to_numpy(dtype=float)
    propensity = None if events["propensity"].isna().all() else events["propensity"].to_numpy(dtype=float)
    v_gt, c_gt = truth_arrays(cdir, events["user_id"].to_numpy())
    n = len(events)

    t0 = time.perf_counter()
    events = LoggedEvents(logged, response, cost, propensity)
    q = q_at_budget((v_gt, c_gt), events, budget)
    t_bisect = time.perf_counter() - t0
    t0 = time.perf_counter()
    q8 = q_at_budget((v_gt, c_gt), events, budget, arity=8)
    t_nary = time.perf_counter() - t0
    q_levels = levels_at_lambdas(v_gt, c_gt, [q.lambda_])[0]
    q_true_value, q_true_cost = true_policy_value(q_levels, v_gt, c_gt)

    oracle = oracle_policy(v_gt, c_gt, budget, seed=seed)
    oracle_value, oracle_cost = true_policy_value(oracle, v_gt, c_gt)
    oracle_eom_value, oracle_eom_cost = eom(oracle, logged, response, cost, propensity)
    rnd = random_policy(n, cfg.n_levels, c_gt, budget, seed=seed)
    random_value, random_cost = true_policy_value(rnd, v_gt, c_gt)
    return {
        "seed": seed, "users": n, "cost_rule": cfg.cost,
        "logged_level_shares": np.round(np.bincount(logged, minlength=cfg.n_levels) / n, 4).tolist(),
        "q_value": q.value, "q_eom_cost": q.cost, "q_lambda": q.lambda_, "q_iterations": q.n_iter,
        "q_converged": q.converged, "q_matched": q.n_matched,
        "q8_value": q8.value, "q8_eom_cost": q8.cost, "q8_iterations": q8.n_iter,
        "q_true_value": q_true_value, "q_true_cost": q_true_cost,
        "oracle_true_value": oracle_value, "oracle_true_cost": oracle_cost,
        "oracle_eom_value": oracle_eom_value, "oracle_eom_cost": oracle_eom_cost,
        "random_true_value": random_value, "random_true_cost": random_cost,
        "seconds_bisection": t_bisect, "seconds_8ary": t_nary,
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--section", choices=["q", "fig2", "pipeline", "library", "cost", "snr"], default="q")
    ap.add_argument("--seeds", type=int, default=None, help="seeds 0..n-1 (q: 10, others: 5)")
    ap.add_argument("--users", type=int, default=None)
    ap.add_argument("--days", type=int, default=None)
    ap.add_argument("--budget", type=float, default=2.0)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.005)
    ap.add_argument("--fd-entries", type=int, default=4000)
    ap.add_argument("--fd-h", type=float, default=0.02,
                    help="FD step of fig2 (Q is piecewise constant in v: h = 0.001 flips almost no decision)")
    ap.add_argument("--nes-directions", type=int, default=32)
    ap.add_argument("--max-iter", type=int, default=30, help="bisection iterations of the estimators' Q")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--nes-sigma", type=float, default=0.001)
    ap.add_argument("--cosine-directions", type=int, nargs="+", default=[8, 32, 128, 512, 2048])
    ap.add_argument("--presets", nargs="+", default=["e2e_synthetic", "dipn_synthetic_2", "uplift_two_arm"])
    ap.add_argument("--max-epochs", type=int, default=None,
                    help="cap on every model's epochs (library / cost: none, each model's own defaults; pipeline: 5)")
    ap.add_argument("--params", default="{}", help="JSON models.params block for the pipeline section")
    ap.add_argument("--preset", default="uplift_two_arm", help="cost section's campaign")
    ap.add_argument("--snr-batches", type=int, nargs="+", default=[256, 1024, 100_000],
                    help="snr section: batch sizes (rows; capped at the training rows)")
    ap.add_argument("--models", nargs="+", default=None,
                    help="library section: the models beside s_learner (default: e2e_fd e2e_nes and the LightGBM "
                         "baselines)")
    ap.add_argument("--oracle", nargs="*", default=[], choices=["e2e_fd_oracle", "e2e_nes_oracle"],
                    help="library section: add these diagnostics (the fine-tuning with the true value as Q)")
    ap.add_argument("--snr-repeats", type=int, default=4, help="snr section: batches per size (disjoint draws)")
    args = ap.parse_args(argv)
    rec = Recorder("e2e_paper", argv)
    if args.section != "q":
        from _e2e_sections import run_section

        result = run_section(args)
        rec.write(result, tag=args.section)
        return result
    args.seeds = 10 if args.seeds is None else args.seeds
    args.users = 10_000 if args.users is None else args.users

    with tempfile.TemporaryDirectory(prefix="e2e_paper_") as tmp:
        rows = [run_seed(s, args.users, args.budget, Path(tmp)) for s in range(args.seeds)]
    df = pd.DataFrame(rows)
    numeric = [c for c in df.columns if df[c].dtype.kind in "fi" and c not in ("seed", "users")]
    mean = {c: float(df[c].mean()) for c in numeric}
    sd = {c: float(df[c].std(ddof=1)) if len(df) > 1 else float("nan") for c in numeric}
    q_mean = mean["q_value"]
    result = {
        "benchmark": "e2e_paper", "preset": "e2e_synthetic", "users": args.users, "seeds": args.seeds,
        "budget_per_capita": args.budget,
        "paper_q": PAPER_Q, "q_mean": q_mean, "q_sd": sd["q_value"],
        "q_se": sd["q_value"] / np.sqrt(len(df)), "q_within_0.01_of_paper": abs(q_mean - PAPER_Q) <= 0.01,
        "q8_mean": mean["q8_value"], "q_true_value_mean": mean["q_true_value"],
        "oracle_true_value_mean": mean["oracle_true_value"], "oracle_true_value_sd": sd["oracle_true_value"],
        "oracle_true_cost_mean": mean["oracle_true_cost"], "oracle_eom_value_mean": mean["oracle_eom_value"],
        "random_true_value_mean": mean["random_true_value"],
        "per_seed": rows,
    }
    print(json.dumps(result, indent=2, default=float))
    rec.write(result, headline={"Q(v_gt, c_gt), mean over seeds": round(q_mean, 4), "the paper's Q": PAPER_Q,
                               "oracle true value, mean": round(mean["oracle_true_value"], 4)})

    print("\nend-to-end paper, synthetic K=4 (10 seeds unless told):", file=sys.stderr)
    table = df[["seed", "q_value", "q8_value", "q_eom_cost", "q_true_value", "oracle_true_value",
                "oracle_true_cost", "oracle_eom_value", "random_true_value"]]
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"), file=sys.stderr)
    print(f"\n  Q(v_gt, c_gt)  mean {q_mean:.4f} (sd {sd['q_value']:.4f}, se {result['q_se']:.4f});"
          f" paper {PAPER_Q} -> {'within' if result['q_within_0.01_of_paper'] else 'OUTSIDE'} ±0.01", file=sys.stderr)
    print(f"  8-ary Q        mean {mean['q8_value']:.4f}", file=sys.stderr)
    print(f"  oracle true    mean {mean['oracle_true_value']:.4f} at true cost {mean['oracle_true_cost']:.4f}"
          f" (paper ≈ {PAPER_ORACLE_APPROX})", file=sys.stderr)
    print(f"  random true    mean {mean['random_true_value']:.4f}", file=sys.stderr)
    return result


if __name__ == "__main__":
    main()

"""The end-to-end models against the S-learner on `e2e_synthetic`, before and after a change.

For each seed and each checkout (this one, and with --before another one, e.g. a `git worktree add
/tmp/before <commit>` of the code before the estimator redesign): `promo simulate --preset
e2e_synthetic` (--days 7 x --users 6,000 by default: a holdout day of 6,000 events) with campaign.yaml's
`models.include: [s_learner, e2e_fd, e2e_nes]`, then `promo run` with that checkout's code
(`_pipeline_bench.evaluate_campaign`, `_checkout.cli_command`; no PROMO_MAX_EPOCHS unless
--max-epochs). Prints, per checkout and seed, each model's % of the oracle at matched true spend at
the three budgets and the e2e models' gap to s_learner in points; then whether the two checkouts
gave the same figures. Writes benchmarks/results/e2e_regression.json (--tag: e2e_regression--TAG.json).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/e2e_regression.py --before /tmp/before [--seeds 0 4]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pipeline_bench import evaluate_campaign  # noqa: E402
from _results import Recorder  # noqa: E402

MODELS = ("s_learner", "e2e_fd", "e2e_nes")


def commit_of(code: Path) -> str | None:
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=code, capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def measure(code: Path | None, seeds, days: int, users: int, max_epochs: int | None) -> dict:
    """{seed: {model: [% of the oracle per budget]}} and the runs' info for one checkout."""
    figures, runs = {}, []
    for seed in seeds:
        rows, info = evaluate_campaign("e2e_synthetic", seed, days=days, users=users, max_epochs=max_epochs,
                                       models={"include": list(MODELS)}, code=code)
        info.pop("models_block", None)
        runs.append(info)
        if info["run_exit_code"] != 0:
            print(f"seed {seed}: promo run failed (exit {info['run_exit_code']}): {info.get('run_output_tail', '')}",
                  file=sys.stderr)
            continue
        rows = rows.sort_values("budget_per_capita")
        figures[seed] = {m: [round(100 * float(p), 3) for p in rows[rows["model"] == m]["pct_oracle"]] for m in MODELS}
        budgets = sorted(float(b) for b in rows["budget_per_capita"].unique())
        print(f"{'before' if code else 'after'} seed {seed} (budgets {budgets}, {info['run_seconds']} s):", flush=True)
        for m in MODELS:
            gap = [round(p - s, 2) for p, s in zip(figures[seed][m], figures[seed]["s_learner"])]
            print(f"  {m:10s} " + " / ".join(f"{p:.2f}" for p in figures[seed][m])
                  + ("" if m == "s_learner" else f"   vs s_learner {gap} points"), flush=True)
    return {"pct_oracle": figures, "runs": runs}


def gaps(pct: dict) -> dict:
    """{seed: {e2e model: [points behind (-) or ahead (+) of s_learner per budget]}}."""
    return {seed: {m: [round(p - s, 3) for p, s in zip(by[m], by["s_learner"])] for m in MODELS[1:]}
            for seed, by in pct.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, default=None, help="another checkout to compare with (its root folder)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--users", type=int, default=6000)
    ap.add_argument("--max-epochs", type=int, default=None, help="PROMO_MAX_EPOCHS for promo run (default: unset)")
    ap.add_argument("--tag", default=None, help="write benchmarks/results/e2e_regression--TAG.json instead")
    args = ap.parse_args()
    rec = Recorder("e2e_regression")
    out = {"preset": "e2e_synthetic", "days": args.days, "users": args.users, "seeds": args.seeds,
           "max_epochs": args.max_epochs, "models_include": list(MODELS)}
    after = measure(None, args.seeds, args.days, args.users, args.max_epochs)
    out["after"] = {**after, "gaps_points": gaps(after["pct_oracle"])}
    headline = {}
    if args.before is not None:
        before = measure(args.before.resolve(), args.seeds, args.days, args.users, args.max_epochs)
        out["before"] = {**before, "gaps_points": gaps(before["pct_oracle"]), "git_commit": commit_of(args.before)}
        same = {str(s): before["pct_oracle"].get(s) == after["pct_oracle"].get(s) for s in args.seeds}
        out["same_figures_before_and_after"] = same
        print(f"same figures before ({out['before']['git_commit']}) and after, per seed: {same}")
        headline["same figures before and after (seeds)"] = f"{sum(same.values())} of {len(same)}"
    for seed, by in out["after"]["gaps_points"].items():
        for m, g in by.items():
            headline[f"seed {seed}: {m} - s_learner, points (after)"] = " / ".join(f"{x:+.2f}" for x in g)
    rec.write(out, headline=headline, tag=args.tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())

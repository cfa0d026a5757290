"""Why the end-to-end models trail s_learner on `e2e_synthetic`: each fine-tuning epoch's validation
objective against its holdout % of the oracle.

For each seed: `e2e_synthetic` (--days 7 x --users 6,000 from the same start day as
benchmarks/e2e_regression.py, so the same events), the
training frame as the pipeline builds it (ingestion.frames.load_landing, causal.build_training_frame),
then `e2e_fd` and `e2e_nes` with their defaults (the warm-start S-learner is trained once and shared,
as in one `promo run` process). At every epoch the fine-tuning's monitor measures (epoch 0: the warm
start, which is the `s_learner` model on this campaign) this script records the validation objective
the model selects on (L_R = S-learner loss - gamma x mean Q over the three budgets), the validation Q
alone, and the holdout users' % of the oracle at matched true spend at the campaign's three budgets
(`evaluation.pct_oracle_at_matched_spend`, the quality floors' measure). It prints the epoch each rule
selects: the model's own (lowest L_R, epoch 0 included), "Q only" (the warm start unless an epoch
raises the validation Q) and the model's own kept only when its validation Q gain over the warm start
exceeds twice its bootstrap standard error (--draws resamples of the validation rows, paired). Torch
on one thread. Writes benchmarks/results/e2e_selection.json (--tag: e2e_selection--TAG.json).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/e2e_selection.py [--seeds 0 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _pipeline_bench import START  # noqa: E402
from _results import Recorder  # noqa: E402

from promo_assets.causal import build_training_frame  # noqa: E402
from promo_assets.evaluation import pct_oracle_at_matched_spend  # noqa: E402
from promo_assets.ingestion.frames import load_landing  # noqa: E402
from promo_assets.models import TrainingData, decision_loss, e2e, registry  # noqa: E402
from promo_assets.models.training import Metric  # noqa: E402
from promo_assets.simulation import SimulationRequest, simulate, truth_arrays  # noqa: E402

MODELS = ("e2e_fd", "e2e_nes")


class Recording:
    """Wraps e2e's training loop: at each monitor call, the monitored value, the validation Q at the
    three budgets (what `decision_loss.q_at_budgets` returned inside the monitor) and the parameters."""

    def __init__(self):
        self.epochs: list[dict] = []
        self._in_monitor = False
        self._q = None
        self._fit, self._qfn = e2e.fit_torch_model, decision_loss.q_at_budgets

    def __enter__(self):
        def q_at_budgets(*args, **kwargs):
            out = self._qfn(*args, **kwargs)
            if self._in_monitor:
                self._q = [float(x) for x in torch.nan_to_num(out)]
                self._q_args = (args, kwargs)
            return out

        def fit_torch_model(module, loss, batches, monitor, config=None, **kwargs):
            fn = monitor.fn

            def recorded(m):
                self._in_monitor = True
                try:
                    value = fn(m)
                finally:
                    self._in_monitor = False
                self.epochs.append({"objective": float(value), "validation_q": self._q, "q_args": self._q_args,
                                    "state": {k: v.detach().clone() for k, v in m.state_dict().items()}})
                return value

            return self._fit(module, loss, batches, Metric(recorded), config, **kwargs)

        e2e.fit_torch_model, decision_loss.q_at_budgets = fit_torch_model, q_at_budgets
        return self

    def __exit__(self, *exc):
        e2e.fit_torch_model, decision_loss.q_at_budgets = self._fit, self._qfn


def campaign(root: Path, seed: int, days: int, users: int):
    name = f"e2e-synthetic-{seed}"
    simulate("e2e_synthetic", SimulationRequest(name, root, days=days, users=users, seed=seed, start=START))
    loaded = load_landing(root, name, edges=False, merchants=False)
    frame = build_training_frame(loaded.events, loaded.config, loaded.numeric, loaded.categorical)
    data = TrainingData(loaded.config, frame, list(loaded.numeric), list(loaded.categorical),
                        frame_version=f"e2e_selection:{name}", campaign_dir=root / name)
    holdout = frame[frame["split"] == "holdout"]
    tv, tc = truth_arrays(root / name, holdout["user_id"].astype(str).to_numpy())
    return data, holdout, tv, tc


def bootstrap_gain(epochs: list[dict], i: int, draws: int, seed: int) -> tuple[float, float]:
    """The validation Q gain of epoch `i` over epoch 0 (mean over the three budgets) and its
    bootstrap standard error: the validation rows resampled with replacement `draws` times, both
    epochs' Q recomputed on each resample (paired)."""
    (v0, c0, batch, budgets), kw0 = epochs[0]["q_args"][0][:4], epochs[0]["q_args"][1]
    (v1, c1), kw1 = epochs[i]["q_args"][0][:2], epochs[i]["q_args"][1]
    qfn = decision_loss.q_at_budgets
    gain = float(np.mean(epochs[i]["validation_q"]) - np.mean(epochs[0]["validation_q"]))
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(draws):
        idx = torch.as_tensor(rng.integers(0, batch.n, batch.n))
        b = decision_loss.RCTBatch(batch.logged[idx], batch.response[idx], batch.cost[idx], batch.ipw[idx])
        q1 = torch.nan_to_num(qfn(v1[idx], c1[idx], b, budgets, **kw1)).mean()
        q0 = torch.nan_to_num(qfn(v0[idx], c0[idx], b, budgets, **kw0)).mean()
        diffs.append(float(q1 - q0))
    return gain, float(np.std(diffs, ddof=1))


def selections(epochs: list[dict], draws: int) -> tuple[dict, dict]:
    lr = int(np.argmin([e["objective"] for e in epochs]))  # first lowest, as fit_torch_model keeps it
    q = [float(np.mean(e["validation_q"])) for e in epochs]
    best_q = int(np.argmax(q))
    out = {"lowest_objective": lr, "q_only": best_q if q[best_q] > q[0] else 0}
    info = {}
    if lr > 0:
        gain, se = bootstrap_gain(epochs, lr, draws, seed=lr)
        info = {"validation_q_gain": gain, "bootstrap_se": se}
        out["lowest_objective_if_q_gain_over_2_se"] = lr if gain > 2 * se else 0
    else:
        out["lowest_objective_if_q_gain_over_2_se"] = 0
    return out, info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 4])
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--users", type=int, default=6000)
    ap.add_argument("--tag", default=None, help="results file e2e_selection--TAG.json")
    ap.add_argument("--draws", type=int, default=200, help="bootstrap resamples of the validation rows")
    args = ap.parse_args()
    rec = Recorder("e2e_selection")
    torch.set_num_threads(1)
    out, headline = {"preset": "e2e_synthetic", "days": args.days, "users": args.users, "seeds": args.seeds}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            data, holdout, tv, tc = campaign(Path(tmp), seed, args.days, args.users)
            budgets = data.config.budget_per_capita
            out[seed] = {}
            for name in MODELS:
                with Recording() as r:
                    model = registry.create(name).fit(data)
                fitted = model.model_
                kept = {k: v.clone() for k, v in fitted.module.state_dict().items()}
                rows = []
                for i, e in enumerate(r.epochs):
                    fitted.module.load_state_dict(e["state"])
                    response, cost = fitted.predict(holdout)
                    pct = [round(100 * p, 3) for p in pct_oracle_at_matched_spend(response, cost, tv, tc, budgets)]
                    rows.append({"epoch": i, "objective": e["objective"], "validation_q": e["validation_q"],
                                 "holdout_pct_oracle": pct})
                    print(f"seed {seed} {name} epoch {i}: objective {e['objective']:.6f} validation Q "
                          f"{np.mean(e['validation_q']):.6f} holdout % oracle {pct}", flush=True)
                fitted.module.load_state_dict(kept)
                chosen, gain = selections(r.epochs, args.draws)
                if gain:
                    print(f"seed {seed} {name}: epoch {chosen['lowest_objective']} validation Q gain "
                          f"{gain['validation_q_gain']:.5f}, bootstrap SE {gain['bootstrap_se']:.5f}", flush=True)
                warm = rows[0]["holdout_pct_oracle"]
                out[seed][name] = {"epochs": rows, "selected": chosen, "budgets": list(budgets), **gain}
                for rule, i in chosen.items():
                    gap = [round(a - b, 2) for a, b in zip(rows[i]["holdout_pct_oracle"], warm)]
                    print(f"seed {seed} {name}: {rule} selects epoch {i}: {rows[i]['holdout_pct_oracle']} "
                          f"({gap} points vs the warm start = s_learner)", flush=True)
                    headline[f"seed {seed} {name} {rule}: epoch, points vs s_learner"] = (
                        f"{i}: " + " / ".join(f"{g:+.2f}" for g in gap))
    rec.write(out, headline=headline, tag=args.tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())

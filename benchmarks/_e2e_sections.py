"""The issue #15 sections of benchmarks/e2e_paper.py (fig2, pipeline, cost); see that file's docstring."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _model_frames import load_events, load_training_frame, train_model  # noqa: E402

from promo_assets.evaluation import LoggedEvents, q_at_budget  # noqa: E402
from promo_assets.models import decision_loss as dl  # noqa: E402
from promo_assets.simulation import REFERENCE_START, SimulationRequest, simulate, truth_arrays  # noqa: E402
from promo_assets.simulation.e2e import e2e_values  # noqa: E402

E2E = ("e2e_fd", "e2e_nes")


def _load(seed: int, users: int, landing: Path):
    simulate("e2e_synthetic", SimulationRequest(f"fig2-{seed}", landing, days=1, users=users, seed=seed,
                                                start=REFERENCE_START),
             features="none")
    cdir = landing / f"fig2-{seed}"
    events, cfg, _, _ = load_events(cdir)
    t = events["level"].to_numpy(np.int64)
    y = events["response"].to_numpy(float)
    z = events["cost"].to_numpy(float)
    p = events["propensity"].to_numpy(float)
    v_gt, c_gt = truth_arrays(cdir, events["user_id"].to_numpy())
    return t, y, z, p, v_gt, c_gt


def fig2(args) -> dict:
    seeds = range(args.first_seed, args.first_seed + (5 if args.seeds is None else args.seeds))
    users = args.users or 10_000
    rows, cosine_rows = [], []
    with tempfile.TemporaryDirectory(prefix="e2e_fig2_") as tmp:
        for seed in seeds:
            t_seed = time.perf_counter()
            t, y, z, p, v_gt, c_gt = _load(seed, users, Path(tmp))
            batch = dl.RCTBatch.from_arrays(t, y, z, p)
            q_of = lambda v: q_at_budget((v, c_gt), LoggedEvents(t, y, z, p), args.budget).value  # noqa: E731
            v0, _ = e2e_values(np.random.default_rng([seed, 2015]).uniform(size=v_gt.shape))  # re-generated start
            row = {"seed": seed, "q_gt": q_of(v_gt)}
            c = torch.tensor(c_gt)
            for est in ("fd", "nes"):
                v = torch.nn.Parameter(torch.tensor(v0))
                opt = torch.optim.Adam([v], lr=args.lr)
                gen = torch.Generator().manual_seed(seed)
                qs, secs = {0: q_of(v0)}, []
                for step in range(1, args.steps + 1):
                    t0 = time.perf_counter()
                    if est == "fd":
                        g, _ = dl.fd_gradient(v.detach(), c, batch, args.budget,
                                              dl.FiniteDifferences(args.fd_entries, args.fd_h), gen, wrt_costs=False,
                                              search=dl.Bisection(max_iter=args.max_iter))
                    else:
                        g, _ = dl.nes_gradient(v.detach(), c, batch, args.budget,
                                               dl.NES(args.nes_directions, args.nes_sigma), gen, wrt_costs=False,
                                               search=dl.Bisection(max_iter=args.max_iter))
                    secs.append(time.perf_counter() - t0)
                    opt.zero_grad()
                    v.grad = -g  # ascend Q
                    opt.step()
                    if step in (25, 50, 100) or step == args.steps:
                        qs[step] = q_of(v.detach().numpy())
                row.update({f"{est}_q{k}": q for k, q in qs.items()})
                row[f"{est}_seconds_per_step"] = float(np.mean(secs))
                print(f"  seed {seed} {est}: " + ", ".join(f"step {k} Q {q:.4f}" for k, q in qs.items())
                      + f" (Q_gt {row['q_gt']:.4f}; {row[f'{est}_seconds_per_step']:.2f}s/step)", file=sys.stderr)
            rows.append(row)
            # Fig. 2b on every seed: NES vs the full FD gradient at the start
            v, lam = torch.tensor(v0), dl.q_lambda_max(torch.tensor(v0), c)
            t0 = time.perf_counter()
            full, _ = dl.fd_gradient(v, c, batch, args.budget, dl.FiniteDifferences(v.numel(), args.fd_h),
                                     torch.Generator().manual_seed(0), wrt_costs=False,
                                     search=dl.Bisection(lam, max_iter=args.max_iter))
            fd_secs = time.perf_counter() - t0
            for n_dir in args.cosine_directions:
                t0 = time.perf_counter()
                g, _ = dl.nes_gradient(v, c, batch, args.budget, dl.NES(n_dir, args.fd_h),
                                       torch.Generator().manual_seed(n_dir), wrt_costs=False,
                                       search=dl.Bisection(lam, max_iter=args.max_iter))
                cos = float(torch.nn.functional.cosine_similarity(g.flatten(), full.flatten(), dim=0))
                cosine_rows.append({"seed": seed, "directions": n_dir, "cosine": cos,
                                    "seconds": time.perf_counter() - t0})
                print(f"  seed {seed} NES N'={n_dir}: cosine to full FD {cos:.4f}", file=sys.stderr)
            row.update({"full_fd_seconds": fd_secs, "full_fd_nonzero": int((full != 0).sum()),
                        "seed_seconds": time.perf_counter() - t_seed})
    df = pd.DataFrame(rows)
    means = {c: float(df[c].mean()) for c in df.columns if c != "seed"}
    cos = pd.DataFrame(cosine_rows)
    cosine_mean = cos.groupby("directions")["cosine"].agg(["mean", "std"]).reset_index().to_dict("records")
    checks = {}
    for est in ("fd", "nes"):
        steps = [k for k in (0, 25, 50, 100, args.steps) if f"{est}_q{k}" in df]
        q = df[[f"{est}_q{k}" for k in dict.fromkeys(steps)]].to_numpy()
        checks[est] = {"seeds_ending_above_q_gt": int((q[:, -1] > df["q_gt"].to_numpy()).sum()),
                       "seeds_rising_at_every_checkpoint": int((np.diff(q, axis=1) > 0).all(axis=1).sum()),
                       "seeds": len(df)}
    by_seed = cos.pivot(index="seed", columns="directions", values="cosine").to_numpy()
    checks["nes_cosine_rising_with_directions"] = {
        "seeds_monotone": int((np.diff(by_seed, axis=1) > 0).all(axis=1).sum()),
        "mean_monotone": bool(np.all(np.diff([r["mean"] for r in cosine_mean]) > 0)), "seeds": len(by_seed)}
    print("\nFig. 2 means over seeds: " + ", ".join(f"{k} {v:.4f}" for k, v in means.items()), file=sys.stderr)
    print("Fig. 2b cosine by N': " + ", ".join(f"{r['directions']}: {r['mean']:.4f} (sd {r['std']:.4f})"
                                           for r in cosine_mean), file=sys.stderr)
    print("checks: " + json.dumps(checks), file=sys.stderr)
    return {"section": "fig2", "users": users, "budget": args.budget, "steps": args.steps, "lr": args.lr,
            "max_iter": args.max_iter, "fd": {"entries": args.fd_entries, "h": args.fd_h},
            "nes": {"directions": args.nes_directions, "sigma": args.nes_sigma},
            "fig2b": {"full_fd_h": args.fd_h, "nes_sigma": args.fd_h, "directions": args.cosine_directions},
            "paper": {"q_gt": 0.2123, "q_start": 0.1996, "q_end_nes": 0.2141},
            "means": means, "checks": checks, "fig2b_cosine_mean": cosine_mean, "per_seed": rows,
            "fig2b_cosine": cosine_rows}


def pipeline(args) -> dict:
    from _pipeline_bench import evaluate_campaign

    sizes = {"e2e_synthetic": (4, 2000), "dipn_synthetic_2": (4, 4000), "uplift_two_arm": (4, 4000)}
    seeds = range(5 if args.seeds is None else args.seeds)
    params = json.loads(args.params)
    frames, infos = [], []
    for preset in args.presets:
        days, users = sizes.get(preset, (4, 2500))
        include = ["s_learner", *E2E, "lgbm_s_mono"] + (["lgbm_s", "lgbm_t"] if preset == "uplift_two_arm" else [])
        for seed in seeds:
            rows, info = evaluate_campaign(preset, seed, days=args.days or days, users=args.users or users,
                                           max_epochs=5 if args.max_epochs is None else args.max_epochs,
                                           models={"include": include, **({"params": params} if params else {})})
            infos.append(info)
            frames.append(rows)
            print(f"  {preset} seed {seed}: promo run exit {info['run_exit_code']}, {info['run_seconds']}s, "
                  f"load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    rows = pd.concat(frames, ignore_index=True)
    rows = rows[rows["model"] != "random"]
    table = (rows.groupby(["preset", "model", "budget_per_capita"])
             .agg(pct_oracle=("pct_oracle", "mean"), spend_ratio=("spend_ratio", "mean"), seeds=("seed", "nunique"))
             .reset_index())
    by_seed = rows.groupby(["preset", "model", "seed"])["pct_oracle"].mean().unstack("model")
    wins = {}
    for preset in args.presets:
        if preset not in by_seed.index.get_level_values(0):
            continue
        part = by_seed.loc[preset]
        for m in [*E2E, "lgbm_s_mono"]:
            if m in part and "s_learner" in part:
                wins[f"{preset}:{m}"] = {"seeds_above_s_learner": int((part[m] > part["s_learner"]).sum()),
                                         "seeds": int(part[[m, "s_learner"]].dropna().shape[0]),
                                         "mean_diff_points": float(100 * (part[m] - part["s_learner"]).mean())}
    aucc = (rows[rows["aucc"].notna()].drop_duplicates(["preset", "model", "seed"])
            .groupby(["preset", "model"])["aucc"].agg(["mean", "std", "count"]).reset_index())
    mean_pct = rows.groupby(["preset", "model"])["pct_oracle"].mean().unstack("model")
    print("\nmean pct_oracle at matched true spend (all budgets):", file=sys.stderr)
    print(mean_pct.to_string(float_format=lambda x: f"{100 * x:.2f}%"), file=sys.stderr)
    print("\nAUCC (two-arm presets):", file=sys.stderr)
    print(aucc.to_string(index=False, float_format=lambda x: f"{x:.4f}"), file=sys.stderr)
    print("\nper-seed wins over s_learner:", json.dumps(wins, indent=1), file=sys.stderr)
    return {"section": "pipeline", "max_epochs": args.max_epochs, "params": params,
            "table": table.to_dict("records"), "mean_pct_oracle": mean_pct.reset_index().to_dict("records"),
            "wins_over_s_learner": wins, "aucc": aucc.to_dict("records"), "runs": infos}


ORACLE = ("e2e_fd_oracle", "e2e_nes_oracle")


def _fit_oracle(name: str, data, cfg, seed: int, max_epochs, campaign_dir: Path):
    """A diagnostic, not a model: `e2e_fd` / `e2e_nes` with the Q of every step replaced by the
    TRUE value of the batch users' KKT allocation at matched true cost (`_true_q`: the simulator's
    curves instead of the logged RCT outcomes), i.e. the fine-tuning with a noise-free marketing
    goal; everything else (warm start, hyper-parameters, epochs, the validation-Q epoch choice on
    the RCT rows) as the registered model. If this does not beat the S-learner either, the estimated
    Q's noise is not what holds the e2e models back. The truth travels with the training rows
    (extra tensors in the prepared frame's batches) and the gradient is the model's estimator (Eq. 8
    / 10 over the same entries / directions) applied to `_true_q`."""
    from promo_assets.models import e2e, registry

    real = registry.get(name.removesuffix("_oracle"))
    frame = data.frame
    truth_v, truth_c = truth_arrays(campaign_dir, frame["user_id"].astype(str).to_numpy())

    def prepare(frame_, *a, **kw):
        prep = e2e_prepare(frame_, *a, **kw)
        is_train = (frame_["split"].astype(str) == "train").to_numpy()
        if int(is_train.sum()) != int(prep.train["level"].shape[0]):
            raise RuntimeError("oracle: the prepared training rows are not the frame's train rows")
        prep.train["truth_v"] = torch.as_tensor(truth_v[is_train])
        prep.train["truth_c"] = torch.as_tensor(truth_c[is_train])
        return prep

    def batch_of(batch, config, targets):
        out = e2e_rct_batch(batch, config, targets)
        out.truth = (batch.get("truth_v"), batch.get("truth_c"))
        return out

    def gradient(v, c, batch, budget, hp, gen, wrt_costs):
        vt, ct = batch.truth
        vv, cc = v.detach().double(), c.detach().double()
        lam = dl.q_lambda_max(vv, cc)
        it = int(hp["max_iter"])
        if real.gradient_estimator == "nes":
            base = torch.stack([vv, cc]) if wrt_costs else vv[None]
            sigma = float(hp["sigma"])

            def evaluate(half):
                d = half.double()
                pert = torch.cat([base + sigma * d, base - sigma * d])
                return _true_q(pert[:, 0], pert[:, 1] if wrt_costs else cc[None], vt, ct, budget, lam, it)

            g = dl.nes_estimate(evaluate, tuple(base.shape), int(hp["directions"]), sigma, gen, pairs=True)
            return g[0], (g[1] if wrt_costs else None)
        n, k = vv.shape
        h = float(hp["h"])

        def evaluate_on(which):
            def evaluate(flat, delta):
                pv = vv[None].repeat(flat.shape[0], 1, 1)
                pc = cc[None].repeat(flat.shape[0], 1, 1)
                target = pv if which == "v" else pc
                target[torch.arange(flat.shape[0]), flat // k, flat % k] += delta
                return _true_q(pv, pc, vt, ct, budget, lam, it)
            return evaluate

        g_v = dl.fd_estimate(evaluate_on("v"), n * k, int(hp["entries"]), h, gen).reshape(n, k)
        g_c = dl.fd_estimate(evaluate_on("c"), n * k, int(hp["entries"]), h, gen).reshape(n, k) if wrt_costs else None
        return g_v, g_c

    e2e_prepare, e2e_rct_batch = e2e.prepare_frame, e2e.rct_batch
    model = _e2e_model(real.name, data.config, seed, max_epochs)
    model.gradient = gradient
    e2e.prepare_frame, e2e.rct_batch = prepare, batch_of
    try:
        return model.fit(data).model_
    finally:
        e2e.prepare_frame, e2e.rct_batch = e2e_prepare, e2e_rct_batch


def _e2e_model(name: str, cfg, seed: int, max_epochs: int | None):
    """Registered e2e model `name` with campaign.yaml's `models.params.<name>`, the seed and (when
    given) `max_epochs` as its warm start's and its fine-tuning's epochs."""
    from promo_assets.models import registry

    caps = {} if max_epochs is None else {"epochs": int(max_epochs), "warm_max_epochs": int(max_epochs)}
    return registry.for_campaign(name, cfg, seed=seed, **caps)


LIBRARY_SIZES = {"e2e_synthetic": (3, 2000), "dipn_synthetic_2": (3, 4000), "uplift_two_arm": (3, 4000)}


def _library_campaigns(args, prefix: str):
    """(preset, seed, campaign folder) for every preset x seed of the library / snr sections: the
    campaign simulated into a temporary landing folder that lives until the next one (days x users
    per day: LIBRARY_SIZES, or --days / --users)."""
    seeds = range(args.first_seed, args.first_seed + (5 if args.seeds is None else args.seeds))
    for preset in args.presets:
        days, users = LIBRARY_SIZES.get(preset, (3, 2000))
        for seed in seeds:
            with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
                simulate(preset,
                         SimulationRequest("c", tmp, days=args.days or days, users=args.users or users, seed=seed,
                                           start=REFERENCE_START))
                yield preset, seed, Path(tmp) / "c"


def library(args) -> dict:
    """The pipeline section's comparison on the library path (what a loaded machine can finish):
    per (preset, seed) one simulated campaign, its training frame as the pipeline builds it, the
    S-learner trained once (`e2e.warm_start`, which is `train_s_learner` with the `s_learner` model's
    arguments) and shared as the e2e models' warm start, the LightGBM baselines; each allocated by
    `solve` on the population at every budget; pct_oracle = true value / the oracle's true value at the
    same true cost (matched true spend); AUCC on the holdout rows of two-arm campaigns."""
    from _model_frames import load_population

    from promo_assets.allocation import solve
    from promo_assets.allocation.errors import InfeasibleBudgetError
    from promo_assets.evaluation import aucc, oracle_policy, roi_score, true_policy_value
    from promo_assets.models import e2e
    from promo_assets.models.protocol import TrainingData

    torch.set_num_threads(1)
    sizes = LIBRARY_SIZES
    params = json.loads(args.params)
    rows = []
    for preset, seed, campaign_dir in _library_campaigns(args, "e2e_lib_"):
        frame, cfg, num, cat = load_training_frame(campaign_dir)
        pop = load_population(campaign_dir)
        vt, ct = truth_arrays(campaign_dir, pop["user_id"].to_numpy())
        hold = frame[frame["split"] == "holdout"]
        hold_truth = (truth_arrays(campaign_dir, hold["user_id"].astype(str).to_numpy())
                      if cfg.n_levels == 2 else None)
        if params:
            cfg = cfg.model_copy(update={"models": cfg.models.model_copy(update={"params": params})})
        data = TrainingData(cfg, frame, num, cat, frame_version=f"bench-{preset}-{seed}")
        names = ["s_learner", *E2E, "lgbm_s_mono"] + (["lgbm_s", "lgbm_t"] if preset == "uplift_two_arm" else [])
        if args.models:
            names = ["s_learner", *args.models]
        names += [m for m in args.oracle if m not in names]
        if cfg.n_levels == 2:
            names.append("truth")  # the ceiling: the true curves (pct_oracle 1 by definition, AUCC on the holdout)
        for name in names:
            t0 = time.perf_counter()
            if name == "truth":
                fitted = None
            elif name == "s_learner":
                fitted = e2e.warm_start(data, seed, args.max_epochs or 60, True, None)
            elif name in ORACLE:
                fitted = _fit_oracle(name, data, cfg, seed, args.max_epochs, campaign_dir)
            elif name in E2E:
                fitted = _e2e_model(name, cfg, seed, args.max_epochs).fit(data).model_
            else:
                fitted = train_model(name, frame, cfg, num, cat, seed=seed, max_epochs=args.max_epochs)
            secs = time.perf_counter() - t0
            v, c = (vt, ct) if fitted is None else fitted.predict(pop)
            row_aucc = float("nan")
            if cfg.n_levels == 2:
                hv, hc = hold_truth if fitted is None else fitted.predict(hold)
                row_aucc = aucc(roi_score(hv, hc), hold["level"].to_numpy(), hold["response"].to_numpy(float),
                                hold["cost"].to_numpy(float), hold["propensity"].to_numpy(float))
            for b in cfg.budget_per_capita:
                try:
                    levels = solve(v, c, b, per_capita=True).levels
                except InfeasibleBudgetError:  # the model's predicted cheapest allocation is above b
                    rows.append({"preset": preset, "seed": seed, "model": name, "budget_per_capita": b,
                                 "pct_oracle": float("nan"), "spend_ratio": float("nan"), "aucc": row_aucc,
                                 "seconds": secs, "infeasible": True})
                    continue
                tv, tc = true_policy_value(levels, vt, ct)
                ov, _ = true_policy_value(oracle_policy(vt, ct, tc), vt, ct)
                rows.append({"preset": preset, "seed": seed, "model": name, "budget_per_capita": b,
                             "pct_oracle": tv / ov, "spend_ratio": tc / b, "aucc": row_aucc, "seconds": secs,
                             "infeasible": False,
                             "best_epoch": None if fitted is None else fitted.metrics.get("best_epoch")})
            print(f"  {preset} seed {seed} {name}: pct_oracle "
                  + ", ".join(f"{r['pct_oracle']:.4f}" for r in rows[-len(cfg.budget_per_capita):])
                  + (f", AUCC {row_aucc:.4f}" if row_aucc == row_aucc else "")
                  + f" ({secs:.0f}s, load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    # a seed where a budget was infeasible for the model has a NaN mean: it counts as a loss
    by_seed = (df.groupby(["preset", "model", "seed"])["pct_oracle"].apply(lambda x: x.mean(skipna=False))
               .unstack("model"))
    wins = {}
    for preset in args.presets:
        part = by_seed.loc[preset]
        for m in [*E2E, "lgbm_s_mono"]:
            if m in part:
                wins[f"{preset}:{m}"] = {"seeds_above_s_learner": int((part[m] > part["s_learner"]).sum()),
                                         "seeds": int(len(part)),
                                         "mean_diff_points": float(100 * (part[m] - part["s_learner"]).mean()),
                                         "infeasible_budgets": int(df[(df["preset"] == preset) & (df["model"] == m)]
                                                                   ["infeasible"].sum())}
        for m in E2E:
            if m in part and "lgbm_s_mono" in part:
                wins[f"{preset}:{m}_vs_lgbm_s_mono"] = {
                    "seeds_above_lgbm_s_mono": int((part[m] > part["lgbm_s_mono"]).sum()), "seeds": int(len(part)),
                    "mean_diff_points": float(100 * (part[m] - part["lgbm_s_mono"]).mean())}
    if "aucc" in df:
        two_arm = df.dropna(subset=["aucc"]).drop_duplicates(["preset", "model", "seed"])
        for preset, part in two_arm.groupby("preset"):
            a = part.pivot(index="seed", columns="model", values="aucc")
            for m in [*E2E, "lgbm_s_mono"]:
                if m in a:
                    wins[f"{preset}:{m}_aucc"] = {"seeds_above_s_learner": int((a[m] > a["s_learner"]).sum()),
                                                  "seeds": int(len(a)),
                                                  "mean_diff": float((a[m] - a["s_learner"]).mean())}
    table = df.groupby(["preset", "model", "budget_per_capita"])[["pct_oracle", "spend_ratio"]].mean().reset_index()
    aucc_t = (df.dropna(subset=["aucc"]).drop_duplicates(["preset", "model", "seed"])
              .groupby(["preset", "model"])["aucc"].agg(["mean", "std", "count"]).reset_index())
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4f}"), file=sys.stderr)
    print(aucc_t.to_string(index=False, float_format=lambda x: f"{x:.4f}"), file=sys.stderr)
    print(json.dumps(wins, indent=1), file=sys.stderr)
    return {"section": "library", "max_epochs": args.max_epochs, "params": params, "sizes": sizes,
            "table": table.to_dict("records"), "wins_over_s_learner": wins, "aucc": aucc_t.to_dict("records"),
            "rows": rows}


def cost(args) -> dict:
    """Seconds per training epoch (the models' own `seconds_per_epoch`, wall clock) of the S-learner
    and the e2e models' fine-tuning, back to back on one campaign. The S-learner is trained through
    `e2e.warm_start` (the `s_learner` model's call), which the e2e fits then reuse."""
    from promo_assets.models import e2e
    from promo_assets.models.protocol import TrainingData

    torch.set_num_threads(1)
    seed = 0
    users, days = args.users or 5000, args.days or 4
    out = {"section": "cost", "preset": args.preset, "users": users, "days": days, "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="e2e_cost_") as tmp:
        simulate(args.preset, SimulationRequest("cost", tmp, days=days, users=users, seed=seed, start=REFERENCE_START))
        frame, cfg, num, cat = load_training_frame(Path(tmp) / "cost")
        data = TrainingData(cfg, frame, num, cat, frame_version=f"cost-{args.preset}")
        for name in ("s_learner", *E2E):
            fitted = (e2e.warm_start(data, seed, args.max_epochs or 60, True, None) if name == "s_learner"
                      else _e2e_model(name, cfg, seed, args.max_epochs).fit(data).model_)
            m = fitted.metrics
            out[name] = {"seconds_per_epoch": m["seconds_per_epoch"], "epochs": m["epochs"],
                         "n_train": m["n_train"], "q_seconds_per_step": m.get("q_seconds_per_step"),
                         "q_steps": m.get("q_steps"), "warm_seconds_per_epoch": m.get("warm_seconds_per_epoch")}
            print(f"  {name}: {m['seconds_per_epoch']:.2f} s/epoch over {m['epochs']} epochs"
                  + (f", Q {m['q_seconds_per_step']:.3f} s/step" if "q_seconds_per_step" in m else ""), file=sys.stderr)
    base = out["s_learner"]["seconds_per_epoch"]
    out["ratio_to_s_learner"] = {n: out[n]["seconds_per_epoch"] / base for n in E2E}
    print("  ratio to the S-learner " + ", ".join(f"{n} {r:.2f}x" for n, r in out["ratio_to_s_learner"].items()),
          file=sys.stderr)
    out["load_after"] = os.getloadavg()
    return out


def _true_q(values, costs, v_gt, c_gt, budget: float, lambda_max: float, max_iter: int) -> torch.Tensor:
    """The noise-free counterpart of Q for P copies (values (P, B, K), costs (P or 1, B, K)): the same
    bisection on the multiplier (`decision_loss._bisect`), but the value and cost of each midpoint's
    KKT allocation are the TRUE expected ones of the batch's users (v_gt, c_gt at the decided levels),
    not the EOM estimate from the logged RCT outcomes. Ties go to the lower index (argmax)."""
    vg, cg = torch.as_tensor(v_gt, dtype=torch.float64), torch.as_tensor(c_gt, dtype=torch.float64)
    n = vg.shape[0]

    def sums_at(mid):
        levels = (values - mid[:, None, None] * costs).argmax(-1)  # (P, B)
        val = vg.gather(1, levels.T).T.sum(-1)
        cst = cg.gather(1, levels.T).T.sum(-1)
        ones = torch.full_like(val, float(n))
        return torch.stack([ones, val, cst, ones], dim=-1)

    return dl._bisect(sums_at, values.shape[0], budget, lambda_max, max_iter, 1e-4)


def snr(args) -> dict:
    """Does the estimated Q gradient carry information about the true value? For each campaign: the
    warm-start S-learner's predictions on its training rows; for a batch of B rows and N' antithetic
    NES directions delta_i (the models' sigma), the directional change of Q on the RCT rows,
    dQ_i = Q(x + sigma delta_i) - Q(x - sigma delta_i) (what the estimators see), against the same
    change of the TRUE value of the batch's KKT allocation at matched true cost (`_true_q`,
    the truth curves instead of the RCT outcomes). Their correlation over directions is the share
    of the estimator's signal that points where the true value rises; ~0 means the Q gradient is
    noise at that batch size. Also the same for the S-learner's own loss (-dL_i, output space:
    log loss of the predicted response (and visit cost) at the logged level)."""
    from promo_assets.models import e2e
    from promo_assets.models.protocol import TrainingData

    torch.set_num_threads(1)
    n_dir, sigma, max_iter, chunk = args.nes_directions, args.nes_sigma, 20, 16
    rows = []
    for preset, seed, campaign_dir in _library_campaigns(args, "e2e_snr_"):
        frame, cfg, num, cat = load_training_frame(campaign_dir)
        train = frame[frame["split"] == "train"].reset_index(drop=True)
        v_gt, c_gt = truth_arrays(campaign_dir, train["user_id"].astype(str).to_numpy())
        warm = e2e.warm_start(TrainingData(cfg, frame, num, cat), seed, args.max_epochs or 60, True, None)
        v_hat, c_hat = warm.predict(train)
        low, high = e2e.budget_bounds({"budget_range": None}, cfg)
        budget = 0.5 * (low + high)
        wrt_costs = cfg.cost != "assigned"
        t = train["level"].to_numpy(np.int64)
        y, z = train["response"].to_numpy(float), train["cost"].to_numpy(float)
        w = train["ips_weight"].to_numpy(float)
        rng = np.random.default_rng([seed, 7])
        for b in args.snr_batches:
            b = min(int(b), len(train))
            dq, dt, dl_ = [], [], []
            for rep in range(max(1, min(args.snr_repeats, len(train) // b))):
                idx = rng.choice(len(train), size=b, replace=False)
                batch = dl.RCTBatch.from_arrays(t[idx], y[idx], z[idx], ipw=w[idx])
                v, c = torch.tensor(v_hat[idx]), torch.tensor(c_hat[idx])
                lam = dl.q_lambda_max(v, c)
                base = torch.stack([v, c]) if wrt_costs else v[None]
                half = dl.nes_directions(n_dir, tuple(base.shape), torch.Generator().manual_seed(seed * 1000 + rep))
                for s0 in range(0, half.shape[0], chunk):
                    d = half[s0:s0 + chunk].double()
                    plus, minus = base + sigma * d, base - sigma * d
                    for sign, pert in ((1, plus), (-1, minus)):
                        pc = pert[:, 1] if wrt_costs else c[None]
                        q = torch.nan_to_num(dl.q_bisection(pert[:, 0], pc, batch, budget, lambda_max=lam,
                                                            max_iter=max_iter), nan=0.0)
                        qt = _true_q(pert[:, 0], pc, v_gt[idx], c_gt[idx], budget, lam, max_iter)
                        pv = pert[:, 0].gather(-1, torch.as_tensor(t[idx])[None, :, None].expand(
                            pert.shape[0], -1, 1))[..., 0].clamp(1e-6, 1 - 1e-6)
                        ww, yy = torch.as_tensor(w[idx]), torch.as_tensor(y[idx])
                        loss = -(ww * (yy * pv.log() + (1 - yy) * (1 - pv).log())).sum(-1) / ww.sum()
                        if cfg.cost == "column":
                            pz = pert[:, 1].gather(-1, torch.as_tensor(t[idx])[None, :, None].expand(
                                pert.shape[0], -1, 1))[..., 0].clamp(1e-6, 1 - 1e-6)
                            zz = torch.as_tensor(z[idx])
                            loss = loss - (ww * (zz * pz.log() + (1 - zz) * (1 - pz).log())).sum(-1) / ww.sum()
                        if sign == 1:
                            q_p, qt_p, l_p = q, qt, loss
                    dq.append(q_p - q)
                    dt.append(qt_p - qt)
                    dl_.append(-(l_p - loss))
            dq, dt, dl_ = (torch.cat(x).numpy() for x in (dq, dt, dl_))
            corr = lambda a, b: float(np.corrcoef(a, b)[0, 1]) if a.std() > 0 and b.std() > 0 else float("nan")  # noqa: E731
            row = {"preset": preset, "seed": seed, "batch": b, "directions": len(dq),
                   "corr_q_true": corr(dq, dt), "corr_loss_true": corr(dl_, dt),
                   "sd_dq": float(dq.std()), "sd_true": float(dt.std()),
                   "share_dq_nonzero": float((dq != 0).mean())}
            rows.append(row)
            print(f"  {preset} seed {seed} B={b}: corr(dQ_rct, dQ_true) {row['corr_q_true']:+.3f}, "
                  f"corr(-dL, dQ_true) {row['corr_loss_true']:+.3f} over {len(dq)} directions "
                  f"(load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    summary = (df.groupby(["preset", "batch"])[["corr_q_true", "corr_loss_true", "sd_dq", "sd_true"]]
               .agg(["mean", "std"]).reset_index())
    print(summary.to_string(index=False, float_format=lambda x: f"{x:.3f}"), file=sys.stderr)
    summary.columns = ["_".join(c).strip("_") for c in summary.columns]
    return {"section": "snr", "sigma": sigma, "directions": n_dir, "summary": summary.to_dict("records"),
            "rows": rows}


def run_section(args) -> dict:
    result = {"fig2": fig2, "pipeline": pipeline, "library": library, "cost": cost, "snr": snr}[args.section](args)
    result["benchmark"] = "e2e_paper"
    result["load_average"] = os.getloadavg()
    print(json.dumps(result, indent=2, default=float))
    return result

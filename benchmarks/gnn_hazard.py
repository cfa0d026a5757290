"""Benchmark of the GNN/hazard paper on the `bipartite` simulator (issue 7).

Prints, averaged over seeds (mean ± std), tables shaped like the paper's Table 2 (GNN vs DNN-H vs
DNN, all with the hazard head) and Table 3 (hazard vs SBBM vs Cox, all on the GNN), the predicted
vs true average response per coupon level (the change point), the Fig. 4 sensitivity-quintile
uplift (PNG written to benchmarks/results/), the joint-vs-independent allocation's true value under
the same ratio budget, and the time of one full-graph training epoch at 200k customers + 50k
merchants + ~1M edges. Everything measured is also printed as one JSON object at the end.

    .venv/bin/python benchmarks/gnn_hazard.py                      # 3 seeds, 20k customers
    .venv/bin/python benchmarks/gnn_hazard.py --seeds 0 --users 5000 --skip-epoch-time
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from promo_assets.graph import (
    GraphTrainConfig, build_graph, compare_joint_independent, level_curve, load_bipartite_campaign,
    plot_uplift_quintiles, sensitivity_quintile_uplift, train_graph_model, truth_matrix, truth_metrics,
)
from promo_assets.simulation.bipartite import simulate_bipartite

MODELS = {
    "GNN+hazard": ("gnn", "hazard"),
    "DNN-H": ("dnn_h", "hazard"),
    "DNN": ("dnn", "hazard"),
    "SBBM": ("gnn", "sbbm"),
    "Cox": ("gnn", "cox"),
}
TABLE2 = ("GNN+hazard", "DNN-H", "DNN")
TABLE3 = ("GNN+hazard", "SBBM", "Cox")
METRICS = ("auc_c", "mae_c", "mse_c", "mae_m", "mse_m", "mae_c_truth", "mse_c_truth", "mae_m_truth")


def run_seed(seed: int, args, workdir: Path) -> dict:
    d = workdir / f"seed{seed}"
    simulate_bipartite(d, args.days, args.users, seed, merchants=args.merchants)
    camp = load_bipartite_campaign(d)
    graph = build_graph(camp.edges, camp.customers, camp.merchants)
    ct = truth_matrix(camp.customer_truth, "user_id", graph["customer"].ids, len(camp.incentives))
    mt = truth_matrix(camp.merchant_truth, "merchant_id", graph["merchant"].ids, len(camp.commissions))
    out: dict = {"seed": seed, "models": {}, "curves": {}}
    trained = {}
    for name, (enc, head) in MODELS.items():
        cfg = GraphTrainConfig(encoder=enc, head=head, seed=seed, max_epochs=args.max_epochs)
        m = train_graph_model(graph, camp.customer_events, camp.merchant_events, camp.incentives,
                              camp.commissions, cfg, save=False)
        tm = truth_metrics(m.customer_values, m.merchant_values, ct[0], mt[0], m.merchant_normalizer)
        out["models"][name] = {**{k: v for k, v in m.metrics.items() if not isinstance(v, str)}, **tm}
        out["curves"][name] = level_curve(m.customer_values, ct[0], camp.incentives)[["predicted", "true"]].to_dict("list")
        trained[name] = m
        print(f"  seed {seed} {name:11s} auc_c {m.metrics['auc_c']:.4f} mae_c {m.metrics['mae_c']:.4f} "
              f"mae_c_truth {tm['mae_c_truth']:.4f} mae_m {m.metrics['mae_m']:.4f} epochs {m.metrics['epochs']} "
              f"({m.metrics['seconds']:.1f}s)", flush=True)

    # Fig. 4 on the holdout RCT customers (node-level random split of the training call)
    rng = np.random.default_rng([seed, 1])
    ids = graph["customer"].ids
    node = np.asarray(pd_index(ids).get_indexer(camp.customer_events["user_id"].astype(str)))
    holdout = rng.random(len(ids))[node] < GraphTrainConfig().holdout_fraction
    ev = camp.customer_events[holdout]
    k = len(camp.incentives)
    high, low = [k - 2, k - 1], [0, 1]
    true_uplift = ct[0][:, high].mean(1) - ct[0][:, low].mean(1)
    out["uplift"] = {}
    tables = {}
    for name in ("GNN+hazard", "DNN-H"):
        sens = trained[name].customer_sensitivity()[node[holdout]]
        t = sensitivity_quintile_uplift(sens, ev["level"].to_numpy(), ev["response"].to_numpy(), high, low,
                                        true_uplift=true_uplift[node[holdout]])
        tables[name] = t
        out["uplift"][name] = t.to_dict("list")
    out["uplift_png"] = plot_uplift_quintiles(tables)

    # joint vs independent allocation under the same ratio budget (GNN+hazard coefficients)
    m = trained["GNN+hazard"]
    out["joint"] = {}
    for ratio in args.ratios:
        out["joint"][str(ratio)] = compare_joint_independent(*m.predict_customers(), *m.predict_merchants(),
                                                             ratio, ct, mt, seed=seed)
    return out


def pd_index(ids):
    import pandas as pd

    return pd.Index(ids)


def epoch_time(args, workdir: Path) -> dict:
    """Seconds per full-graph training epoch (forward + backward + step) of GNN+hazard."""
    d = workdir / "big"
    t0 = time.perf_counter()
    simulate_bipartite(d, 7, args.epoch_users, 0, merchants=args.epoch_merchants,
                       edges_per_customer=args.epoch_edges_per_customer)
    t_sim = time.perf_counter() - t0
    camp = load_bipartite_campaign(d)
    t0 = time.perf_counter()
    graph = build_graph(camp.edges, camp.customers, camp.merchants)
    t_build = time.perf_counter() - t0
    cfg = GraphTrainConfig(encoder="gnn", head="hazard", max_epochs=args.epochs_timed, patience=10**6)
    m = train_graph_model(graph, camp.customer_events, camp.merchant_events, camp.incentives, camp.commissions,
                          cfg, save=False, log=lambda s: print("   ", s, flush=True))
    secs = [h["seconds"] for h in m.history]
    return {
        "customers": int(graph["customer"].num_nodes),
        "merchants": int(graph["merchant"].num_nodes),
        "edges": int(graph["customer", "pays", "merchant"].edge_index.shape[1]),
        "labelled_customers": int(len(camp.customer_events)),
        "simulate_seconds": round(t_sim, 2),
        "build_graph_seconds": round(t_build, 2),
        "epoch_seconds": [round(s, 3) for s in secs],
        "epoch_seconds_mean": round(float(np.mean(secs)), 3),
        "epoch_seconds_max": round(float(np.max(secs)), 3),
        "torch_threads": torch.get_num_threads(),
    }


def mean_std(values) -> str:
    a = np.asarray(values, dtype=float)
    return f"{a.mean():.4f} ± {a.std():.4f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--users", type=int, default=20_000)
    p.add_argument("--merchants", type=int, default=5_000)
    p.add_argument("--days", type=int, default=3)
    p.add_argument("--max-epochs", type=int, default=300)
    p.add_argument("--ratios", type=float, nargs="+", default=[20.0, 40.0, 60.0])
    p.add_argument("--epoch-users", type=int, default=200_000)
    p.add_argument("--epoch-merchants", type=int, default=50_000)
    p.add_argument("--epoch-edges-per-customer", type=float, default=5.2)
    p.add_argument("--epochs-timed", type=int, default=3)
    p.add_argument("--skip-epoch-time", action="store_true")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--results", type=Path, default=Path(__file__).parent / "results")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    args.results.mkdir(parents=True, exist_ok=True)
    report: dict = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                    "machine": {"python": platform.python_version(), "torch": torch.__version__,
                                "threads": torch.get_num_threads()}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        runs = []
        for seed in args.seeds:
            runs.append(run_seed(seed, args, tmp))
        if not args.skip_epoch_time:
            print("timing one epoch at the large scale ...", flush=True)
            report["epoch_time"] = epoch_time(args, tmp)

    png = runs[0].pop("uplift_png")
    (args.results / "gnn_hazard_uplift_quintiles.png").write_bytes(png)
    for r in runs[1:]:
        r.pop("uplift_png")
    report["runs"] = runs

    def table(title, names):
        print(f"\n{title}  ({len(runs)} seeds, holdout labels; *_truth: vs simulated expected response, all users x levels)")
        print(f"{'metric':13s}" + "".join(f"{n:>22s}" for n in names))
        summary = {}
        for metric in METRICS:
            cells = [mean_std([r["models"][n][metric] for r in runs]) for n in names]
            summary[metric] = {n: float(np.mean([r["models"][n][metric] for r in runs])) for n in names}
            print(f"{metric:13s}" + "".join(f"{c:>22s}" for c in cells))
        return summary

    report["table2"] = table("Table 2: GNN vs DNN-H vs DNN (hazard head)", TABLE2)
    report["table3"] = table("Table 3: response models on the same GNN", TABLE3)

    print("\nAverage response per coupon level (seed-averaged): predicted vs true")
    k = len(runs[0]["curves"]["GNN+hazard"]["true"])
    print(f"{'level':>5s}{'true':>9s}" + "".join(f"{n:>12s}" for n in MODELS))
    curves = {}
    for j in range(k):
        true = np.mean([r["curves"]["GNN+hazard"]["true"][j] for r in runs])
        preds = [np.mean([r["curves"][n]["predicted"][j] for r in runs]) for n in MODELS]
        curves[j] = {"true": true, **dict(zip(MODELS, preds))}
        print(f"{j:5d}{true:9.4f}" + "".join(f"{p:12.4f}" for p in preds))
    report["level_curves"] = curves

    print("\nFig. 4: uplift (high - low levels) per predicted-sensitivity quintile, holdout RCT customers")
    print(f"{'group':>5s}" + "".join(f"{n + ' ' + c:>26s}" for n in ("GNN+hazard", "DNN-H") for c in ("observed", "true")))
    for g in range(5):
        cells = []
        for n in ("GNN+hazard", "DNN-H"):
            for c in ("observed_uplift", "true_uplift"):
                cells.append(np.mean([r["uplift"][n][c][g] for r in runs]))
        print(f"{g + 1:5d}" + "".join(f"{c:26.4f}" for c in cells))
    print(f"(plot: {args.results / 'gnn_hazard_uplift_quintiles.png'})")

    print("\nJoint vs independent allocation, same ratio budget (GNN+hazard coefficients; true values)")
    print(f"{'ratio':>6s}{'joint value':>14s}{'indep. value':>14s}{'joint/indep':>12s}{'joint ratio':>12s}"
          f"{'indep. ratio':>13s}{'oracle joint':>14s}{'oracle indep':>14s}")
    joint_summary = {}
    for ratio in args.ratios:
        key = str(ratio)
        jv = [r["joint"][key]["predicted_joint"]["true_value"] for r in runs]
        iv = [r["joint"][key]["predicted_independent"]["true_value"] for r in runs]
        jr = [r["joint"][key]["predicted_joint"]["true_ratio"] for r in runs]
        ir = [r["joint"][key]["predicted_independent"]["true_ratio"] for r in runs]
        oj = [r["joint"][key]["oracle_joint"]["true_value"] for r in runs]
        oi = [r["joint"][key]["oracle_independent"]["true_value"] for r in runs]
        joint_summary[key] = {"joint": float(np.mean(jv)), "independent": float(np.mean(iv)),
                              "joint_ge_independent_all_seeds": bool(all(a >= b for a, b in zip(jv, iv)))}
        print(f"{ratio:6.0f}{np.mean(jv):14.1f}{np.mean(iv):14.1f}{np.mean(jv) / np.mean(iv):12.4f}"
              f"{np.mean(jr):12.2f}{np.mean(ir):13.2f}{np.mean(oj):14.1f}{np.mean(oi):14.1f}")
    report["joint_summary"] = joint_summary

    if "epoch_time" in report:
        e = report["epoch_time"]
        print(f"\nEpoch time: {e['customers']} customers + {e['merchants']} merchants + {e['edges']} edges, "
              f"{e['torch_threads']} threads: mean {e['epoch_seconds_mean']}s, max {e['epoch_seconds_max']}s "
              f"per full-graph epoch (build_graph {e['build_graph_seconds']}s)")

    t2, t3 = report["table2"], report["table3"]
    report["must_show"] = {
        "gnn_beats_dnn_and_dnn_h_auc_c": t2["auc_c"]["GNN+hazard"] > max(t2["auc_c"]["DNN-H"], t2["auc_c"]["DNN"]),
        "gnn_beats_dnn_and_dnn_h_mae_c": t2["mae_c"]["GNN+hazard"] < min(t2["mae_c"]["DNN-H"], t2["mae_c"]["DNN"]),
        "gnn_beats_dnn_and_dnn_h_mae_c_truth": t2["mae_c_truth"]["GNN+hazard"] < min(t2["mae_c_truth"]["DNN-H"], t2["mae_c_truth"]["DNN"]),
        "hazard_beats_cox_and_sbbm_mae_c": t3["mae_c"]["GNN+hazard"] < min(t3["mae_c"]["SBBM"], t3["mae_c"]["Cox"]),
        "hazard_beats_cox_and_sbbm_mae_c_truth": t3["mae_c_truth"]["GNN+hazard"] < min(t3["mae_c_truth"]["SBBM"], t3["mae_c_truth"]["Cox"]),
        "joint_ge_independent": all(v["joint"] >= v["independent"] for v in joint_summary.values()),
        "epoch_le_60s": report.get("epoch_time", {}).get("epoch_seconds_max", float("nan")) <= 60,
    }
    print("\nmust-show:", json.dumps(report["must_show"]))
    (args.results / "gnn_hazard.json").write_text(json.dumps(report, default=float, indent=1))
    print(json.dumps({k: report[k] for k in ("table2", "table3", "joint_summary", "must_show")}
                     | ({"epoch_time": report["epoch_time"]} if "epoch_time" in report else {}), default=float))


if __name__ == "__main__":
    main()

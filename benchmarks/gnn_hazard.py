"""Benchmark of the GNN/hazard paper on the `bipartite` simulator.

Prints, averaged over seeds (mean ± std), tables shaped like the paper's Table 2 (GNN vs DNN-H vs
DNN, all with the hazard head) and Table 3 (hazard vs SBBM vs Cox, all on the GNN), the predicted
vs true average response per coupon level (the change point), the Fig. 4 sensitivity-quintile
uplift (PNG written to benchmarks/results/), the joint-vs-independent allocation's true value under
the same total budget (`promo_assets.graph.joint`: the independent policy splits the joint ratio-B
policy's predicted total cost between the sides in proportion to each side's own ratio-B spend;
merchants on the paper's normalized scale, and also on raw counts / money), how much the split of
that total between the sides is worth (`split_scan`: true value of every customer share of it), and the time of one full-graph training epoch at 200k customers + 50k
merchants + ~1M edges. Everything measured is also printed as one JSON object at the end.

    .venv/bin/python benchmarks/gnn_hazard.py                      # 3 seeds, 20k customers
    .venv/bin/python benchmarks/gnn_hazard.py --seeds 0 --users 5000 --skip-epoch-time
    .venv/bin/python benchmarks/gnn_hazard.py --joint-only     # trains GNN+hazard only; joint vs independent
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from promo_assets.graph import (
    GraphData,
    GraphTrainConfig,
    JointCurves,
    build_graph,
    compare_joint_independent,
    independent_allocation,
    joint_allocation,
    level_curve,
    load_bipartite_campaign,
    plot_uplift_quintiles,
    sensitivity_quintile_uplift,
    split_scan,
    train_graph_model,
    truth_matrix,
    truth_metrics,
)
from promo_assets.simulation.bipartite import simulate_bipartite
from promo_assets.simulation.landing import SimulationRequest
from promo_assets.simulation import REFERENCE_START

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
    request = SimulationRequest(f"seed{seed}", workdir, args.days, args.users, seed, REFERENCE_START)
    d = request.campaign_dir
    simulate_bipartite(request, merchants=args.merchants,
                       merchant_exponent=args.merchant_exponent)
    camp = load_bipartite_campaign(d)
    graph = build_graph(camp.edges, camp.customers, camp.merchants)
    ct = truth_matrix(camp.customer_truth, "user_id", graph["customer"].ids, len(camp.incentives))
    mt = truth_matrix(camp.merchant_truth, "merchant_id", graph["merchant"].ids, len(camp.commissions))
    out: dict = {"seed": seed, "models": {}, "curves": {}}
    trained = {}
    for name, (enc, head) in MODELS.items():
        if args.joint_only and name != "GNN+hazard":
            continue
        cfg = GraphTrainConfig(encoder=enc, head=head, seed=seed, max_epochs=args.max_epochs)
        m = train_graph_model(GraphData(graph, camp.customer_events, camp.merchant_events, camp.incentives, camp.commissions), cfg, save=False)
        tm = truth_metrics(m.customer_values, m.merchant_values, ct[0], mt[0], m.merchant_normalizer)
        out["models"][name] = {**{k: v for k, v in m.metrics.items() if not isinstance(v, str)}, **tm}
        out["curves"][name] = level_curve(m.customer_values, ct[0], camp.incentives)[["predicted", "true"]].to_dict("list")
        trained[name] = m
        print(f"  seed {seed} {name:11s} auc_c {m.metrics['auc_c']:.4f} mae_c {m.metrics['mae_c']:.4f} "
              f"mae_c_truth {tm['mae_c_truth']:.4f} mae_m {m.metrics['mae_m']:.4f} epochs {m.metrics['epochs']} "
              f"({m.metrics['seconds']:.1f}s)", flush=True)

    if not args.joint_only:
        fig4(seed, out, graph, camp, ct, trained)
    out["joint"] = joint_vs_independent(trained["GNN+hazard"], ct, mt, args.ratios, seed)
    return out


def joint_vs_independent(m, ct, mt, ratios, seed) -> dict:
    """Joint vs independent at the same total predicted budget (GNN+hazard coefficients), with the
    merchants on the paper's normalized scale ("normalized") and on raw counts ("raw")."""
    out: dict = {}
    for scale, norm in (("normalized", m.merchant_normalizer), ("raw", None)):
        out[scale] = {}
        for ratio in ratios:
            out[scale][str(ratio)] = compare_joint_independent(
                JointCurves(m.predict_customers(), m.predict_merchants()), ratio, JointCurves(ct, mt),
                merchant_normalizer=norm, seed=seed)
            r = out[scale][str(ratio)]
            pj, pi = r["predicted_joint"], r["predicted_independent"]
            print(f"  seed {seed} {scale:10s} B={ratio:g}: joint true {pj['true_value']:.1f} vs independent "
                  f"{pi['true_value']:.1f} ({pj['true_value'] / pi['true_value'] - 1:+.2%}); predicted cost "
                  f"{pj['predicted_cost']:.1f} vs {pi['predicted_cost']:.1f}", flush=True)
    out["split"] = {str(ratio): split_of(m, ct, mt, ratio) for ratio in ratios}
    return out


SHARES = np.round(np.arange(0.0, 0.801, 0.05), 2)


def split_of(m, ct, mt, ratio) -> dict:
    """Where the joint and independent policies split the joint policy's predicted total between
    customers and merchants (normalized scale), and the true value of every split of that total on
    the model's per-side frontiers (`split_scan`), with the true curves' scan for comparison."""
    (vc, cc), (vm, cm), norm = m.predict_customers(), m.predict_merchants(), m.merchant_normalizer
    predicted, truth = JointCurves((vc, cc), (vm, cm)), JointCurves(ct, mt)
    j = joint_allocation(predicted, ratio, merchant_normalizer=norm)
    i = independent_allocation(predicted, ratio, total_cost=j.cost, merchant_normalizer=norm)
    joint_share = float(cc[np.arange(len(vc)), j.customer_levels].sum() / j.cost)
    pred = split_scan(predicted, j.cost, SHARES, truth, merchant_normalizer=norm)
    oj = joint_allocation(truth, ratio, merchant_normalizer=norm)
    true = split_scan(truth, oj.cost, SHARES, truth, merchant_normalizer=norm)
    return {"joint_share": joint_share, "independent_share": float(i.info["customer_share"]),
            "oracle_joint_share": float(ct[1][np.arange(len(vc)), oj.customer_levels].sum() / oj.cost),
            "shares": SHARES.tolist(), "true_value": pred["true_value"].tolist(),
            "customer_slope": pred["customer_slope"].tolist(), "merchant_slope": pred["merchant_slope"].tolist(),
            "oracle_true_value": true["true_value"].tolist(), "oracle_customer_slope": true["customer_slope"].tolist(),
            "oracle_merchant_slope": true["merchant_slope"].tolist()}


def split_table(runs: list, ratios) -> dict:
    """How much the split between the sides is worth (normalized scale): per seed, the customer share
    of the joint and independent policies and of the best scanned split, the true value at the
    joint's and the independent's share (interpolated on the scan) and the worst scanned share, each
    relative to the best, for the model and for the true curves."""
    print("\nSplit of the joint policy's predicted total between customers and merchants (normalized scale): customer "
          "share chosen by joint / independent / best of the scan on the model's frontiers, and the true value over "
          f"shares {SHARES[0]:g}..{SHARES[-1]:g} (scan; joint and independent interpolated on it) relative to its best")
    print(f"{'B':>4s}{'seed':>6s}{'joint s':>9s}{'indep s':>9s}{'best s':>8s}{'joint/best':>11s}{'indep/best':>11s}"
          f"{'worst/best':>11s}{'oracle: joint s':>16s}{'worst/best':>11s}   predicted slope c / m at s={SHARES[1]:g} | {SHARES[-1]:g}")
    out: dict = {}
    for ratio in ratios:
        key = str(ratio)
        spreads = []
        for r in runs:
            sp = r["joint"]["split"][key]
            tv, otv = np.asarray(sp["true_value"]), np.asarray(sp["oracle_true_value"])
            spreads.append(float(tv.min() / tv.max()))
            at_j, at_i = (float(np.interp(sp[k], SHARES, tv) / tv.max()) for k in ("joint_share", "independent_share"))
            print(f"{ratio:4.0f}{r['seed']:6d}{sp['joint_share']:9.3f}{sp['independent_share']:9.3f}"
                  f"{SHARES[int(np.argmax(tv))]:8.2f}{at_j:11.4f}{at_i:11.4f}{tv.min() / tv.max():11.4f}"
                  f"{sp['oracle_joint_share']:16.3f}{otv.min() / otv.max():11.4f}   "
                  f"{sp['customer_slope'][1]:.5f} / {sp['merchant_slope'][1]:.5f} | "
                  f"{sp['customer_slope'][-1]:.5f} / {sp['merchant_slope'][-1]:.5f}")
        out[key] = {"worst_over_best_per_seed": spreads}
    return out


def fig4(seed, out, graph, camp, ct, trained) -> None:
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


def pd_index(ids):
    import pandas as pd

    return pd.Index(ids)


def epoch_time(args, workdir: Path) -> dict:
    """Seconds per full-graph training epoch (forward + backward + step) of GNN+hazard."""
    request = SimulationRequest("big", workdir, 7, args.epoch_users, 0, REFERENCE_START)
    d = request.campaign_dir
    t0 = time.perf_counter()
    simulate_bipartite(request, merchants=args.epoch_merchants,
                       edges_per_customer=args.epoch_edges_per_customer)
    t_sim = time.perf_counter() - t0
    camp = load_bipartite_campaign(d)
    t0 = time.perf_counter()
    graph = build_graph(camp.edges, camp.customers, camp.merchants)
    t_build = time.perf_counter() - t0
    cfg = GraphTrainConfig(encoder="gnn", head="hazard", max_epochs=args.epochs_timed, patience=10**6)
    m = train_graph_model(GraphData(graph, camp.customer_events, camp.merchant_events, camp.incentives, camp.commissions), cfg, save=False,
                          log=lambda s: print("   ", s, flush=True))
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


def model_tables(report: dict, runs: list, args) -> None:
    """Tables 2-3, the per-level curves and Fig. 4 (full run only); fills `report`."""
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


JOINT_KINDS = ("joint", "independent", "independent_same_ratio")


def joint_table(runs: list, ratios) -> dict:
    """Per seed and seed-averaged true values of joint vs independent (same total predicted budget)."""
    summary: dict = {}
    for scale, title in (("normalized", "merchants normalized by previous shares (paper Eq. 11/16 scale)"),
                         ("raw", "merchants as raw sharing counts, costs in money")):
        print(f"\nJoint vs independent at the same total predicted budget, {title}; GNN+hazard coefficients, true values")
        print(f"{'B':>4s}{'seed':>6s}{'joint':>11s}{'indep.':>11s}{'joint/ind':>10s}{'pred cost J':>13s}"
              f"{'pred cost I':>13s}{'true cost J':>13s}{'true cost I':>13s}{'cust share I':>13s}{'same-ratio':>11s}"
              f"{'oracle J/I':>11s}")
        summary[scale] = {}
        for ratio in ratios:
            key = str(ratio)
            rows = [r["joint"][scale][key] for r in runs]
            for r, row in zip(runs, rows):
                pj, pi, ps = (row[f"predicted_{k}"] for k in JOINT_KINDS)
                print(f"{ratio:4.0f}{r['seed']:6d}{pj['true_value']:11.1f}{pi['true_value']:11.1f}"
                      f"{pj['true_value'] / pi['true_value']:10.4f}{pj['predicted_cost']:13.1f}{pi['predicted_cost']:13.1f}"
                      f"{pj['true_cost']:13.1f}{pi['true_cost']:13.1f}{pi['customer_share']:13.3f}{ps['true_value']:11.1f}"
                      f"{row['oracle_joint']['true_value'] / row['oracle_independent']['true_value']:11.4f}")
            col = {f"{s}_{k}": [row[f"{s}_{k}"] for row in rows] for s in ("predicted", "oracle") for k in JOINT_KINDS}
            jv = [x["true_value"] for x in col["predicted_joint"]]
            iv = [x["true_value"] for x in col["predicted_independent"]]
            sv = [x["true_value"] for x in col["predicted_independent_same_ratio"]]
            oj = [x["true_value"] for x in col["oracle_joint"]]
            oi = [x["true_value"] for x in col["oracle_independent"]]
            pjc = [x["predicted_cost"] for x in col["predicted_joint"]]
            pic = [x["predicted_cost"] for x in col["predicted_independent"]]
            tjc = [x["true_cost"] for x in col["predicted_joint"]]
            tic = [x["true_cost"] for x in col["predicted_independent"]]
            print(f"{ratio:4.0f}{'mean':>6s}{np.mean(jv):11.1f}{np.mean(iv):11.1f}{np.mean(jv) / np.mean(iv):10.4f}"
                  f"{np.mean(pjc):13.1f}{np.mean(pic):13.1f}{np.mean(tjc):13.1f}{np.mean(tic):13.1f}{'':>13s}"
                  f"{np.mean(sv):11.1f}{np.mean(oj) / np.mean(oi):11.4f}")
            summary[scale][key] = {
                "joint": float(np.mean(jv)), "independent": float(np.mean(iv)),
                "joint_over_independent": float(np.mean(jv) / np.mean(iv)),
                "joint_over_independent_per_seed": [float(a / b) for a, b in zip(jv, iv)],
                "joint_ge_independent_all_seeds": bool(all(a >= b for a, b in zip(jv, iv))),
                "independent_same_ratio": float(np.mean(sv)),
                "predicted_cost_joint": float(np.mean(pjc)), "predicted_cost_independent": float(np.mean(pic)),
                "true_cost_joint": float(np.mean(tjc)), "true_cost_independent": float(np.mean(tic)),
                "oracle_joint": float(np.mean(oj)), "oracle_independent": float(np.mean(oi)),
            }
    return summary


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
    p.add_argument("--joint-only", action="store_true",
                   help="train GNN+hazard only (same config) and run only joint vs independent (no epoch timing)")
    p.add_argument("--merchant-exponent", type=float, default=0.8,
                   help="simulator: merchants' expected sharing count is v (1 + s (c/100)^e)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--results", type=Path, default=Path(__file__).parent / "results", help="folder of the uplift plot")
    args = p.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _results import Recorder

    rec = Recorder("gnn_hazard")
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
        if not args.skip_epoch_time and not args.joint_only:
            print("timing one epoch at the large scale ...", flush=True)
            report["epoch_time"] = epoch_time(args, tmp)

    if not args.joint_only:
        png = runs[0].pop("uplift_png")
        (args.results / "gnn_hazard_uplift_quintiles.png").write_bytes(png)
        for r in runs[1:]:
            r.pop("uplift_png")
    report["runs"] = runs
    if not args.joint_only:
        model_tables(report, runs, args)
    report["joint_summary"] = joint_table(runs, args.ratios)
    report["split_summary"] = split_table(runs, args.ratios)

    if "epoch_time" in report:
        e = report["epoch_time"]
        print(f"\nEpoch time: {e['customers']} customers + {e['merchants']} merchants + {e['edges']} edges, "
              f"{e['torch_threads']} threads: mean {e['epoch_seconds_mean']}s, max {e['epoch_seconds_max']}s "
              f"per full-graph epoch (build_graph {e['build_graph_seconds']}s)")

    report["must_show"] = {"joint_ge_independent": {
        scale: all(v["joint"] >= v["independent"] for v in rows.values()) for scale, rows in report["joint_summary"].items()}}
    if not args.joint_only:
        t2, t3 = report["table2"], report["table3"]
        report["must_show"] |= {
            "gnn_beats_dnn_and_dnn_h_auc_c": t2["auc_c"]["GNN+hazard"] > max(t2["auc_c"]["DNN-H"], t2["auc_c"]["DNN"]),
            "gnn_beats_dnn_and_dnn_h_mae_c": t2["mae_c"]["GNN+hazard"] < min(t2["mae_c"]["DNN-H"], t2["mae_c"]["DNN"]),
            "gnn_beats_dnn_and_dnn_h_mae_c_truth": t2["mae_c_truth"]["GNN+hazard"] < min(t2["mae_c_truth"]["DNN-H"], t2["mae_c_truth"]["DNN"]),
            "hazard_beats_cox_and_sbbm_mae_c": t3["mae_c"]["GNN+hazard"] < min(t3["mae_c"]["SBBM"], t3["mae_c"]["Cox"]),
            "hazard_beats_cox_and_sbbm_mae_c_truth": t3["mae_c_truth"]["GNN+hazard"] < min(t3["mae_c_truth"]["SBBM"], t3["mae_c_truth"]["Cox"]),
            "epoch_le_60s": report.get("epoch_time", {}).get("epoch_seconds_max", float("nan")) <= 60,
        }
    print("\nmust-show:", json.dumps(report["must_show"]))
    headline = {f"joint / independent true value, {scale}, ratio budget {r}": round(row["joint_over_independent"], 4)
                for scale, rows in report["joint_summary"].items() for r, row in rows.items()}
    if not args.joint_only:
        headline |= {f"AUC_c {m}": round(v, 3) for m, v in report["table2"]["auc_c"].items()}
    rec.write(report, headline=headline, tag="joint" if args.joint_only else None)
    print(json.dumps({k: report[k] for k in ("table2", "table3", "joint_summary", "must_show") if k in report}
                     | ({"epoch_time": report["epoch_time"]} if "epoch_time" in report else {}), default=float))


if __name__ == "__main__":
    main()

"""Benchmark of the MCKP allocator (promo_assets.allocation) against scipy's HiGHS.

Prints a readable table, then one JSON object with every figure measured.

1. single budget, N in {10k, 50k, 200k} x K = 10, concave and non-concave (S-shaped) monotone
   response curves, cost = incentive x response (the 'redeemed' rule): our solve() vs
   scipy.optimize.linprog(method="highs-ipm") on the same LP (sparse constraint matrices);
   relative objective gap of the LP values and the wall-time ratio (both in the same run);
2. N = 1,000,000 and 10,000,000 x K = 16 (float32 inputs), ours alone, each in a fresh
   subprocess: solve wall/CPU time and peak RSS (os.wait4 rusage of that child), with the input
   arrays' size and the RSS before the solve reported separately;
3. three budgets (three cost types) at 50k x 10: solve_multi vs HiGHS-IPM.

Usage: python benchmarks/mckp.py [--quick] [--sizes 10000,50000] [--big-sizes 1000000]
       [--no-highs] [--repeat 3] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy
import scipy.sparse as sp
from scipy.optimize import linprog

from promo_assets.allocation import solve, solve_multi


def make_instance(n: int, k: int, kind: str, seed: int = 0, dtype=np.float64):
    """values, costs (n x k): response curves over incentives x_j = j/(k-1) in [0, 1].

    concave: v = a + b(1 - exp(-s x)); s-shaped: v = a + b / (1 + exp(-s (x - x0))) (convex then
    concave, so many points fall off the hull); cost = x * v (free level 0).
    Generated in chunks straight into the output dtype (no float64 copy of a float32 instance).
    """
    rng = np.random.default_rng(seed)
    v = np.empty((n, k), dtype=dtype)
    c = np.empty((n, k), dtype=dtype)
    x = np.linspace(0.0, 1.0, k)
    step = 1 << 18
    for s in range(0, n, step):
        m = min(step, n - s)
        a = rng.uniform(0.05, 0.5, (m, 1))
        b = rng.uniform(0.0, 0.4, (m, 1))
        if kind == "concave":
            sl = rng.uniform(1.0, 8.0, (m, 1))
            vv = a + b * (1.0 - np.exp(-sl * x))
        elif kind == "s-shaped":
            x0 = rng.uniform(0.1, 0.9, (m, 1))
            sl = rng.uniform(5.0, 20.0, (m, 1))
            vv = a + b / (1.0 + np.exp(-sl * (x - x0)))
        else:
            raise ValueError(f"unknown kind {kind!r}")
        v[s : s + m] = vv
        c[s : s + m] = x * vv
    return v, c


def budget_of(c, share=0.3) -> float:
    """A budget between the cheapest (0) and the most expensive allocation."""
    return share * float(c[:, -1].sum(dtype=np.float64))


def highs_lp(v, a_rows, b_rows):
    n, k = v.shape
    a_eq = sp.csr_matrix(
        (np.ones(n * k), np.arange(n * k), np.arange(0, n * k + 1, k)), shape=(n, n * k)
    )
    a_ub = sp.csr_matrix(np.vstack([np.asarray(a, np.float64).reshape(-1) for a in a_rows]))
    t0, p0 = time.perf_counter(), time.process_time()
    res = linprog(
        -np.asarray(v, np.float64).reshape(-1),
        A_ub=a_ub,
        b_ub=np.asarray(b_rows, np.float64),
        A_eq=a_eq,
        b_eq=np.ones(n),
        bounds=(0, None),
        method="highs-ipm",
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - p0
    if res.status != 0:
        raise RuntimeError(f"HiGHS failed: {res.message}")
    return -float(res.fun), wall, cpu


def timed(fn, repeat):
    best_wall = best_cpu = float("inf")
    out = None
    for _ in range(repeat):
        t0, p0 = time.perf_counter(), time.process_time()
        out = fn()
        best_wall = min(best_wall, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - p0)
    return out, best_wall, best_cpu


def single_budget(sizes, repeat, with_highs, log):
    rows = []
    for n in sizes:
        for kind in ("concave", "s-shaped"):
            v, c = make_instance(n, 10, kind, seed=n)
            b = budget_of(c)
            a, wall, cpu = timed(lambda v=v, c=c, b=b: solve(v, c, b), repeat)
            row = {
                "n": n, "k": 10, "curve": kind, "dtype": "float64", "budget": b,
                "ours_wall_s": wall, "ours_cpu_s": cpu, "ours_lp_value": a.lp_response,
                "ours_dual_bound": a.dual_bound, "ours_value": a.response, "lambda_": a.lambda_,
                "method": a.info.get("method"), "active_users": a.info.get("active_users"),
            }
            if with_highs:
                ref, hw, hc = highs_lp(v, [c], [b])
                row.update(
                    highs_lp_value=ref, highs_wall_s=hw, highs_cpu_s=hc,
                    rel_gap_lp=abs(a.lp_response - ref) / abs(ref),
                    rel_gap_dual=abs(a.dual_bound - ref) / abs(ref),
                    speedup_wall=hw / wall, speedup_cpu=hc / cpu,
                )
            log(row)
            rows.append(row)
    return rows


def multi_budget(n, repeat, with_highs, log):
    rng = np.random.default_rng(11)
    v, c1 = make_instance(n, 10, "s-shaped", seed=5)
    c2 = c1 * rng.uniform(0.2, 1.0, (n, 1))  # e.g. a merchant-funded share of the cost
    c3 = np.sort(rng.uniform(0.0, 1.0, (n, 10)), axis=1) * 0.1  # e.g. an inventory-type cost
    b = [budget_of(c1, 0.3), budget_of(c2, 0.25), float(0.5 * c3.mean(axis=1).sum())]
    r, wall, cpu = timed(lambda: solve_multi(v, [c1, c2, c3], b), repeat)
    row = {
        "n": n, "k": 10, "budgets": 3, "ours_wall_s": wall, "ours_cpu_s": cpu,
        "ours_lp_value": r.lp_response, "ours_dual_bound": r.dual_bound, "ours_value": r.response,
        "multipliers": [float(x) for x in r.multipliers], "rounds": r.info["rounds"],
        "lp_users": r.info["lp_users"], "converged": r.info["converged"],
    }
    if with_highs:
        ref, hw, hc = highs_lp(v, [c1, c2, c3], b)
        row.update(
            highs_lp_value=ref, highs_wall_s=hw, highs_cpu_s=hc,
            rel_gap_lp=abs(r.lp_response - ref) / abs(ref),
            rel_gap_dual=abs(r.dual_bound - ref) / abs(ref),
            speedup_wall=hw / wall,
        )
    log(row)
    return row


def _child(n: int, k: int, kind: str) -> None:
    """Run in a fresh process: generate float32 inputs, solve once, print JSON."""
    import resource

    v, c = make_instance(n, k, kind, seed=n + 1, dtype=np.float32)
    b = budget_of(c)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0, p0 = time.perf_counter(), time.process_time()
    a = solve(v, c, b)
    wall, cpu = time.perf_counter() - t0, time.process_time() - p0
    print(json.dumps({
        "n": n, "k": k, "curve": kind, "dtype": "float32",
        "input_bytes": int(v.nbytes + c.nbytes), "rss_before_solve_bytes": int(rss_before),
        "solve_wall_s": wall, "solve_cpu_s": cpu, "lp_value": a.lp_response,
        "dual_bound": a.dual_bound, "value": a.response, "lambda_": a.lambda_,
        "rel_gap_integral": a.relative_gap, "method": a.info.get("method"),
        "active_users": a.info.get("active_users"),
    }))


_parent_rss_note = None


def big(sizes, log):
    global _parent_rss_note
    import resource

    _parent_rss_note = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    rows = []
    for n in sizes:
        for kind in ("concave", "s-shaped"):
            proc = subprocess.Popen(
                [sys.executable, __file__, "--_child", str(n), "16", kind],
                stdout=subprocess.PIPE, text=True,
            )
            out = proc.stdout.read()
            _, status, ru = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode != 0:
                raise RuntimeError(f"child for n={n} {kind} failed ({proc.returncode})")
            row = json.loads(out.strip().splitlines()[-1])
            row["peak_rss_bytes"] = int(ru.ru_maxrss * 1024)  # Linux: KiB
            row["peak_rss_over_inputs_bytes"] = row["peak_rss_bytes"] - row["input_bytes"]
            row["solve_rss_increase_bytes"] = row["peak_rss_bytes"] - row["rss_before_solve_bytes"]
            log(row)
            rows.append(row)
    return rows


def table(result) -> str:
    lines = ["single budget vs HiGHS-IPM (K=10, float64; wall s, best of repeats for ours)",
             f"{'N':>9} {'curve':>9} {'ours s':>8} {'HiGHS s':>9} {'speedup':>8} "
             f"{'rel gap LP':>11} {'active':>8}"]
    for r in result["single_budget"]:
        lines.append(
            f"{r['n']:>9} {r['curve']:>9} {r['ours_wall_s']:>8.4f} "
            f"{r.get('highs_wall_s', float('nan')):>9.2f} {r.get('speedup_wall', float('nan')):>8.0f} "
            f"{r.get('rel_gap_lp', float('nan')):>11.2e} {str(r.get('active_users') or '-'):>8}"
        )
    if result.get("big"):
        lines += ["", "large instances, ours alone (K=16, float32 inputs, one fresh process each)",
                  f"{'N':>10} {'curve':>9} {'solve s':>8} {'cpu s':>7} {'peak RSS GB':>12} "
                  f"{'inputs GB':>10} {'RSS before':>11} {'solve +GB':>10} {'active':>8}"]
        for r in result["big"]:
            lines.append(
                f"{r['n']:>10} {r['curve']:>9} {r['solve_wall_s']:>8.3f} {r['solve_cpu_s']:>7.3f} "
                f"{r['peak_rss_bytes'] / 1e9:>12.3f} {r['input_bytes'] / 1e9:>10.3f} "
                f"{r['rss_before_solve_bytes'] / 1e9:>11.3f} "
                f"{r['solve_rss_increase_bytes'] / 1e9:>10.3f} {str(r.get('active_users')):>8}"
            )
    m = result.get("multi_budget")
    if m:
        lines += ["", "three budgets vs HiGHS-IPM (K=10)",
                  f"N={m['n']} ours {m['ours_wall_s']:.3f}s  HiGHS {m.get('highs_wall_s', float('nan')):.2f}s  "
                  f"rel gap LP {m.get('rel_gap_lp', float('nan')):.2e}  rounds {m['rounds']}"]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes only (smoke test)")
    p.add_argument("--sizes", default=None, help="comma-separated N for the HiGHS comparison")
    p.add_argument("--big-sizes", default=None, help="comma-separated N for the K=16 runs")
    p.add_argument("--multi-n", type=int, default=None)
    p.add_argument("--no-highs", action="store_true")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--_child", nargs=3, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a._child:
        _child(int(a._child[0]), int(a._child[1]), a._child[2])
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _results import Recorder

    rec = Recorder("mckp", argv)
    parse = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    sizes = parse(a.sizes) if a.sizes is not None else ([2_000, 10_000] if a.quick else [10_000, 50_000, 200_000])
    big_sizes = (parse(a.big_sizes) if a.big_sizes is not None
                 else ([200_000] if a.quick else [1_000_000, 10_000_000]))
    multi_n = a.multi_n if a.multi_n is not None else (5_000 if a.quick else 50_000)
    log = lambda row: print(json.dumps(row), file=sys.stderr, flush=True)  # noqa: E731
    result = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "numpy": np.__version__,
                    "scipy": scipy.__version__},
        "notes": "wall times are best of --repeat for ours, one run for HiGHS; the machine may "
                 "be shared, CPU times are given too. LP values compared (not the rounded one).",
    }
    # the large runs go first, while this process is small: Linux carries the parent's RSS
    # high-water mark into a forked child's ru_maxrss, so a child forked after HiGHS ran would
    # report the parent's peak instead of its own
    result["big"] = big(big_sizes, log)
    result["single_budget"] = single_budget(sizes, a.repeat, not a.no_highs, log)
    result["multi_budget"] = multi_budget(multi_n, a.repeat, not a.no_highs, log) if multi_n else None
    result["parent_rss_at_first_fork_bytes"] = _parent_rss_note
    print(table(result))
    print(json.dumps(result))
    headline = {}
    for r in result["single_budget"]:
        if "rel_gap_lp" in r:
            headline[f"N={r['n']} x 10, {r['curve']}: relative gap to HiGHS LP"] = float(f"{r['rel_gap_lp']:.2e}")
            headline[f"N={r['n']} x 10, {r['curve']}: speed-up over HiGHS-IPM"] = round(r["speedup_wall"])
    for r in result["big"]:
        headline[f"N={r['n']:,} x 16, {r['curve']}: solve seconds / peak RSS GB"] = (
            f"{r['solve_wall_s']:.2f} s / {r['peak_rss_bytes'] / 1e9:.2f} GB")
    rec.write(result, headline=headline, tag="quick" if a.quick else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`promo run` with PROMO_DASK_SCHEDULER (issue #18): the same allocation as in-process on the demo campaign."""

from __future__ import annotations

import dagster as dg
import duckdb
import pytest

from promo_assets.allocation.chunked import chunk_sides
from promo_assets.cli.main import main
from promo_assets.models import registry
from promo_assets.simulation import REFERENCE_START
from promo_assets.store import models as models_store

MODELS = ("s_learner", "lgbm_s")
STEPS = ("response_coefficients", "budget_dual", "allocation", "policy_evaluation")


def rows_by_run(con, table: str, columns: str) -> dict[str, set]:
    out: dict[str, set] = {}
    for run_id, *rest in con.execute(f"SELECT run_id, {columns} FROM {table}").fetchall():
        out.setdefault(run_id, set()).add(tuple(rest))
    return out


@pytest.mark.slow
def test_promo_run_with_dask_allocates_as_in_process(promo_env, monkeypatch):
    """The demo campaign through `promo run` in-process, then every model's scoring, λ*, allocation and
    evaluation again on a LocalCluster of 2 worker processes (PROMO_DASK_SCHEDULER=local:2) from the same
    fitted models: the same λ*, the same level for every user and budget, the same evaluation."""
    from promo_assets.definitions import build_defs

    # two quick models (gnn_hazard stays: the graph assets extend its chain; it skips on the demo),
    # one epoch: the comparison is between two ways of running the same fitted models; 1,500 users make
    # two chunks on Dask (at least 1,000 users a chunk), so λ* is summed over chunks there
    monkeypatch.setattr(registry, "BUILTIN", {m: registry.BUILTIN[m] for m in (*MODELS, "gnn_hazard")})
    monkeypatch.setenv("PROMO_MAX_EPOCHS", "1")
    assert main(["simulate", "--preset", "demo", "--campaign", "demo", "--days", "4", "--users", "1500",
                 "--seed", "1", "--start", REFERENCE_START.isoformat()]) == 0
    assert main(["run", "--no-progress"]) == 0
    monkeypatch.setenv("PROMO_DASK_SCHEDULER", "local:2")
    k = 6  # the demo's incentive levels
    keys = [dg.AssetKey([m, step]) for m in MODELS for step in STEPS]
    job = build_defs().resolve_implicit_global_asset_job_def().get_subset(asset_selection=set(keys))
    result = job.execute_in_process(partition_key="demo", instance=dg.DagsterInstance.get())
    assert result.success
    instance = dg.DagsterInstance.get()
    for m in MODELS:
        meta = instance.get_latest_materialization_event(dg.AssetKey([m, "budget_dual"])).asset_materialization.metadata
        assert meta["dask_scheduler"].value == "local:2"
    with duckdb.connect(str(promo_env["warehouse"]), read_only=True) as con:
        allocation = rows_by_run(con, "allocation", "model, model_version, budget_per_capita, user_id, level")
        duals = rows_by_run(con, "budget_dual", "model, model_version, budget_per_capita, lambda_")
        shares = {(run, m, b): (s, lam, version) for run, m, b, s, lam, version in con.execute(
            "SELECT run_id, model, budget_per_capita, tie_share, lambda_, model_version FROM budget_dual").fetchall()}
        evaluation = rows_by_run(con, "policy_evaluation", "model, budget_per_capita, eom_value, true_value")
        coefficients = {m: models_store.coefficient_arrays(con, "demo", m, version, "population", k)[1:]
                        for m, version in {(m, version) for (_, m, _), (_, _, version) in shares.items()}}
    dask_run = result.run_id
    (plain_run,) = [r for r in allocation if r != dask_run]
    assert len(allocation[dask_run]) == len(MODELS) * 1500 * 3  # every population user x 3 budgets
    assert allocation[dask_run] == allocation[plain_run]
    assert duals[dask_run] == duals[plain_run]  # λ* to the last bit
    # The tie share (budget - base cost) / extra cost is not compared to the last bit, for two reasons:
    # - its two float64 sums run over the users in another order on Dask (chunk by chunk). Summing n terms
    #   in any order errs by at most γ_n Σ|x_i|, γ_n = n u / (1 - n u), u = 2^-53 (Higham, Accuracy and
    #   Stability of Numerical Algorithms, §4.2);
    # - a torch model scores in float32, one pass in process and chunk by chunk on Dask, and BLAS orders
    #   a layer's products by the batch's shape: a user's cost can differ by the float32 forward error,
    #   at most γ_F |c| with F the network's summed fan-ins, under 2^8 for these nets: 2^8 · 2^-24 = 2^-16.
    #   (Seen: 3.1e-8 on the s_learner at budget 0.5 of seed 1 started 2026-11-30, levels and λ* equal.)
    # Each path's share then errs by at most (γ_n + 2^-16) (base + share · extra) / extra, the two differ
    # by at most twice that; the levels and λ* above must be, and are, identical.
    for (run, m, b), (share, lam, _) in shares.items():
        if run != dask_run:
            continue
        sides = chunk_sides(*coefficients[m], lam, levels=False)
        base, extra, n = sides["base_cost"], float(sides["extra"].sum()), sides["n"]
        relative = n * 2.0 ** -53 / (1 - n * 2.0 ** -53) + 2.0 ** -16
        bound = 2 * relative * (abs(base) + share * extra) / extra if extra > 0 else 0.0
        assert abs(share - shares[(plain_run, m, b)][0]) <= bound, (m, b, share, shares[(plain_run, m, b)][0], bound)
    # the plain run also holds the leaderboard (`promo run` materializes it with the chains): its
    # random reference rows are not the models' evaluation
    assert evaluation[dask_run] == {row for row in evaluation[plain_run] if row[0] != "random"}
    assert {row[0] for row in evaluation[dask_run]} == set(MODELS)

"""`promo run` with PROMO_DASK_SCHEDULER (issue #18): the same allocation as in-process on the demo campaign."""

from __future__ import annotations

import dagster as dg
import duckdb
import pytest

from promo_assets.cli.main import main
from promo_assets.models import registry

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
                 "--seed", "1"]) == 0
    assert main(["run", "--no-progress"]) == 0
    monkeypatch.setenv("PROMO_DASK_SCHEDULER", "local:2")
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
        shares = dict(con.execute("SELECT run_id || model || budget_per_capita, tie_share FROM budget_dual").fetchall())
        evaluation = rows_by_run(con, "policy_evaluation", "model, budget_per_capita, eom_value, true_value")
    dask_run = result.run_id
    (plain_run,) = [r for r in allocation if r != dask_run]
    assert len(allocation[dask_run]) == len(MODELS) * 1500 * 3  # every population user x 3 budgets
    assert allocation[dask_run] == allocation[plain_run]
    assert duals[dask_run] == duals[plain_run]  # λ* to the last bit
    # (budget - base cost) / extra cost, summed over chunks in another order: equal to 1e-9 (seen: 2e-12)
    for key in [k for k in shares if k.startswith(dask_run)]:
        assert shares[key] == pytest.approx(shares[key.replace(dask_run, plain_run)], rel=1e-9, abs=1e-12)
    # the plain run also holds the leaderboard (`promo run` materializes it with the chains): its
    # random reference rows are not the models' evaluation
    assert evaluation[dask_run] == {row for row in evaluation[plain_run] if row[0] != "random"}
    assert {row[0] for row in evaluation[dask_run]} == set(MODELS)

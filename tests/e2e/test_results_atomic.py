"""Results are written atomically and by run (issue #12 items 5, 7, 11-budget): a failed or killed
run leaves none of its rows, retention keeps PROMO_KEEP_RUNS runs, `promo report` shows the latest
succeeded run's evaluation of the budgets in campaign.yaml now (`--history` the rest), and an
infeasible budget is skipped alone."""

from __future__ import annotations

import datetime as dt
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg
import duckdb
import pandas as pd
import pytest
import yaml

from promo_assets.store import results
from promo_assets.config import settings
from promo_assets.store import warehouse
from promo_assets.cli.main import main
from tests.conftest import train_only
from promo_assets.simulation import REFERENCE_START

START = REFERENCE_START
#: the models the campaign of the end-to-end tests trains (results bookkeeping does not depend on which)
MODELS = ("lgbm_s", "lgbm_s_mono")
RUN_TABLES_WITH_ROWS = ("model_registry", "budget_dual", "allocation", "policy_evaluation")


# --------------------------------------------------------------------------------------------
# warehouse.transaction / registered (no Dagster)


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()], ids=["exception", "interrupt"])
def test_transaction_rolls_back_every_write_of_the_block(error):
    con = duckdb.connect()
    con.execute("CREATE TABLE t (a INTEGER)")
    con.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(type(error)):
        with warehouse.transaction(con):
            con.execute("INSERT INTO t VALUES (2)")
            con.execute("DELETE FROM t WHERE a = 1")
            raise error
    assert con.execute("SELECT a FROM t").fetchall() == [(1,)]
    with warehouse.transaction(con):
        con.execute("INSERT INTO t VALUES (3)")
    assert con.execute("SELECT a FROM t ORDER BY a").fetchall() == [(1,), (3,)]


def test_dataframes_are_read_only_when_registered(tmp_path):
    with warehouse.connect(tmp_path / "w.duckdb") as con:
        frame_df = pd.DataFrame({"a": [7]})  # a local named like the frames.sql views
        with pytest.raises(duckdb.CatalogException, match="frame_df"):
            con.execute("SELECT * FROM frame_df")  # no replacement scan of Python locals
        with warehouse.registered(con, "frame_df", frame_df):
            assert con.execute("SELECT a FROM frame_df").fetchall() == [(7,)]
        with pytest.raises(duckdb.CatalogException):
            con.execute("SELECT * FROM frame_df")


# --------------------------------------------------------------------------------------------
# results: run bookkeeping and retention (no Dagster)


def _write_run(con, campaign: str, run_id: str, rows: int = 2) -> None:
    results.start(con, campaign, run_id)
    for i in range(rows):
        con.execute("INSERT INTO allocation VALUES (?, 'm', 'v1', 1.0, ?, 0, 0.0, ?, now())", [campaign, f"u{i}", run_id])


def _runs_in(con, table: str, campaign: str = "c") -> list[str]:
    return [r[0] for r in con.execute(
        f"SELECT DISTINCT run_id FROM {table} WHERE campaign = ? ORDER BY run_id", [campaign]).fetchall()]


@pytest.mark.parametrize("keep, kept", [(1, ["r4", "r5"]), (2, ["r4", "r5"]), (3, ["r3", "r4", "r5"]),
                                        (10, ["r0", "r1", "r2", "r3", "r4", "r5"])])
def test_retention_keeps_the_last_runs(tmp_path, keep, kept):
    with warehouse.connect(tmp_path / "w.duckdb") as con:
        for i in range(5):  # r0 … r4 succeeded, one after the other
            with warehouse.transaction(con):
                _write_run(con, "c", f"r{i}")
            with warehouse.transaction(con):
                results.finish(con, "c", f"r{i}", succeeded=True)
        _write_run(con, "other", "o1")  # another campaign is never touched
        with warehouse.transaction(con):
            _write_run(con, "c", "r5")
            results.retain(con, "c", "r5", ["allocation"], keep)
        assert _runs_in(con, "allocation") == kept
        assert _runs_in(con, "allocation", "other") == ["o1"]


def test_retention_spares_runs_in_progress_and_drops_rows_without_run(tmp_path):
    with warehouse.connect(tmp_path / "w.duckdb") as con:
        for run_id in ("old", "new"):
            with warehouse.transaction(con):
                _write_run(con, "c", run_id)
                results.finish(con, "c", run_id, succeeded=True)
        with warehouse.transaction(con):
            _write_run(con, "c", "busy")  # another run of the campaign, still going
        con.execute("INSERT INTO allocation VALUES ('c', 'm', 'v1', 1.0, 'u9', 0, 0.0, 'legacy', now())")
        with warehouse.transaction(con):
            _write_run(con, "c", "mine")
            results.retain(con, "c", "mine", ["allocation"], keep=2)
        assert _runs_in(con, "allocation") == ["busy", "mine", "new"]


def test_a_failed_run_loses_every_row_and_a_succeeded_one_keeps_them(tmp_path):
    with warehouse.connect(tmp_path / "w.duckdb") as con:
        for run_id in ("good", "bad"):
            with warehouse.transaction(con):
                _write_run(con, "c", run_id)
                con.execute("INSERT INTO budget_dual VALUES ('c', 'm', 'v1', 1.0, 0.1, 1, 1, 1, 2, ?, now(), 0.0)", [run_id])
                con.execute("INSERT INTO model_registry (campaign, model, model_version, trained_at, run_id) "
                            "VALUES ('c', 'm', ?, now(), ?)", [f"v-{run_id}", run_id])
                con.execute("INSERT INTO response_coefficients VALUES ('c', 'm', ?, 'population', 'u', 0, 1, 0, now())",
                            [f"v-{run_id}"])
        with warehouse.transaction(con):
            results.finish(con, "c", "good", succeeded=True)
            results.finish(con, "c", "bad", succeeded=False)
            results.finish(con, "c", "bad", succeeded=True)  # already marked: no effect
        for table in ("allocation", "budget_dual", "model_registry"):
            assert _runs_in(con, table) == ["good"], table
        assert con.execute("SELECT DISTINCT model_version FROM response_coefficients").fetchall() == [("v-good",)]
        assert dict(con.execute("SELECT run_id, status FROM result_runs").fetchall()) == {"good": "succeeded", "bad": "failed"}


@pytest.mark.hostile
@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", "3 runs"],
                         ids=["error-zero", "error-negative", "error-word", "error-fraction", "error-unit"])
def test_bad_keep_runs_setting_is_refused(monkeypatch, value):
    monkeypatch.setenv("PROMO_KEEP_RUNS", value)
    with pytest.raises(ValueError) as info:
        settings.keep_runs()
    assert "PROMO_KEEP_RUNS" in str(info.value) and repr(value) in str(info.value) and ">= 1" in str(info.value)


def test_keep_runs_default_and_value(monkeypatch):
    monkeypatch.delenv("PROMO_KEEP_RUNS", raising=False)
    assert settings.keep_runs() == 3
    monkeypatch.setenv("PROMO_KEEP_RUNS", "5")
    assert settings.keep_runs() == 5


# --------------------------------------------------------------------------------------------
# end to end through `promo run` / `promo report`


def _simulate(users: int = 250) -> None:
    assert main(["simulate", "--preset", "demo", "--campaign", "demo", "--days", "3", "--users", str(users),
                 "--seed", "1", "--start", START.isoformat()]) == 0


def _query(env, statement: str, params=None):
    with duckdb.connect(str(env["warehouse"]), read_only=True) as con:
        return con.execute(statement, params or []).fetchall()


def _run_ids(env) -> list[str]:
    return [r[0] for r in _query(env, "SELECT run_id FROM result_runs ORDER BY started_at")]


def _rows_of(env, run_id: str) -> dict[str, int]:
    return {t: _query(env, f"SELECT count(*) FROM {t} WHERE run_id = ?", [run_id])[0][0] for t in RUN_TABLES_WITH_ROWS}


def _budgets(env) -> list[float]:
    return yaml.safe_load((env["landing"] / "demo" / "campaign.yaml").read_text())["budget_per_capita"]


def _set_budgets(env, budgets: list[float]) -> None:
    path = env["landing"] / "demo" / "campaign.yaml"
    config = yaml.safe_load(path.read_text())
    config["budget_per_capita"] = budgets
    path.write_text(yaml.safe_dump(config))


def _failing_solver(monkeypatch, fail_at_call: int, action):
    """promo_assets.allocation.solve that calls `action()` on its `fail_at_call`-th call; returns
    the real one."""
    import promo_assets.allocation as allocation

    real, calls = allocation.solve, [0]

    def solve(*args, **kwargs):
        calls[0] += 1
        if calls[0] == fail_at_call:
            action()
        return real(*args, **kwargs)

    monkeypatch.setattr(allocation, "solve", solve)
    return real


KILL_SCRIPT = textwrap.dedent("""
    import os, sys
    import promo_assets.allocation.plan as plan
    real, calls = plan.decide_at_chunked, [0]
    def decide_at_chunked(*args, sink, **kwargs):
        calls[0] += 1
        def sink_then_die(*chunk):
            sink(*chunk)  # the chunk's allocation rows are written in the transaction, then
            if calls[0] == int(sys.argv[1]):
                os._exit(9)  # as kill -9: no cleanup, no rollback, no run status
        return real(*args, sink=sink_then_die, **kwargs)
    plan.decide_at_chunked = decide_at_chunked
    from promo_assets.cli.main import main
    main(["run", "--campaign", "demo", "--no-progress"])
""")


def _last_runs(env) -> tuple[str, str]:
    """(the model chains' run, the leaderboard's run) of the latest `promo run`: the same run, or
    two runs after a failed chain (the leaderboard then runs on its own)."""
    latest = "SELECT r.run_id FROM result_runs r WHERE EXISTS (SELECT 1 FROM {} t WHERE t.run_id = r.run_id) " \
             "ORDER BY r.started_at DESC LIMIT 1"
    return _query(env, latest.format("model_registry"))[0][0], _query(env, latest.format("leaderboard_entries"))[0][0]


def _status(env, run_id: str) -> str:
    return _query(env, "SELECT status FROM result_runs WHERE run_id = ?", [run_id])[0][0]


def _model_rows(env, run_id: str, model: str) -> int:
    return sum(_query(env, f"SELECT count(*) FROM {t} WHERE run_id = ? AND model = ?", [run_id, model])[0][0]
               for t in RUN_TABLES_WITH_ROWS)


def _first_run(paths) -> None:
    _simulate()
    train_only(paths["landing"] / "demo" / "campaign.yaml", MODELS)
    assert main(["run", "--no-progress"]) == 0


@pytest.fixture
def after_one_run(run_once, monkeypatch) -> dict:
    """The demo campaign (3 days, 250 users, the two LightGBM models of MODELS, PROMO_MAX_EPOCHS=1)
    after one `promo run`: run once for the module, each test gets its own fresh copy."""
    return run_once("atomic_first_run", _first_run, max_epochs="1").restore(monkeypatch)


@pytest.mark.slow
def test_failed_and_killed_runs_leave_no_rows_and_the_report_keeps_the_previous_run(after_one_run, monkeypatch, capsys):
    promo_env = after_one_run
    good, good_board = _last_runs(promo_env)
    assert good_board == good  # the chains and the leaderboard in one run
    before = _rows_of(promo_env, good)
    assert all(before.values()), before

    # an exception in the first model's allocation, after that model's budget_dual rows and its first
    # chunk of allocation rows were written: only that model's rows of the run are deleted (run
    # 'partial'); the other model's rows count
    import promo_assets.allocation.plan as plan

    real, calls = plan.decide_at_chunked, [0]

    def decide_at_chunked(*args, sink, **kwargs):
        calls[0] += 1

        def written_then_exploding(*chunk):
            sink(*chunk)
            if calls[0] == 1:
                raise RuntimeError("decision exploded in the first model's allocation")
        return real(*args, sink=written_then_exploding, **kwargs)

    monkeypatch.setattr(plan, "decide_at_chunked", decide_at_chunked)
    assert main(["run", "--no-progress"]) == 1
    err = capsys.readouterr().err
    failed_model = re.search(r"demo: (\w+)/allocation: decision exploded in the first model's allocation", err).group(1)
    (other,) = set(MODELS) - {failed_model}
    partial, board = _last_runs(promo_env)
    assert _status(promo_env, partial) == "partial" and _status(promo_env, board) == "succeeded" and board != partial
    assert _model_rows(promo_env, partial, failed_model) == 0  # its model_registry and budget_dual rows too
    for table in ("allocation", "policy_evaluation"):
        assert _query(promo_env, f"SELECT count(*) FROM {table} WHERE run_id = ? AND model = ?", [partial, other])[0][0] > 0
    assert _rows_of(promo_env, good) == before
    # the leaderboard took the failed model's last evaluation (the good run) and the other's new one
    entries = dict(_query(promo_env, "SELECT model, evaluation_run_id FROM leaderboard_entries WHERE run_id = ? "
                          "AND status = 'evaluated'", [board]))
    assert entries[failed_model] == good and entries[other] == partial
    monkeypatch.setattr(plan, "decide_at_chunked", real)
    assert main(["report", "--campaign", "demo"]) == 0
    out = capsys.readouterr().out
    assert board in out and all(re.search(rf"\b{m}\b", out) for m in MODELS)  # lgbm_s apart from lgbm_s_mono

    # kill -9 during the first allocation's transaction (a separate process)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                          os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, "1"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert proc.wait(timeout=600) == 9
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    killed = _run_ids(promo_env)[-1]
    assert killed not in (good, partial, board)
    assert _query(promo_env, "SELECT count(*) FROM allocation WHERE run_id = ?", [killed]) == [(0,)]  # rolled back
    assert _status(promo_env, killed) == "started"
    assert main(["report", "--campaign", "demo"]) == 0  # the dead run's budget_dual / models are not shown
    out = capsys.readouterr().out
    assert board in out and killed not in out

    # the dead run is marked failed and its warehouse-pool slot freed (what issue #12 item 4's run
    # monitoring does; done by hand here); the next run's first results write deletes its rows
    instance = dg.DagsterInstance.get()
    instance.report_run_failed(instance.get_run_by_id(killed))
    instance.event_log_storage.free_concurrency_slots_for_run(killed)
    assert main(["run", "--no-progress"]) == 0
    latest, latest_board = _last_runs(promo_env)
    assert _rows_of(promo_env, killed) == dict.fromkeys(RUN_TABLES_WITH_ROWS, 0)
    assert _status(promo_env, killed) == "failed"
    assert all(_rows_of(promo_env, latest).values())
    assert _rows_of(promo_env, good) == before  # PROMO_KEEP_RUNS=3 per model: still kept
    capsys.readouterr()
    assert main(["report", "--campaign", "demo"]) == 0
    out = capsys.readouterr().out
    assert latest_board in out and board not in out and "earlier run(s) kept" in out


@pytest.mark.slow
def test_retention_current_budgets_history_and_an_infeasible_budget(after_one_run, monkeypatch, capsys):
    promo_env = after_one_run
    monkeypatch.setenv("PROMO_KEEP_RUNS", "2")  # after the first run: one run holds nothing to drop yet
    old_budgets = _budgets(promo_env)
    first, first_board = _last_runs(promo_env)

    # new budgets; 0.25 is made infeasible for every model: its costs + 1 per user
    _set_budgets(promo_env, [0.25, 1.0, 2.0])
    import promo_assets.allocation.stored as stored

    real = stored.solve_chunked

    class Dearer:
        """The pipeline's streamed coefficients with every cost + 1."""

        def __init__(self, source):
            self.source, self.n_users, self.n_levels = source, source.n_users, source.n_levels

        def chunks(self):
            return self.source.chunks()

        def stream(self):
            for values, costs, ids in self.source.stream():
                yield values, costs + 1.0, ids

    def solve_chunked(source, budget, *args, **kwargs):
        return real(Dearer(source) if budget == 0.25 else source, budget, *args, **kwargs)

    monkeypatch.setattr(stored, "solve_chunked", solve_chunked)
    assert main(["run", "--no-progress"]) == 0  # the feasible budgets are solved, allocated and evaluated
    capsys.readouterr()
    second, second_board = _last_runs(promo_env)
    infeasible = _query(promo_env, "SELECT model, budget_per_capita, minimum_budget, message FROM infeasible_budget "
                        "WHERE run_id = ? ORDER BY model", [second])
    assert [(m, b) for m, b, _, _ in infeasible] == [(m, 0.25) for m in sorted(MODELS)]
    assert all(mb > 0.25 and "budget per capita 0.25" in msg and "minimum feasible budget" in msg
               for _, _, mb, msg in infeasible)
    for table in ("budget_dual", "allocation"):
        assert _query(promo_env, f"SELECT DISTINCT budget_per_capita FROM {table} WHERE run_id = ? ORDER BY 1",
                      [second]) == [(1.0,), (2.0,)], table
    evaluated = _query(promo_env, "SELECT model, budget_per_capita, eom_value IS NULL FROM policy_evaluation "
                       "WHERE run_id = ? AND model <> 'random' ORDER BY 1, 2", [second])
    assert evaluated == [(m, b, b == 0.25) for m in sorted(MODELS) for b in (0.25, 1.0, 2.0)]
    meta = dg.DagsterInstance.get().get_latest_materialization_event(
        dg.AssetKey([MODELS[0], "budget_dual"])).asset_materialization.metadata
    assert "0.25" in meta["infeasible_budgets"].value and "minimum feasible budget" in meta["infeasible_budgets"].value

    # the report: the latest run, only the budgets of campaign.yaml now, and the infeasible one named
    assert main(["report", "--campaign", "demo", "--wide"]) == 0
    out = capsys.readouterr().out
    board = [line.split() for line in out.splitlines() if line.startswith("demo ")]  # --wide: campaign column first
    assert {row[1] for row in board} == {"0.25", "1", "2"}
    assert second_board in out and first_board not in out
    assert all(f"budget 0.25 per capita not allocated for {m}:" in out for m in MODELS) and "minimum feasible budget" in out
    gone = [f"{b:g}" for b in old_budgets if b not in (0.25, 1.0, 2.0)]
    assert f"budgets not in campaign.yaml now: {', '.join(gone)}" not in out  # the latest run has none of them
    assert main(["report", "--campaign", "demo", "--history", "--wide"]) == 0
    out = capsys.readouterr().out
    assert first_board in out and second_board in out and f"budgets not in campaign.yaml now: {', '.join(gone)}" in out
    history_budgets = {line.split()[1] for line in out.splitlines() if line.startswith("demo ")}
    assert history_budgets >= {f"{b:g}" for b in old_budgets} | {"0.25", "1", "2"}

    # a third run: PROMO_KEEP_RUNS=2 keeps the last two runs' results, in every results table
    monkeypatch.setattr(stored, "solve_chunked", real)
    assert main(["run", "--no-progress"]) == 0
    third, third_board = _last_runs(promo_env)
    for table in ("budget_dual", "allocation", "policy_evaluation", "model_registry"):
        assert {r[0] for r in _query(promo_env, f"SELECT DISTINCT run_id FROM {table} WHERE model <> 'random'")} == {
            second, third}, table
    assert {r[0] for r in _query(promo_env, "SELECT DISTINCT run_id FROM policy_evaluation WHERE model = 'random'")} == {
        second_board, third_board}
    versions = {r[0] for r in _query(promo_env, "SELECT DISTINCT model_version FROM response_coefficients")}
    assert versions <= {r[0] for r in _query(promo_env, "SELECT model_version FROM model_registry")}
    capsys.readouterr()
    assert main(["report", "--campaign", "demo", "--history"]) == 0
    out = capsys.readouterr().out
    assert third_board in out and second_board in out and first_board not in out
    assert "2 succeeded run(s) kept (PROMO_KEEP_RUNS=2)" in out


@pytest.mark.hostile
@pytest.mark.parametrize("var, value", [("PROMO_KEEP_RUNS", "two"), ("PROMO_MAX_EPOCHS", "many"),
                                        ("PROMO_WAREHOUSE_BUSY_SECONDS", "-1")],
                         ids=["error-run-keep-runs", "error-run-max-epochs", "error-run-busy-seconds"])
def test_promo_run_checks_settings_before_anything_runs(promo_env, monkeypatch, capsys, var, value):
    import promo_assets.cli.main as cli

    monkeypatch.setenv(var, value)
    assert settings.check() and var in settings.check()[0]
    landing = promo_env["landing"]
    (landing / "c1" / "events").mkdir(parents=True)
    (landing / "c1" / "campaign.yaml").write_text("treatments: {levels: [0, 1]}\nbudget_per_capita: 0.5\n")
    assert cli.main(["run", "--no-progress"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "nothing was run" in err and f"{var}={value!r}" in err
    assert not promo_env["warehouse"].exists()


def test_model_registry_retention_counts_runs_per_model(tmp_path):
    """Runs that train only one model (materialized alone from the UI) never drop another model's
    last good registration, nor its coefficients."""
    def register(con, run_id, *models):
        with warehouse.transaction(con):
            results.start(con, "c", run_id)
            for model in models:
                con.execute(warehouse.sql("frames", "insert_model"), ["c", model, f"{model}-{run_id}", None, "{}", run_id])
                con.execute("INSERT INTO response_coefficients VALUES ('c', ?, ?, 'population', 'u1', 0, 0.5, 0.0, now())",
                            [model, f"{model}-{run_id}"])
            results.retain(con, "c", run_id, ["model_registry", "response_coefficients"], keep=2)
        with warehouse.transaction(con):
            results.finish(con, "c", run_id, succeeded=True)

    with warehouse.connect(tmp_path / "w.duckdb") as con:
        register(con, "full", "s_learner", "dipn")
        for i in range(3):
            register(con, f"only{i}", "s_learner")
        kept = con.execute("SELECT model, run_id FROM model_registry ORDER BY model, run_id").fetchall()
        assert kept == [("dipn", "full"), ("s_learner", "only1"), ("s_learner", "only2")]
        versions = {r[0] for r in con.execute("SELECT DISTINCT model_version FROM response_coefficients").fetchall()}
        assert versions == {"dipn-full", "s_learner-only1", "s_learner-only2"}


def test_a_partial_run_loses_only_its_failed_models_rows_and_retention_is_per_model(tmp_path):
    """A run whose failed steps all belong to model chains is 'partial': the failed models' rows go,
    the others count; every per-model table keeps PROMO_KEEP_RUNS runs per model."""
    def write(con, run_id, *models):
        with warehouse.transaction(con):
            results.start(con, "c", run_id)
            for model in models:
                con.execute("INSERT INTO allocation VALUES ('c', ?, 'v', 1.0, 'u1', 0, 0.0, ?, now())", [model, run_id])
                con.execute("INSERT INTO model_skips VALUES ('c', ?, 'reason', ?, now())", [model, run_id])
            results.retain(con, "c", run_id, ["allocation", "model_skips"], keep=2)

    with warehouse.connect(tmp_path / "w.duckdb") as con:
        write(con, "both", "s_learner", "dipn")
        with warehouse.transaction(con):
            results.finish(con, "c", "both", succeeded=True)
        write(con, "half", "s_learner", "dipn")
        with warehouse.transaction(con):
            results.finish(con, "c", "half", succeeded=False, failed_models=["dipn"])
        assert con.execute("SELECT status FROM result_runs WHERE run_id = 'half'").fetchall() == [("partial",)]
        for table in ("allocation", "model_skips"):
            assert con.execute(f"SELECT model, run_id FROM {table} ORDER BY model, run_id").fetchall() == [
                ("dipn", "both"), ("s_learner", "both"), ("s_learner", "half")], table
        for i in range(2):  # runs of s_learner alone never push dipn's last results out
            write(con, f"only{i}", "s_learner")
            with warehouse.transaction(con):
                results.finish(con, "c", f"only{i}", succeeded=True)
        assert con.execute("SELECT model, run_id FROM allocation ORDER BY model, run_id").fetchall() == [
            ("dipn", "both"), ("s_learner", "only0"), ("s_learner", "only1")]

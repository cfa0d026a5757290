"""Out-of-core and Dask allocation (issue #18): the chunked exact solver equals `solve`, in this process,
from Parquet and on a LocalCluster of 2 worker processes; a killed worker is retried or the write
is rolled back; the setting PROMO_DASK_SCHEDULER; OnlinePolicy over a stream."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from promo_assets.config import settings
from promo_assets.allocation import AllocationInputError, InfeasibleBudgetError, decide_at, solve, tie_share
from promo_assets.decisions import OnlinePolicy
from promo_assets.allocation import chunked
from promo_assets.allocation.chunked import (
    ArraySource,
    ChunkError,
    ParquetSource,
    decide_at_chunked,
    solve_chunked,
    tie_share_chunked,
    write_parquet,
)


def instance(n: int, k: int, seed: int, kind: str = "s-shaped", dtype=np.float64):
    """Monotone response curves over incentives j/(k-1), cost = incentive x response (as benchmarks/mckp.py)."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 1.0, k)
    a, b = rng.uniform(0.05, 0.5, (n, 1)), rng.uniform(0.0, 0.4, (n, 1))
    if kind == "concave":
        v = a + b * (1.0 - np.exp(-rng.uniform(1.0, 8.0, (n, 1)) * x))
    else:
        v = a + b / (1.0 + np.exp(-rng.uniform(5.0, 20.0, (n, 1)) * (x - rng.uniform(0.1, 0.9, (n, 1)))))
    return v.astype(dtype), (x * v).astype(dtype)


def ties(n: int, k: int, seed: int):
    """Small integers: many users tied at lambda* and many equal efficiencies across users."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 5, (n, k)).astype(float), np.sort(rng.integers(0, 5, (n, k)), axis=1).astype(float)


def assert_same(ref, got):
    assert got.lambda_ == ref.lambda_
    for field in ("response", "lp_response", "dual_bound", "cost"):
        assert got.__getattribute__(field) == pytest.approx(ref.__getattribute__(field), rel=1e-12, abs=1e-12), field
    assert got.fractional_user == ref.fractional_user
    assert got.fractional_levels == ref.fractional_levels and got.rounded_up == ref.rounded_up
    assert got.n_users == ref.n_users and got.feasible == ref.feasible
    if got.levels.size:
        assert np.array_equal(got.levels, ref.levels)


CASES = {
    "s-shaped-30k-chunks-of-4k": (lambda: instance(30_000, 8, 1), 0.3, 4_000),
    "concave-float32-one-chunk": (lambda: instance(20_000, 16, 2, "concave", np.float32), 0.2, 1 << 16),
    "ties-many-chunks": (lambda: ties(6_000, 4, 3), 0.25, 517),
    "single-level": (lambda: instance(1_000, 1, 4), 1.0, 300),
    "budget-covers-everything": (lambda: instance(2_000, 5, 5), 10.0, 333),
}


@pytest.mark.parametrize("case", list(CASES))
def test_chunked_equals_solve_in_process(case):
    make, share, rows = CASES[case]
    v, c = make()
    budget = share * float(c.max(axis=1).sum())
    ref = solve(v, c, budget, seed=7)
    got = solve_chunked(ArraySource(v, c, rows=rows), budget, seed=7)
    assert_same(ref, got)
    assert got.info["passes"] == 3 and got.info["bytes_read"] == 3 * (v.nbytes + c.nbytes)


def test_chunked_per_capita_and_rounding_down():
    v, c = instance(8_000, 6, 8)
    ref = solve(v, c, 0.05, per_capita=True, seed=3, rounding="down")
    got = solve_chunked(ArraySource(v, c, rows=999), 0.05, per_capita=True, seed=3, rounding="down")
    assert_same(ref, got)
    assert got.kind == "per_capita" and got.cost <= got.budget


def test_a_bracket_that_misses_lambda_is_widened(monkeypatch):
    """A sampled bracket that misses lambda* costs one band pass more each time, never the answer."""
    v, c = instance(10_000, 8, 9)
    budget = 0.3 * float(c.max(axis=1).sum())
    ref = solve(v, c, budget)
    for wrong in ((ref.lambda_ * 2, ref.lambda_ * 2.1), (ref.lambda_ * 0.3, ref.lambda_ * 0.31)):
        monkeypatch.setattr(chunked, "sample_bracket", lambda *a, w=wrong, **k: w)
        got = solve_chunked(ArraySource(v, c, rows=1_500), budget)
        assert_same(ref, got)
        assert got.info["widenings"] >= 1 and got.info["passes"] == 3 + got.info["widenings"]


def test_levels_go_to_the_sink_chunk_by_chunk():
    v, c = instance(5_000, 6, 10)
    ref = solve(v, c, 100.0)
    seen = {}
    got = solve_chunked(ArraySource(v, c, rows=1_200), 100.0, levels=lambda i, first, lv: seen.update({first: lv.copy()}))
    assert got.levels.size == 0 and sorted(seen) == [0, 1_200, 2_400, 3_600, 4_800]
    assert np.array_equal(np.concatenate([seen[s] for s in sorted(seen)]), ref.levels)


def test_parquet_source_equals_arrays(tmp_path):
    v, c = instance(12_000, 8, 11, dtype=np.float32)
    write_parquet(tmp_path / "a.parquet", v[:7_000], c[:7_000], rows_per_group=2_000)
    write_parquet(tmp_path / "b.parquet", v[7_000:], c[7_000:], rows_per_group=2_000)
    source = ParquetSource([tmp_path / "a.parquet", tmp_path / "b.parquet"], n_levels=8)
    assert source.n_users == 12_000 and len(source.chunks()) == 7
    budget = 0.3 * float(c.max(axis=1).sum(dtype=np.float64))
    assert_same(solve(v, c, budget), solve_chunked(source, budget))


@pytest.mark.parametrize("share", [0.0, 0.37, 1.0])
def test_decide_at_and_tie_share_chunked_equal_the_in_memory_rule(share):
    v, c = ties(4_000, 4, 12)
    budget = 0.3 * float(c.max(axis=1).sum())
    lam = solve(v, c, budget).lambda_
    source = ArraySource(v, c, rows=333)
    assert np.array_equal(decide_at_chunked(source, lam, share, seed=5), decide_at(v, c, lam, share, seed=5))
    assert tie_share_chunked(source, lam, budget) == pytest.approx(tie_share(v, c, lam, budget), rel=1e-12)


@pytest.mark.hostile
@pytest.mark.parametrize("case", ["error-nan-in-a-parquet-chunk", "error-missing-column", "error-budget-below-minimum",
                                  "error-bad-rounding", "error-no-file"])
def test_bad_chunked_inputs_are_refused_naming_the_place(case, tmp_path):
    v, c = instance(3_000, 4, 13, dtype=np.float32)
    path = tmp_path / "coef.parquet"
    if case == "error-nan-in-a-parquet-chunk":
        v[2_345, 2] = np.nan
        write_parquet(path, v, c, rows_per_group=1_000)
        with pytest.raises(AllocationInputError, match=r"coef\.parquet row group 2: response has 1 non-finite .* user 345, level 2"):
            solve_chunked(ParquetSource([path], 4), 10.0)
    elif case == "error-missing-column":
        write_parquet(path, v[:, :3], c[:, :3])
        with pytest.raises(AllocationInputError, match=r"coef\.parquet: missing coefficient column\(s\) v3, c3"):
            ParquetSource([path], 4)
    elif case == "error-budget-below-minimum":
        c = c + 1.0
        with pytest.raises(InfeasibleBudgetError, match="budget 10 is below the cheapest allocation.*3000"):
            solve_chunked(ArraySource(v, c, rows=500), 10.0)
    elif case == "error-bad-rounding":
        with pytest.raises(AllocationInputError, match="rounding must be 'sample' or 'down', got 'up'"):
            solve_chunked(ArraySource(v, c), 10.0, rounding="up")
    else:
        with pytest.raises(AllocationInputError, match=r"nowhere\.parquet: no such Parquet file"):
            ParquetSource([tmp_path / "nowhere.parquet"], 4)


@pytest.mark.hostile
@pytest.mark.parametrize("value, expected", [
    ("accepted-unset", None), ("accepted-local:2", "local:2"), ("accepted-tcp://10.0.0.5:8786", "tcp://10.0.0.5:8786"),
    ("error-local:0", "local:N"), ("error-local:two", "local:N"), ("error-cluster", "scheduler address"),
    ("error-tcp://host:", "scheduler address")])
def test_dask_scheduler_setting(value, expected, monkeypatch):
    text = value.split("-", 1)[1]
    monkeypatch.setenv("PROMO_DASK_SCHEDULER", "" if text == "unset" else text)
    if value.startswith("accepted-"):
        assert settings.dask_scheduler() == expected and settings.check() == []
    else:
        with pytest.raises(settings.SettingsError, match=f"PROMO_DASK_SCHEDULER={text!r}: expected .*{expected}"):
            settings.dask_scheduler()
        assert any("PROMO_DASK_SCHEDULER" in p for p in settings.check())


class _Linear:
    """A stand-in response model: value and cost linear in one feature."""

    version = "linear-1"

    def predict(self, frame):
        x = frame["x"].to_numpy(dtype=float)[:, None]
        levels = np.arange(4)[None, :]
        v = 0.1 + x * np.log1p(levels)
        return v, 0.5 * levels * v


def test_online_policy_decides_a_stream_in_vectorized_batches():
    rng = np.random.default_rng(14)
    frame = pd.DataFrame({"x": rng.uniform(0, 1, 1_000)})
    policy = OnlinePolicy(_Linear(), 0.9)
    expected = policy.decide(frame)
    stream = [frame.iloc[:300], *({"x": x} for x in frame["x"].iloc[300:650]), frame.iloc[650:]]
    batches = list(policy.decide_stream(stream, batch_size=256))
    assert [len(b) for b in batches] == [300, 256, 444]
    assert np.array_equal(np.concatenate(batches), expected)
    with pytest.raises(AllocationInputError, match="batch_size must be >= 1, got 0"):
        next(policy.decide_stream(stream, batch_size=0))


# --------------------------------------------------------------------------------------------
# Dask: a LocalCluster of 2 worker processes


@pytest.fixture(scope="module")
def client():
    import dask  # dependencies (pyproject.toml): missing, these tests fail, they never skip
    import distributed

    # a chunk whose worker dies twice fails the computation (Dask's default allows 3 deaths)
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as c:
            yield c


class KillingSource(ArraySource):
    """Kills the worker process that loads chunk `victim` (SIGKILL, as the OOM killer would) on its
    `kill_at`-th load (1: the first pass, 3: the pass that writes the levels), and on every later one
    when `always`. Loads are counted in the file `marker` (the workers are separate processes)."""

    def __init__(self, values, costs, rows, victim: int, marker: str, kill_at: int = 1, always: bool = False):
        super().__init__(values, costs, rows)
        self.victim, self.marker, self.kill_at, self.always = victim, marker, kill_at, always

    def load(self, ref):
        if ref[0] // self.rows == self.victim:
            with open(self.marker, "a") as f:
                f.write("load\n")
            loads = len(Path(self.marker).read_text().splitlines())
            if loads == self.kill_at or (self.always and loads > self.kill_at):
                os.kill(os.getpid(), signal.SIGKILL)
        return super().load(ref)


def test_dask_result_equals_solve(client):
    for make, share, rows in (CASES["s-shaped-30k-chunks-of-4k"], CASES["ties-many-chunks"]):
        v, c = make()
        budget = share * float(c.max(axis=1).sum())
        got = solve_chunked(ArraySource(v, c, rows=rows), budget, seed=7, client=client)
        assert_same(solve(v, c, budget, seed=7), got)
        assert got.info["dask"] and got.info["passes"] == 3
    lam = solve(v, c, budget).lambda_
    assert np.array_equal(decide_at_chunked(ArraySource(v, c, rows=rows), lam, 0.5, client=client),
                          decide_at(v, c, lam, 0.5))


@pytest.mark.slow
def test_a_worker_killed_mid_allocation_is_retried(client, tmp_path):
    v, c = instance(20_000, 6, 15)
    budget = 0.3 * float(c.max(axis=1).sum())
    source = KillingSource(v, c, 4_000, victim=3, marker=str(tmp_path / "loads"), kill_at=2)
    got = solve_chunked(source, budget, client=client)
    # chunk 3 was loaded once per pass, plus once more after its worker died in the band pass
    assert len((tmp_path / "loads").read_text().splitlines()) == 4
    assert_same(solve(v, c, budget), got)


@pytest.mark.slow
def test_a_worker_that_keeps_dying_fails_the_run_and_leaves_no_allocation(client, tmp_path):
    """The levels are written chunk by chunk inside the warehouse resource's one transaction: a chunk
    whose worker keeps dying fails the allocation with an error naming it, and nothing is stored."""
    from promo_assets.defs.resources import WarehouseResource
    from promo_assets.store.warehouse import registered, sql

    v, c = instance(20_000, 6, 16)
    source = KillingSource(v, c, 4_000, victim=4, marker=str(tmp_path / "loads"), kill_at=3, always=True)
    warehouse = WarehouseResource(path=str(tmp_path / "w.duckdb"))

    written = []

    def write(con):
        def sink(i, first, levels):
            written.append(i)
            rows = pd.DataFrame({"user_id": [f"u{first + j}" for j in range(len(levels))], "level": levels,
                                 "incentive": levels * 1.0})
            with registered(con, "alloc_df", rows):
                con.execute(sql("frames", "insert_allocation"), ["demo", "m", "v1", 0.1, "run-1"])
        return sink

    with pytest.raises(ChunkError, match=r"users 16000\.\.19999: KilledWorker"):
        with warehouse.transaction() as con:
            solve_chunked(source, 0.3 * float(c.max(axis=1).sum()), client=client, levels=write(con))
    assert written  # chunks were written in the transaction before chunk 4's worker died in the last pass
    with warehouse.connect(read_only=True) as con:
        assert con.execute("SELECT count(*) FROM allocation").fetchone()[0] == 0


# --------------------------------------------------------------------------------------------
# the pipeline's source: response_coefficients read chunk by chunk from the warehouse


def stored(tmp_path, v, c, *, shuffle_seed=0):
    """A warehouse with v, c as model m / v1's population coefficients (inserted in a shuffled user
    order, read back in user-id order), and an open connection to it."""
    from promo_assets.defs.resources import WarehouseResource
    from promo_assets.store.warehouse import registered, sql

    n, k = v.shape
    order = np.random.default_rng(shuffle_seed).permutation(n)
    frame = pd.DataFrame({"user_id": np.repeat([f"u{i:06d}" for i in order], k),
                          "level": np.tile(np.arange(k, dtype=np.int32), n),
                          "response": v[order].ravel(), "cost": c[order].ravel()})
    warehouse = WarehouseResource(path=str(tmp_path / "w.duckdb"))
    with warehouse.transaction() as con, registered(con, "chunk_df", frame):
        con.execute(sql("frames", "insert_coefficients"), ["demo", "m", "v1", "population"])
    return warehouse


@pytest.mark.parametrize("workers", [0, 2])
def test_stored_coefficients_stream_gives_solve_and_decide_at(tmp_path, workers, request):
    from promo_assets.allocation import frontier
    from promo_assets.allocation.plan import BudgetPlan, Stored
    from promo_assets.allocation.stored import StoredCoefficients, sampled_frontier
    from promo_assets.store import models as models_store

    client = request.getfixturevalue("client") if workers else None
    v, c = instance(9_000, 6, 21)
    warehouse = stored(tmp_path, v, c)
    budget = 0.3 * float(c.max(axis=1).sum())
    ref = solve(v, c, budget)
    with warehouse.transaction() as con:
        source = StoredCoefficients(con, "demo", "m", "v1", "population", 6, rows=1_000)
        assert source.n_users == 9_000 and len(source.chunks()) == 9
        got = solve_chunked(source, budget, client=client)
        assert_same(ref, got)
        assert got.info["passes"] == 3 and got.info["bytes_read"] == 3 * (v.nbytes + c.nbytes)
        bare = solve_chunked(source, budget, client=client, levels=False)  # what budget_dual stores: two passes
        assert bare.info["passes"] == 2 and bare.levels.size == 0 and bare.fractional_user is None
        assert (bare.lambda_, bare.response, bare.cost, bare.dual_bound) == (got.lambda_, got.response, got.cost, got.dual_bound)
        fr, n_fr = sampled_frontier(source, client=client)
        assert n_fr == 9_000 and np.array_equal(fr.costs, frontier(v, c).costs)
        share = tie_share_chunked(source, ref.lambda_, budget, client=client)
        assert share == pytest.approx(tie_share(v, c, ref.lambda_, budget), rel=1e-12, abs=1e-12)
        def sink_for(b):  # what the allocation asset writes: each chunk's levels as they come
            def sink(i, first, levels, ids):
                models_store.add_allocation(con, ["demo", "m", "v1", b, "run-1"], pd.DataFrame(
                    {"user_id": ids, "level": levels, "incentive": levels.astype(float)}))
            return sink

        plan = BudgetPlan((0.3,))
        out = plan.decide(Stored({0.3: (ref.lambda_, share)}), source, sink_for=sink_for, client=client)[0.3]
    want = decide_at(v, c, ref.lambda_, share)
    assert out["users"] == 9_000 and np.array_equal(out["level_counts"], np.bincount(want, minlength=6))
    assert out["cost"] == pytest.approx(float(c[np.arange(9_000), want].sum()), rel=1e-12)
    with warehouse.connect(read_only=True) as con:
        rows = con.execute("SELECT user_id, level, incentive FROM allocation ORDER BY user_id").fetchall()
    assert [r[0] for r in rows] == [f"u{i:06d}" for i in range(9_000)]
    assert np.array_equal([r[1] for r in rows], want) and all(r[2] == r[1] for r in rows)


def test_stored_coefficients_sample_a_large_frontier_and_refuse_missing_levels(tmp_path):
    from promo_assets.allocation.stored import StoredCoefficients, sampled_frontier

    v, c = instance(3_000, 4, 22)
    warehouse = stored(tmp_path, v, c)
    with warehouse.connect() as con:
        source = StoredCoefficients(con, "demo", "m", "v1", "population", 4, rows=700)
        fr, n_fr = sampled_frontier(source, users=1_000)
        assert 800 < n_fr < 1_200 and fr.costs[-1] / n_fr == pytest.approx(c.max(axis=1).mean(), rel=0.1)
        with pytest.raises(AllocationInputError, match=r"12000 rows for 3000 users, expected 5 levels per user"):
            StoredCoefficients(con, "demo", "m", "v1", "population", 5)
        con.execute("UPDATE response_coefficients SET level = 7 WHERE user_id = 'u001500' AND level = 2")
        with pytest.raises(AllocationInputError, match=r"users from 1400 on do not each have the levels 0\.\.3"):
            list(StoredCoefficients(con, "demo", "m", "v1", "population", 4, rows=700).stream())


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_population_file_streams_the_last_row_per_user_in_chunks(tmp_path, fmt):
    """PopulationFile (scoring's reader) = pandas reading the whole file, user_id as text,
    drop_duplicates(keep='last'), cut into chunks; absent features NULL; no user_id: refused naming the file."""
    import duckdb

    from promo_assets.ingestion import IngestError
    from promo_assets.ingestion.frames import PopulationFile

    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"user_id": rng.integers(0, 700, 1_000), "age": rng.normal(size=1_000),
                          "city": rng.choice(["a", "b", "c"], 1_000)})
    path = tmp_path / f"2024-01-01.{fmt}"
    frame.to_parquet(path) if fmt == "parquet" else frame.to_csv(path, index=False)
    want = frame.assign(user_id=frame["user_id"].astype(str)).drop_duplicates("user_id", keep="last")
    con = duckdb.connect()
    pop = PopulationFile(con, path, ["age", "city", "tenure"])
    assert pop.n_users == len(want) and pop.absent == ["tenure"]
    parts = list(pop.frames(97))
    assert all(len(p) == 97 for p in parts[:-1]) and 0 < len(parts[-1]) <= 97
    got = pd.concat(parts, ignore_index=True)
    assert got["tenure"].isna().all()
    got, want = (f.sort_values("user_id", ignore_index=True) for f in (got.drop(columns="tenure"), want))
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    frame.drop(columns="user_id").to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(IngestError, match="bad.parquet: missing required column 'user_id'"):
        PopulationFile(con, tmp_path / "bad.parquet")


@pytest.mark.parametrize("workers", [0, 2])
def test_map_frame_stream_scores_frames_in_order_with_few_in_flight(workers, request):
    client = request.getfixturevalue("client") if workers else None
    read = []

    def frames():
        for i in range(25):
            read.append(i)
            yield pd.DataFrame({"x": np.arange(i * 10, i * 10 + 10, dtype=float)})

    seen = 0
    for frame, total in chunked.map_frame_stream(lambda w, f: float((w * f["x"]).sum()), 2.0, frames(), client=client):
        assert total == 2.0 * frame["x"].sum() and frame["x"].iloc[0] == seen * 10
        seen += 1
        assert len(read) - seen <= chunked.ChunkRunner.WINDOW * max(workers, 1)  # read ahead at most the window
    assert seen == 25

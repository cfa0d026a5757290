"""Exact allocation over chunks of users: out-of-core on one machine, or as Dask tasks.

The users' coefficients come from a *chunk source* (`ArraySource`: arrays in memory,
`ParquetSource`: Parquet files read one row group at a time, or any object with the same three
members), never all in memory at once. Every per-chunk function here is a plain function of one
chunk's (response, cost): `ChunkRunner` runs it in this process one chunk after the other, or, given
a `dask.distributed` client, as one Dask task per chunk; only small per-chunk summaries come back
and the client combines them. The same functions run in both cases.

`solve_chunked` reproduces `solve` (DIPN Eq. 2/5 and its dual, Eq. 6) exactly, in three passes:

1. **sample** (`chunk_sample`): every chunk's cheapest-allocation cost and a uniform sample of its
   users; on the client, `solver.sample_bracket` (what `solve` uses) brackets λ* in [lo, hi];
2. **band** (`chunk_band`): per chunk, the users whose chosen level is the same at lo and hi are
   fixed (their value and cost summed); the others' upper hulls are split into segments of
   efficiency > hi (taken: summed), < lo (not taken) and the *band* [lo, hi] (returned). On the
   client, the Sinha-Zoltners greedy (`_hull.greedy`, what `solve` uses) runs over the band with
   the budget left: λ* is the efficiency of its critical segment, exactly as in `solve`. If λ*
   is outside [lo, hi] (the greedy's remaining budget is negative or exceeds the band), the
   bracket is widened and the band pass repeated (one more pass each time, counted);
3. **levels** (`chunk_levels`): per chunk, the levels at λ* (the band's taken segments and the one
   fractional user, rounded as `solve` rounds it), handed to a sink chunk by chunk.

The result is an `Allocation` whose λ*, LP value, dual bound and levels equal `solve`'s on the same
users (sums in another order: equal to rounding, ~1e-15 relative); ``info`` records the passes and
the bytes of coefficients read.

`decide_at_chunked` / `tie_share_chunked` are the chunked `decide_at` / `tie_share` (the decision at
a stored λ*): the per-user sides per chunk, the tie rule over the tied users on the client.
"""

from __future__ import annotations

import itertools
import math
import time
import uuid
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np

from promo_assets.core.errors import DomainError

from . import _checks
from ._hull import Hull, compute_hull, greedy
from .at_lambda import _extra, _sides, share_of, tied_up
from .errors import AllocationInputError
from .solver import Allocation, Fixed, _infeasible, certificate, fix_on_bracket, round_fractional, sample_bracket

#: users sampled (over all chunks) to bracket λ* in the first pass: at most (see sample_size)
SAMPLE_USERS = 500_000
#: ... at least (every user of a smaller problem: the bracket is then exact), and SAMPLE_SCALE * n^(2/3)
SAMPLE_FLOOR = 50_000
SAMPLE_SCALE = 6.0
#: the sample's random stream: np.random.default_rng([_SAMPLE_STREAM, seed, chunk]), never the same stream
#: as a chunk source's default_rng(chunk) (a sample drawn from the generator's own stream is biased)
_SAMPLE_STREAM = 0x5A3B1E
#: how many times the bracket is widened before giving up on it (then [0, inf): every user active)
MAX_WIDENINGS = 4


class ChunkSource(Protocol):
    """Where the coefficients come from: `n_users`, `n_levels`, `chunks()` (one small picklable
    reference per chunk, in user order) and `load(ref) -> (response, cost)` (rows x K arrays)."""

    n_users: int
    n_levels: int

    def chunks(self) -> Sequence: ...

    def load(self, ref) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass
class ArraySource:
    """In-memory predicted response / cost (N x K) cut into chunks of `rows` users (no copy)."""

    response: np.ndarray
    cost: np.ndarray
    rows: int = 1 << 16

    def __post_init__(self):
        self.response, self.cost = _checks.check_pair(self.response, self.cost)
        if int(self.rows) < 1:
            raise AllocationInputError(f"rows per chunk must be >= 1, got {self.rows!r}")
        self.n_users, self.n_levels = self.response.shape

    def chunks(self) -> list[tuple[int, int]]:
        return [(s, min(s + self.rows, self.n_users)) for s in range(0, self.n_users, self.rows)]

    def load(self, ref):
        return self.response[ref[0]:ref[1]], self.cost[ref[0]:ref[1]]

    def describe(self, ref) -> str:
        return f"users {ref[0]}..{ref[1] - 1}"


@dataclass
class ParquetSource:
    """Parquet files with float columns `v0..v{K-1}` and `c0..c{K-1}` (one row per user, files in
    user order), read one row group at a time: a chunk is a row group."""

    paths: Sequence[str]
    n_levels: int
    n_users: int = field(init=False)

    def __post_init__(self):
        import pyarrow.parquet as pq

        self.paths = [str(p) for p in self.paths]
        if not self.paths:
            raise AllocationInputError("ParquetSource needs at least one file")
        want = {f"{p}{j}" for p in "vc" for j in range(self.n_levels)}
        self._refs, n = [], 0
        for path in self.paths:
            if not Path(path).is_file():
                raise AllocationInputError(f"{path}: no such Parquet file")
            meta = pq.ParquetFile(path).metadata
            missing = sorted(want - set(meta.schema.names), key=lambda x: (x[0] == "c", int(x[1:])))
            if missing:
                raise AllocationInputError(f"{path}: missing coefficient column(s) {', '.join(missing[:4])}"
                                           f"{' ...' if len(missing) > 4 else ''} (need v0..v{self.n_levels - 1}, "
                                           f"c0..c{self.n_levels - 1})")
            self._refs += [(path, g) for g in range(meta.num_row_groups)]
            n += meta.num_rows
        self.n_users = n

    def chunks(self) -> list[tuple[str, int]]:
        return list(self._refs)

    def load(self, ref):
        import pyarrow.parquet as pq

        k = self.n_levels
        table = pq.ParquetFile(ref[0]).read_row_group(ref[1], columns=[f"{p}{j}" for p in "vc" for j in range(k)])
        cols = [table.column(i).to_numpy() for i in range(2 * k)]
        return np.stack(cols[:k], axis=1), np.stack(cols[k:], axis=1)

    def describe(self, ref) -> str:
        return f"{ref[0]} row group {ref[1]}"


def write_parquet(path, response, cost, rows_per_group: int = 1 << 18) -> None:
    """Write N x K values / costs as a ParquetSource file (columns v0.., c0..; float dtype kept)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    k = response.shape[1]
    names = [f"{p}{j}" for p in "vc" for j in range(k)]
    table = pa.table([response[:, j] for j in range(k)] + [cost[:, j] for j in range(k)], names=names)
    pq.write_table(table, path, row_group_size=rows_per_group, compression="none")


def _describe(source, ref) -> str:
    describe = getattr(source, "describe", None)
    return describe(ref) if describe else f"chunk {ref!r}"


class ChunkError(DomainError, RuntimeError):
    """A chunk's task failed for good (its worker died too often, or the chunk could not be read):
    names the chunk and the cause, kept as `__cause__` with its stack trace."""


def _same(obj):
    return obj


def on_cluster(client, obj):
    """`obj` as a Dask future the tasks share: a task that returns it, so that the scheduler can
    recompute it when the workers holding it die (scattered data would be lost with them)."""
    return client.submit(_same, obj, pure=False)


def run_chunk(fn: Callable, source, ref, *args):
    """One chunk's task: load it, check it, apply `fn(response, cost, *args)`; returns (result, bytes
    of coefficients read). Bad input raises AllocationInputError naming the chunk."""
    values, costs = source.load(ref)
    return run_loaded(fn, values, costs, source.n_levels, _describe(source, ref), *args)


def run_loaded(fn: Callable, response, cost, n_levels: int, where: str, *args):
    """`run_chunk` for a chunk already read (a streamed source's, read on the client)."""
    try:
        response, cost = _checks.check_pair(response, cost)
        if response.shape[1] != n_levels:
            raise AllocationInputError(f"has {response.shape[1]} levels, expected {n_levels}")
    except AllocationInputError as exc:
        raise AllocationInputError(f"{where}: {exc}") from None
    return fn(response, cost, *args), int(response.nbytes + cost.nbytes)


class ChunkRunner:
    """Runs per-chunk functions over a source: in this process (``client=None``), one chunk at a time,
    or as Dask tasks on a `dask.distributed.Client` (the source is sent to the workers once; results
    come back as they complete). Counts the passes over the data and the bytes read.

    A *streamed* source (one with ``stream()``: (response, cost, ids) per chunk, in the order of
    ``chunks()``, read on the client, e.g. from a database cursor; see `promo_assets.allocation.stored`)
    is read once per pass on the client; on Dask each chunk read is one task, at most WINDOW per worker
    in flight, so that the client holds a bounded number of chunks. ``ids``: the ids of the chunk whose
    result `map` just yielded (None for a source without ids)."""

    #: a streamed source's chunks in flight per Dask worker
    WINDOW = 2

    def __init__(self, source, client=None):
        self.source = source
        self.client = client
        self.refs = list(source.chunks())
        if not self.refs:
            raise AllocationInputError("the chunk source has no chunks (no users)")
        self.passes = 0
        self.bytes_read = 0
        self.ids = None
        self._remote = None

    def map(self, fn: Callable, args: Callable[[int], tuple] = lambda i: ()) -> Iterator[tuple[int, Any]]:
        """(chunk index, fn's result) for every chunk (in order in-process; as completed on Dask)."""
        self.passes += 1
        if hasattr(self.source, "stream"):
            yield from self._map_stream(fn, args)
            return
        if self.client is None:
            for i, ref in enumerate(self.refs):
                result, nbytes = run_chunk(fn, self.source, ref, *args(i))
                self.bytes_read += nbytes
                yield i, result
            return
        yield from self._map_dask(fn, args)

    def _map_stream(self, fn, args):
        k = self.source.n_levels
        chunks = enumerate(self.source.stream())
        if self.client is None:
            for i, (values, costs, ids) in chunks:
                result, nbytes = run_loaded(fn, values, costs, k, _describe(self.source, self.refs[i]), *args(i))
                self.bytes_read += nbytes
                self.ids = ids
                yield i, result
            return
        from distributed import as_completed

        window = self.WINDOW * max(1, len(self.client.scheduler_info().get("workers", {})))
        tag = uuid.uuid4().hex[:8]
        pending, done = {}, as_completed()

        def submit():
            for i, (values, costs, ids) in chunks:
                with warnings.catch_warnings():  # the chunk travels inside its task on purpose: a task the
                    # scheduler holds is rerun elsewhere when its worker dies (scattered data would die with it)
                    warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
                    fut = self.client.submit(run_loaded, fn, values, costs, k, _describe(self.source, self.refs[i]),
                                             *args(i), key=f"{fn.__name__}-{tag}-{i}", pure=False)
                pending[fut] = (i, ids)
                done.add(fut)
                return True
            return False

        try:
            while len(pending) < window and submit():
                pass
            for fut in done:
                i, ids = pending.pop(fut)
                result, nbytes = self._result(fut, i)
                self.bytes_read += nbytes
                self.ids = ids
                yield i, result
                submit()
        finally:
            for fut in pending:
                fut.cancel()

    def _result(self, fut, i):
        try:
            out = fut.result()
        except AllocationInputError:
            raise
        except Exception as exc:  # KilledWorker, a reader's error...
            raise ChunkError(f"{_describe(self.source, self.refs[i])}: {type(exc).__name__}: {exc}") from exc
        fut.release()
        return out

    def _map_dask(self, fn, args):
        from distributed import as_completed

        if self._remote is None:
            self._remote = on_cluster(self.client, self.source)
        tag = uuid.uuid4().hex[:8]
        futures = {self.client.submit(run_chunk, fn, self._remote, ref, *args(i), key=f"{fn.__name__}-{tag}-{i}",
                                      pure=False): i for i, ref in enumerate(self.refs)}
        try:
            for fut in as_completed(list(futures)):
                i = futures[fut]
                result, nbytes = self._result(fut, i)
                self.bytes_read += nbytes
                yield i, result
        finally:
            for fut in futures:
                fut.cancel()


# --------------------------------------------------------------------------------------------
# per-chunk functions (values, costs of one chunk -> a small summary)


def chunk_sample(response, cost, rate: float, seed) -> dict:
    """Pass 1: the chunk's users, its cheapest allocation's cost and a Bernoulli(rate) sample of its
    rows (float64), drawn from `seed`."""
    rng = np.random.default_rng(seed)  # a SeedSequence of its own: independent of how the chunk was made
    pick = np.flatnonzero(rng.random(response.shape[0]) < rate)
    return {"n": int(response.shape[0]), "min_cost": _checks.min_cost_total(cost),
            "v": np.asarray(response[pick], dtype=np.float64), "c": np.asarray(cost[pick], dtype=np.float64)}


class _Band(NamedTuple):
    """The users fixed on [lo, hi] (`fixed`: their levels, the others, their total cost and value) and
    the upper `hull` of the others, with each hull segment classed as taken (`above`: efficiency > hi)
    or in the `band` [lo, hi] (indices)."""

    fixed: Fixed
    hull: Hull
    above: np.ndarray
    band: np.ndarray


def _band_state(values, costs, lo: float, hi: float) -> _Band:
    """The users fixed on [lo, hi] and the hulls of the others (`_Band`)."""
    fixed = fix_on_bracket(values, costs, lo, hi)
    hull = compute_hull(values[fixed.active], costs[fixed.active])
    above = hull.seg_eff > hi
    return _Band(fixed, hull, above, np.flatnonzero((hull.seg_eff >= lo) & ~above))


def chunk_band(response, cost, lo: float, hi: float) -> dict:
    """Pass 2: sums over the fixed users and the segments above the band, and the band's segments
    (efficiency, dc, dv, in the chunk's user order: the order `solve`'s greedy breaks ties by)."""
    (_, act, fixed_c, fixed_v), hull, above, band = _band_state(response, cost, lo, hi)
    return {"n": int(response.shape[0]), "active": int(act.shape[0]),
            "low_cost": fixed_c + float(hull.base_cost.sum()) + float(hull.seg_dc[above].sum()),
            "low_value": fixed_v + float(hull.base_value.sum()) + float(hull.seg_dv[above].sum()),
            "eff": hull.seg_eff[band], "dc": hull.seg_dc[band], "dv": hull.seg_dv[band]}


@dataclass(frozen=True)
class BandChoice:
    """What the greedy chose in one chunk's band [lo, hi]: the band segments `taken` (bool, the chunk's
    band), the fractional segment `crit` (an index into the chunk's band, or -1) and whether it is
    taken (`round_up`)."""

    lo: float
    hi: float
    taken: np.ndarray
    crit: int
    round_up: bool


def chunk_levels(response, cost, choice: BandChoice) -> dict:
    """Pass 3: the chunk's levels at λ* (the band's segments as the greedy chose, `BandChoice`).
    Returns the levels (int32), their value and cost, and the fractional user's (chunk row, lower
    level, upper level) when it is in this chunk."""
    band_taken, crit, round_up = choice.taken, choice.crit, choice.round_up
    (levels, act, _, _), hull, above, band = _band_state(response, cost, choice.lo, choice.hi)
    taken = above
    taken[band[band_taken]] = True
    counts = np.bincount(hull.seg_user[taken], minlength=hull.n)
    lv = np.take_along_axis(hull.vert_levels, counts[:, None], axis=1)[:, 0].astype(np.int32)
    frac = None
    if crit >= 0:
        u = int(hull.seg_user[band[crit]])
        upper = int(hull.vert_levels[u, counts[u] + 1])
        frac = (int(act[u]), int(lv[u]), upper)
        if round_up:
            lv[u] = upper
    levels[act] = lv
    rows = np.arange(levels.shape[0])
    return {"levels": levels, "frac": frac,
            "value": float(response[rows, levels].sum(dtype=np.float64)),
            "cost": float(cost[rows, levels].sum(dtype=np.float64))}


def chunk_sides(response, cost, lambda_: float, levels: bool = True) -> dict:
    """The chunk's levels just above λ (the cheaper tied level; left out when not `levels`), its tied
    users (rows), their dearer level and extra cost, and the cost of the cheaper levels (what
    `tie_share` sums)."""
    low, high = _sides(response, cost, lambda_)
    tied = np.flatnonzero(low != high)
    rows = np.arange(low.shape[0])
    return {"n": int(low.shape[0]), "low": low if levels else None, "tied": tied, "high": high[tied],
            "extra": _extra(cost, low, high)[tied],
            "base_cost": float(np.asarray(cost[rows, low], dtype=np.float64).sum())}


def chunk_decide(response, cost, lambda_: float, up: np.ndarray) -> dict:
    """The chunk's levels at λ: the cheaper tied level, the dearer one for its tied users `up` (positions
    among the chunk's tied users, as `chunk_sides` lists them); with their total cost."""
    low, high = _sides(response, cost, lambda_)
    tied = np.flatnonzero(low != high)[up]
    levels = low.astype(np.int32)
    levels[tied] = high[tied]
    rows = np.arange(levels.shape[0])
    return {"levels": levels, "cost": float(np.asarray(cost[rows, levels], dtype=np.float64).sum())}


# --------------------------------------------------------------------------------------------
# the client side


def _offsets(runner: ChunkRunner, sizes: dict[int, int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum([sizes[i] for i in range(len(runner.refs))])]).astype(np.int64)


class _Clock:
    """Wall and CPU seconds (of this process) per step of solve_chunked, summed when a step repeats:
    ``info["seconds"]``, ``info["cpu_seconds"]``."""

    def __init__(self):
        self.laps: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._t, self._c = time.perf_counter(), time.process_time()

    def lap(self, name: str) -> None:
        now, cpu = time.perf_counter(), time.process_time()
        self.laps[name] = self.laps.get(name, 0.0) + now - self._t
        self.cpu[name] = self.cpu.get(name, 0.0) + cpu - self._c
        self._t, self._c = now, cpu


def sample_size(n_users: int, cap: int = SAMPLE_USERS) -> int:
    """Users sampled in pass 1 for `n_users`: SAMPLE_SCALE * n^(2/3), at least SAMPLE_FLOOR (every user
    below it) and at most `cap`.

    The sample's hull and greedies cost about 5 us per sampled user; the bracket they give is
    ~1/sqrt(s) wide, and every user active in it costs a hull in the band and the levels passes (about
    3.5 us each). Their sum is least at s ~ 6 n^(2/3). (An eighth of n, at least 100,000, made the
    bracket 0.61 of 2.27 us CPU per user at 10^6, against 0.24 of 1.44 at 10^7.)
    """
    return int(min(cap, max(SAMPLE_FLOOR, SAMPLE_SCALE * n_users ** (2.0 / 3.0))))


def solve_chunked(source, budget: float, per_capita: bool = False, seed: int = 0, *, rounding: str = "sample",
                  client=None, levels: bool | Callable[[int, int, np.ndarray], None] = True,
                  log: Callable[[str], None] | None = None) -> Allocation:
    """`solve` over a chunk source (module doc): the same λ*, LP value, dual bound and levels.

    `client`: a dask.distributed Client (None: in this process). ``levels``: True gathers the levels
    into the result's ``levels``; a sink ``levels(chunk, first_user, levels)`` receives them chunk by
    chunk instead (in completion order; the result's ``levels`` is then empty); False: no levels pass
    (two passes: λ*, value, cost, dual bound and gap only; ``levels`` empty, the fractional user
    unknown: None). The sample that brackets λ* has at most `SAMPLE_USERS` users.
    ``info``: passes, bytes_read, the bracket, active users, band segments, seconds per step.
    """
    sink = levels if callable(levels) else None
    if rounding not in ("sample", "down"):
        raise AllocationInputError(f"rounding must be 'sample' or 'down', got {rounding!r}")
    b = _checks.check_budget(budget)
    _checks.check_solve_size(source.n_users, source.n_levels)
    runner = ChunkRunner(source, client)
    n_all, k = int(source.n_users), int(source.n_levels)
    say = log or (lambda _m: None)
    clock = _Clock()
    # pass 1: sizes, the cheapest allocation, a sample of users
    rate = min(1.0, sample_size(n_all, SAMPLE_USERS) / max(n_all, 1))
    first = dict(runner.map(chunk_sample, lambda i: (rate, [_SAMPLE_STREAM, seed, i])))
    sizes = {i: r["n"] for i, r in first.items()}
    n = sum(sizes.values())
    total = b * n if per_capita else b
    min_total = sum(r["min_cost"] for r in first.values())
    if total < min_total:
        _infeasible(min_total, total, n, per_capita)
    vs = np.concatenate([first[i]["v"] for i in range(len(first))])
    cs = np.concatenate([first[i]["c"] for i in range(len(first))])
    del first
    clock.lap("sample_pass")
    rng = np.random.default_rng(seed)
    if math.isinf(total):
        lo, hi = 0.0, 0.0
    elif vs.shape[0] == 0:
        lo, hi = 0.0, math.inf
    else:
        lo, hi = sample_bracket(vs, cs, total, n, rng, 4.0)
    clock.lap("bracket")
    say(f"solve_chunked: {n} users x {k} levels in {len(runner.refs)} chunks; sampled {vs.shape[0]}; "
        f"bracket lambda in [{lo:.6g}, {hi:.6g}]")
    widenings = 0
    while True:  # pass 2 (repeated only when λ* is outside the bracket)
        band = dict(runner.map(chunk_band, lambda i: (lo, hi)))
        order = range(len(band))
        low_cost = sum(band[i]["low_cost"] for i in order)
        low_value = sum(band[i]["low_value"] for i in order)
        eff = np.concatenate([band[i]["eff"] for i in order])
        dc = np.concatenate([band[i]["dc"] for i in order])
        dv = np.concatenate([band[i]["dv"] for i in order])
        seg_of = np.concatenate([[0], np.cumsum([band[i]["eff"].shape[0] for i in order])]).astype(np.int64)
        active = sum(band[i]["active"] for i in order)
        del band
        clock.lap("band_pass")
        remaining = total - low_cost
        band_total = float(dc.sum())
        say(f"solve_chunked: bracket [{lo:.6g}, {hi:.6g}]: {active} active users, {eff.shape[0]} band segments")
        everything = lo == 0.0 and remaining >= band_total
        if everything or 0.0 <= remaining < band_total or (lo, hi) == (0.0, math.inf):
            break  # [0, inf) holds λ* whenever the budget is feasible
        widenings += 1
        width = max(hi - lo, 1e-12 * max(hi, 1.0))
        if widenings >= MAX_WIDENINGS:
            lo, hi = 0.0, math.inf
        elif remaining < 0:  # λ* above the bracket
            lo, hi = hi, hi + 4 * width
        else:  # λ* below it
            lo, hi = max(0.0, lo - 4 * width), lo
        say(f"solve_chunked: lambda* is outside the bracket; widened to [{lo:.6g}, {hi:.6g}]")
    g = greedy(eff, dc, dv, max(0.0, remaining), rng)
    clock.lap("band_greedy")
    lam = 0.0 if everything else g.lambda_
    theta = g.theta if g.crit >= 0 else 0.0
    crit_dv = float(dv[g.crit]) if g.crit >= 0 else 0.0
    crit_dc = float(dc[g.crit]) if g.crit >= 0 else 0.0
    fractional = g.crit >= 0 and theta > 0.0
    rounded_up = round_fractional(theta, rounding, seed) if fractional else False
    crit_chunk = int(np.searchsorted(seg_of, g.crit, side="right") - 1) if fractional else -1
    figures = certificate(low_value=low_value + g.taken_dv, low_cost=low_cost + g.taken_dc, lambda_=lam, budget=total,
                          theta=theta, crit_dv=crit_dv, crit_dc=crit_dc, rounded_up=rounded_up)
    if not levels:
        return Allocation(levels=np.zeros(0, dtype=np.int32), **figures, fractional_user=None,
                          fraction=float(theta) if fractional else 0.0, fractional_levels=None, rounded_up=rounded_up,
                          kind="per_capita" if per_capita else "total", n_users=n, n_levels=k,
                          info=_info(runner, clock, client, (lo, hi), widenings, active, eff.shape[0], vs.shape[0]))
    # pass 3: the levels, chunk by chunk
    starts = _offsets(runner, sizes)
    kept = None if sink is not None else np.empty(n, dtype=np.int32)
    frac, value, cost = None, 0.0, 0.0

    def level_args(i):
        crit = int(g.crit - seg_of[i]) if i == crit_chunk else -1
        return (BandChoice(lo, hi, g.taken[seg_of[i]:seg_of[i + 1]], crit, rounded_up),)

    for i, out in runner.map(chunk_levels, level_args):
        value += out["value"]
        cost += out["cost"]
        if out["frac"] is not None:
            frac = (int(starts[i]) + out["frac"][0], out["frac"][1], out["frac"][2])
        if kept is not None:
            kept[starts[i]:starts[i + 1]] = out["levels"]
        else:
            sink(i, int(starts[i]), out["levels"])
    clock.lap("levels_pass")
    tol = 1e-9 * max(1.0, abs(figures["response"]))
    if abs(value - figures["response"]) > tol:  # the levels written must be the ones certified
        raise AssertionError(f"solve_chunked: written levels are worth {value!r}, certified {figures['response']!r}")
    return Allocation(levels=kept if kept is not None else np.zeros(0, dtype=np.int32), **figures,
                      fractional_user=None if frac is None else frac[0], fraction=float(theta) if fractional else 0.0,
                      fractional_levels=None if frac is None else (frac[1], frac[2]), rounded_up=rounded_up,
                      kind="per_capita" if per_capita else "total", n_users=n, n_levels=k,
                      info=_info(runner, clock, client, (lo, hi), widenings, active, eff.shape[0], vs.shape[0]))


def _info(runner, clock, client, bracket, widenings, active, band_segments, sampled_users) -> dict:
    return {"method": "chunked-bracketed-hull-greedy", "passes": runner.passes, "bytes_read": runner.bytes_read,
            "chunks": len(runner.refs), "bracket": bracket, "widenings": widenings, "active_users": active,
            "band_segments": int(band_segments), "sampled_users": int(sampled_users),
            "dask": client is not None, "seconds": clock.laps, "cpu_seconds": clock.cpu}


def _gather_sides(runner: ChunkRunner, lambda_: float) -> dict[int, dict]:
    return dict(runner.map(chunk_sides, lambda i: (float(lambda_),)))


def tie_share_chunked(source, lambda_: float, budget: float, *, client=None) -> float:
    """`tie_share` over a chunk source (one pass)."""
    sides = _gather_sides(ChunkRunner(source, client), lambda_)
    return share_of(sum(s["base_cost"] for s in sides.values()),
                    float(np.concatenate([s["extra"] for s in sides.values()]).sum()), budget)


def decide_at_chunked(source, lambda_: float, share: float = 0.0, seed: int = 0, *, client=None,
                      sink: Callable[[int, int, np.ndarray, Any], None] | None = None):
    """`decide_at` over a chunk source: the same levels (int32, N), gathered in one pass.

    With `sink`, nothing of the size of the population is held: pass 1 collects the tied users' extra
    costs only (`tied_up` picks the ones going up, as `decide_at` does), pass 2 hands every chunk's
    levels to ``sink(chunk, first_user, levels, ids)`` (ids: the streamed source's ids of the chunk,
    else None), in completion order; returns {"users", "cost": the levels' total cost,
    "level_counts"}."""
    runner = ChunkRunner(source, client)
    if sink is not None:
        return _decide_into(runner, float(lambda_), share, seed, sink)
    sides = _gather_sides(runner, lambda_)
    order = range(len(sides))
    starts = _offsets(runner, {i: s["low"].shape[0] for i, s in sides.items()})
    levels = np.concatenate([sides[i]["low"] for i in order]).astype(np.int32)
    tied = np.concatenate([sides[i]["tied"] + starts[i] for i in order])
    high = np.concatenate([sides[i]["high"] for i in order])
    up = tied_up(np.concatenate([sides[i]["extra"] for i in order]), share, seed)
    levels[tied[up]] = high[up]
    return levels


def _decide_into(runner: ChunkRunner, lambda_: float, share: float, seed: int, sink) -> dict:
    sides = dict(runner.map(chunk_sides, lambda i: (lambda_, False)))
    order = range(len(sides))
    starts = _offsets(runner, {i: s["n"] for i, s in sides.items()})
    tied_of = np.concatenate([[0], np.cumsum([sides[i]["tied"].shape[0] for i in order])]).astype(np.int64)
    up = np.sort(tied_up(np.concatenate([sides[i]["extra"] for i in order]), share, seed))
    del sides
    cuts = np.searchsorted(up, tied_of)
    cost, counts = 0.0, np.zeros(runner.source.n_levels, dtype=np.int64)
    for i, out in runner.map(chunk_decide, lambda i: (lambda_, up[cuts[i]:cuts[i + 1]] - tied_of[i])):
        cost += out["cost"]
        counts += np.bincount(out["levels"], minlength=counts.shape[0])
        sink(i, int(starts[i]), out["levels"], runner.ids)
    return {"users": int(starts[-1]), "cost": cost, "level_counts": counts}


def predict_chunk(model, frame):
    """A model's (values, costs) for one slice of users (the scoring task)."""
    return model.predict(frame)


def map_frame_stream(fn: Callable, obj, frames: Iterable, *, client=None) -> Iterator[tuple[Any, Any]]:
    """(frame, fn(obj, frame)) for every frame of `frames` (e.g. a population read in chunks), in order:
    in this process one frame at a time (the next is read after), or as Dask tasks on `client` (`obj`,
    e.g. a fitted model, sent once) submitted as the frames are read, at most `ChunkRunner.WINDOW` per
    worker in flight, so that the client holds a bounded number of frames."""
    if client is None:
        for frame in frames:
            yield frame, fn(obj, frame)
        return
    remote = on_cluster(client, obj)
    window = ChunkRunner.WINDOW * max(1, len(client.scheduler_info().get("workers", {})))
    frames, pending, first = iter(frames), deque(), 0
    try:
        while True:
            for frame in itertools.islice(frames, window - len(pending)):
                with warnings.catch_warnings():  # the frame travels inside its task on purpose (see _map_stream)
                    warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
                    pending.append((first, frame, client.submit(fn, remote, frame, pure=False)))
                first += len(frame)
            if not pending:
                return
            start, frame, fut = pending.popleft()
            try:
                result = fut.result()
            except Exception as exc:
                raise ChunkError(f"rows {start}..{start + len(frame) - 1}: {type(exc).__name__}: {exc}") from exc
            fut.release()
            yield frame, result
    finally:
        for _, _, fut in pending:
            fut.cancel()

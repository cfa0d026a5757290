"""The pipeline's coefficients as a chunk source: the warehouse's response_coefficients rows of one
model version and target, read chunk by chunk through a DuckDB cursor (an Arrow record-batch stream of
the `frames.coefficients` statement, in its user order), never all in memory.

`StoredCoefficients` is a *streamed* chunk source (`chunked.ChunkRunner`): each pass re-runs the
statement on a cursor of its own and cuts the stream into chunks of `rows` users on the client; on
Dask the chunks read are sent to the workers as tasks (the workers never open the warehouse, which
the run's process holds). `BudgetPlan.decide` hands the decision at a stored λ* to a sink chunk by
chunk (the allocation asset writes the rows on its connection, inside its transaction: all rows or
none); `sampled_frontier` is the budget–value frontier of a uniform sample of at most `FRONTIER_USERS`
users (every user below that: the exact frontier).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from promo_assets.allocation.chunked import ChunkRunner, chunk_sample, solve_chunked, tie_share_chunked
from promo_assets.allocation.errors import AllocationInputError, InfeasibleBudgetError
from promo_assets.allocation.frontier import Frontier, frontier
from promo_assets.store import models as models_store

#: users of the frontier plotted in budget_dual's metadata (a uniform sample above this)
FRONTIER_USERS = 200_000


class StoredCoefficients:
    """response_coefficients of (campaign, model, version, target) in chunks of `rows` users, in the
    statement's user order (`ORDER BY user_id, level`, the order the in-memory path used). Checks that
    every user has exactly the levels 0..n_levels-1."""

    def __init__(self, con, campaign: str, model: str, version: str, target: str, n_levels: int,
                 rows: int = 1 << 16):
        self._con = con
        self.params = [campaign, model, version, target]
        self.n_levels, self.rows = int(n_levels), max(1, int(rows))
        self.what = f"{target} coefficients of {model} {version}"
        n_rows, n_users = models_store.coefficient_count(con, *self.params)
        if n_rows != n_users * self.n_levels:
            raise AllocationInputError(f"{self.what}: {n_rows} rows for {n_users} users, expected {self.n_levels} "
                                       "levels per user; re-materialize response_coefficients")
        self.n_users = int(n_users)

    def chunks(self) -> list[int]:
        return list(range(-(-self.n_users // self.rows)))

    def describe(self, ref) -> str:
        first = ref * self.rows
        return f"{self.what}, users {first}..{min(first + self.rows, self.n_users) - 1}"

    def stream(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(response, cost, user ids) per chunk, in order: one ordered scan on a cursor of its own."""
        import pyarrow as pa

        step = self.rows * self.n_levels
        cur = self._con.cursor()
        try:
            reader = models_store.coefficient_batches(cur, *self.params, step)
            rest, first = None, 0
            for batch in reader:
                rest = pa.Table.from_batches([batch]) if rest is None else pa.concat_tables([rest, pa.Table.from_batches([batch])])
                while rest.num_rows >= step:
                    yield self._chunk(rest.slice(0, step), first)
                    rest, first = rest.slice(step), first + self.rows
            if rest is not None and rest.num_rows:
                yield self._chunk(rest, first)
        finally:
            cur.close()

    def _chunk(self, table, first: int):
        k = self.n_levels
        m = table.num_rows // k
        level = table.column("level").to_numpy()
        if table.num_rows != m * k or not np.array_equal(level.reshape(m, k), np.broadcast_to(np.arange(k), (m, k))):
            raise AllocationInputError(f"{self.what}: the users from {first} on do not each have the levels "
                                       f"0..{k - 1}; re-materialize response_coefficients")
        users = table.column("user_id").to_numpy(zero_copy_only=False)[::k]
        response = table.column("response").to_numpy().reshape(m, k)
        cost = table.column("cost").to_numpy().reshape(m, k)
        return response, cost, users


def sampled_frontier(source, *, client=None, users: int = FRONTIER_USERS, seed: int = 0) -> tuple[Frontier, int]:
    """(the frontier of a uniform sample of about `users` users of `source`, users in the sample):
    one pass; the whole population when it has at most `users` users (then exact)."""
    rate = min(1.0, users / max(source.n_users, 1))
    parts = dict(ChunkRunner(source, client).map(chunk_sample, lambda i: (rate, [seed, i])))
    vs = np.concatenate([parts[i]["v"] for i in range(len(parts))])
    cs = np.concatenate([parts[i]["c"] for i in range(len(parts))])
    return frontier(vs, cs), int(vs.shape[0])


def frontier_points(source, *, client=None, points: int = 12) -> list[dict]:
    """About `points` points of the budget–response frontier (`sampled_frontier`), evenly spaced over its
    breakpoints, per user of the sample: λ, cost and predicted response per capita (budget_dual's metadata)."""
    fr, n_fr = sampled_frontier(source, client=client)
    idx = np.unique(np.linspace(0, len(fr.costs) - 1, points).round().astype(int))
    return [{"lambda_": float(fr.lambdas[i]), "cost_per_capita": float(fr.costs[i]) / n_fr,
             "response_per_capita": float(fr.response[i]) / n_fr} for i in idx]


def solve_budgets_chunked(source, budgets, *, client=None, log=None) -> list[tuple]:
    """Every per-capita budget solved exactly over `source` chunk by chunk (λ* only, and the share of
    the users tied at λ* the optimum moves up): [(budget, Allocation, tie share)] for the solved
    budgets and [(budget, InfeasibleBudgetError)] for those below the cheapest allocation, in order."""
    out = []
    for b in budgets:
        try:
            res = solve_chunked(source, b, per_capita=True, client=client, log=log, levels=False)
            out.append((b, res, tie_share_chunked(source, res.lambda_, b * source.n_users, client=client)))
        except InfeasibleBudgetError as exc:
            out.append((b, exc))
    return out

"""Input validation shared by the allocation solvers (chunked, so that it never copies the inputs)."""

from __future__ import annotations

import math

import numpy as np

from promo_assets.config import settings

from .errors import AllocationInputError, SolveTooLargeError

#: elements per chunk for streaming passes over N x K arrays (~1M elements, 4-8 MB)
CHUNK_ELEMENTS = 1 << 20


def check_solve_size(n_users: int, n_levels: int) -> None:
    """SolveTooLargeError when users x levels exceeds the cap per solve (settings.max_solve_cells)."""
    cap = settings.max_solve_cells()
    cells = int(n_users) * int(n_levels)
    if cells > cap:
        raise SolveTooLargeError(
            f"{int(n_users):,} users x {int(n_levels)} levels = {cells:,} user-level cells is more than one solve "
            f"takes (PROMO_MAX_SOLVE_CELLS={cap:,}): each budget's exact solve passes over every cell several "
            "times, about a microsecond per cell and pass on one core. Score fewer users (the population/ file), "
            "use fewer levels, or raise PROMO_MAX_SOLVE_CELLS")


def rows_per_chunk(k: int, elements: int = CHUNK_ELEMENTS) -> int:
    return max(1, elements // max(1, k))


def as_matrix(name: str, a, *, ndim: int = 2) -> np.ndarray:
    """Return ``a`` as a float ndarray without copying float32/float64 input."""
    try:
        arr = np.asarray(a)
    except Exception as exc:  # ragged lists etc.
        raise AllocationInputError(f"{name} could not be read as an array: {exc}") from exc
    if arr.dtype.kind in "biu":
        arr = arr.astype(np.float64)
    elif arr.dtype.kind == "f":
        if arr.dtype.itemsize < 4:
            arr = arr.astype(np.float32)
        elif arr.dtype.itemsize > 8:
            arr = arr.astype(np.float64)
    else:
        raise AllocationInputError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        what = "users x levels" if ndim == 2 else "users x levels x budgets"
        raise AllocationInputError(f"{name} must be a {ndim}-D array ({what}), got shape {arr.shape}")
    if arr.size == 0:
        raise AllocationInputError(
            f"{name} is empty (shape {arr.shape}); need at least one user and one level"
        )
    return arr


def _first_bad(name: str, a: np.ndarray, bad_fn, what: str, hint: str = "") -> None:
    """Count entries where ``bad_fn`` is true (chunked) and raise with the first index."""
    n = a.shape[0]
    rows = rows_per_chunk(int(np.prod(a.shape[1:])))
    count = 0
    first = None
    first_val = None
    for s in range(0, n, rows):
        blk = a[s : s + rows]
        bad = bad_fn(blk)
        c = int(np.count_nonzero(bad))
        if c and first is None:
            loc = np.unravel_index(int(np.argmax(bad)), bad.shape)
            first = (int(loc[0]) + s,) + tuple(int(x) for x in loc[1:])
            first_val = blk[loc]
        count += c
    if count:
        pos = ", ".join(
            f"{lab} {i}" for lab, i in zip(("user", "level", "budget"), first, strict=False)
        )
        raise AllocationInputError(
            f"{name} has {count} {what} entr{'y' if count == 1 else 'ies'}; first at {pos} "
            f"(value {first_val!r}){hint}"
        )


def check_finite(name: str, a: np.ndarray) -> None:
    """Raise AllocationInputError naming the array, the count and the first NaN/inf entry.

    One streaming pass of native-dtype sums (NaN/inf propagate); the entry-wise count only runs
    when a sum is not finite (a finite overflow then raises nothing).
    """
    n = a.shape[0]
    rows = rows_per_chunk(int(np.prod(a.shape[1:])))
    with np.errstate(over="ignore", invalid="ignore"):
        for s in range(0, n, rows):
            if not np.isfinite(a[s : s + rows].sum()):
                _first_bad(name, a, lambda b: ~np.isfinite(b), "non-finite (NaN or inf)")
                return


def check_nonnegative(name: str, a: np.ndarray) -> None:
    n = a.shape[0]
    rows = rows_per_chunk(int(np.prod(a.shape[1:])))
    for s in range(0, n, rows):
        if a[s : s + rows].min() < 0:
            _first_bad(
                name,
                a,
                lambda b: b < 0,
                "negative",
                "; cost must be >= 0 (the ratio form handles signed costs: use solve_ratio)",
            )


def check_pair(response, cost, *, allow_negative_costs: bool = False):
    """Validate a predicted response / cost pair of N x K arrays.

    Returns (response, cost) as float arrays (not copied)."""
    v = as_matrix("response", response)
    c = as_matrix("cost", cost)
    if v.shape != c.shape:
        raise AllocationInputError(
            f"response and cost must have the same shape (users x levels); got response {v.shape} "
            f"and cost {c.shape}"
        )
    check_finite("response", v)
    check_finite("cost", c)
    if not allow_negative_costs:
        check_nonnegative("cost", c)
    return v, c


def check_budget(budget, name: str = "budget") -> float:
    try:
        b = float(budget)
    except (TypeError, ValueError) as exc:
        raise AllocationInputError(f"{name} must be a number, got {budget!r}") from exc
    if math.isnan(b) or b == -math.inf:
        raise AllocationInputError(f"{name} must be a finite number or +inf, got {b}")
    return b


def min_cost_total(cost: np.ndarray, budget: float | None = None) -> float | None:
    """Sum over users of the cheapest level's cost (the minimum feasible total budget).

    With ``budget`` given, returns None (feasible) without the row-wise pass when the budget
    covers every user at level 0 (an upper bound of the minimum).
    """
    n, k = cost.shape
    if budget is not None:
        col0 = 0.0
        rows = rows_per_chunk(k)
        for s in range(0, n, rows):
            col0 += float(cost[s : s + rows, 0].sum(dtype=np.float64))
        if budget >= col0:
            return None
    rows = rows_per_chunk(k)
    tot = 0.0
    for s in range(0, n, rows):
        tot += float(cost[s : s + rows].min(axis=1).sum(dtype=np.float64))
    return tot

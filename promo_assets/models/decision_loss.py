"""Q(v, c) on a mini-batch of RCT rows and its black-box gradient estimators (end-to-end paper §3.3-§3.5).

The marketing goal of a mini-batch of B RCT users (logged level t_i, response y_i, cost z_i, inverse
logging propensity w_i) under predicted values v and costs c (B x K) at a per-capita budget b is
Q(v, c) (Algorithm 1): bisection on the multiplier alpha in [0, alpha_max], each midpoint's KKT
allocation argmax_j (v_ij - alpha c_ij) (Eq. 4), its EOM value V and cost C over the users whose
logged level equals their assigned one (Eq. 5-6; self-normalized IPW as `evaluation.eom`), stop when
|C - b| <= tol or after `max_iter` iterations, Q = V at the last midpoint. Q is piecewise constant in
(v, c), so its gradient is estimated:

- finite differences (Eq. 8) on F' randomly chosen entries with step h (symmetric quotient), the
  other entries 0;
- NES with antithetic sampling (Eq. 10): N'/2 Gaussian directions and their negatives,
  grad ~ 1 / (sigma N') sum_i delta_i Q(v + sigma delta_i, c + sigma delta'_i) (v and c perturbed
  jointly when both are estimated).

The surrogate loss (Eq. 11) -sum(v * stopgrad(g_v)) - sum(c * stopgrad(g_c)) has the estimated
gradient as its gradient with respect to (v, c) (`surrogate_loss`).

**How Q is vectorized (no loop over users or perturbations).** User i's logged level t_i is the
decision rule's choice exactly for alpha in an interval [a_i, b_i) (`matched_intervals`: the
rule's tie rule, the cheaper level wins a tie, makes the lower end inclusive). The EOM sums at any
alpha are then prefix sums over the users sorted by a_i minus those sorted by b_i
(`IntervalEOM`): O(log B) per multiplier after one sort. All perturbed copies of a batch run
their bisections together as tensors: NES builds P = N' interval sets in ONE batched bisection
(P x B x K work, one sort each; the perturbed copies in float32, see `nes_gradient`); finite differences change one user per perturbation, so each of the 2F' perturbations
is the base batch's sums minus that user's old contribution plus its new one (P x K work). The
result equals `evaluation.eom.q_at_budget_bisection` with the same alpha_max, max_iter and tol
(tests compare them); alpha_max is fixed per step (`q_lambda_max`) so that every perturbed copy
searches the same interval.

Reuse (e.g. decision-focused losses of other papers): `RCTBatch` (a mini-batch's logged arrays),
`matched_intervals`, `IntervalEOM.at(lambdas)` (EOM value, cost and |S| of the KKT allocations at
many multipliers for many (v, c) copies at once), `q_bisection` (batched Algorithm 1),
`fd_estimate` / `nes_estimate` (the estimators for any black box), `fd_gradient`,
`nes_gradient`, `surrogate_loss`. Torch only, no dagster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from promo_assets.evaluation.eom import inverse_propensity, lambda_upper_bound
from promo_assets.models.errors import ModelInputError

__all__ = [
    "NES", "Bisection", "FiniteDifferences", "IntervalEOM", "RCTBatch", "fd_estimate", "fd_gradient", "matched_intervals", "nes_directions", "nes_estimate",
    "nes_gradient",
    "q_at_budgets", "q_bisection",
    "q_lambda_max", "q_value", "remove_invariant_directions", "remove_level_shifts", "surrogate_loss",
]

DTYPE = torch.float64


@dataclass
class RCTBatch:
    """The logged RCT arrays of a mini-batch: levels t (B int64), responses y, costs z and inverse
    propensities w (B float64 each; w = 1 / p, or the batch's empirical level shares' inverse)."""

    logged: torch.Tensor
    response: torch.Tensor
    cost: torch.Tensor
    ipw: torch.Tensor

    @classmethod
    def from_arrays(cls, logged, response, cost, propensity=None, ipw=None) -> "RCTBatch":
        """From numpy / torch arrays; `propensity` as in `evaluation.eom` (None: empirical shares),
        or `ipw` given directly (e.g. the training frame's IPS weights)."""
        t = torch.as_tensor(np.array(logged), dtype=torch.int64)
        if ipw is None:
            ipw = inverse_propensity(t.numpy(), None if propensity is None else np.asarray(propensity))
        out = cls(t, torch.as_tensor(np.array(response), dtype=DTYPE), torch.as_tensor(np.array(cost), dtype=DTYPE),
                  torch.as_tensor(np.array(ipw), dtype=DTYPE))
        n = t.shape[0]
        if any(a.shape != (n,) for a in (out.response, out.cost, out.ipw)):
            raise ModelInputError("RCTBatch: logged, response, cost and ipw must be 1-D arrays of one length")
        return out

    @property
    def n(self) -> int:
        return int(self.logged.shape[0])

    def channels(self) -> torch.Tensor:
        """B x 3: the weight, weighted response and weighted cost of each user (the EOM sums' terms)."""
        return torch.stack([self.ipw, self.ipw * self.response, self.ipw * self.cost], dim=-1)


# ------------------------------------------------------------------------------- intervals
def matched_intervals(response: torch.Tensor, cost: torch.Tensor, logged: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[a, b): the multipliers alpha >= 0 at which the decision rule (allocation.decision: argmax_j
    v_j - alpha c_j, a tie goes to the cheaper level, then the lower index) picks each user's
    logged level. values / costs: (..., B, K), broadcastable against each other (e.g. P perturbed
    copies of v against one c of shape (1, B, K)); logged: (B,). Returns two (..., B) tensors; an
    empty interval is (inf, inf).

    Written for the NES batch (P x B x K with K up to ~100): the slopes are divided once and masked
    in place, and the tie check on equally dear levels (a few more full passes) runs only when some
    level other than the logged one costs exactly as much as it, which perturbed continuous costs
    almost never do."""
    def differences(x: torch.Tensor) -> torch.Tensor:
        t = logged.reshape((1,) * (x.dim() - 2) + (-1, 1)).expand(*x.shape[:-1], 1)
        return x - x.gather(-1, t)

    dv, dc = differences(response), differences(cost)
    inf = math.inf
    slope = dv / dc  # alpha at which level j ties with the logged level (inf / nan where dc == 0: masked)
    a = slope.masked_fill(dc <= 0, -inf).amax(-1).clamp_min(0.0)  # dearer levels: t wins for alpha >= slope
    b = slope.masked_fill_(dc >= 0, inf).amin(-1)  # cheaper levels: t wins for alpha < slope
    ties = dc == 0
    empty = ~(a < b)
    if int(torch.count_nonzero(ties)) * dc.shape[-1] > ties.numel():  # a tie besides the logged level itself
        k = response.shape[-1]
        t = logged.reshape((1,) * (dv.dim() - 2) + (-1, 1))
        lower_index = torch.arange(k).reshape((1,) * (dv.dim() - 1) + (k,)) < t
        empty = empty | (ties & ((dv > 0) | ((dv == 0) & lower_index))).any(-1)  # an equally dear level wins
    return a.masked_fill_(empty, inf), b.masked_fill_(empty, inf)


class IntervalEOM:
    """EOM sums of the KKT allocations at any multiplier, from the users' matched intervals.

    `lower`, `upper`: (P, B) intervals (P copies of a batch), `terms`: B x 3 (`RCTBatch.channels`).
    `sums(lambdas)` for lambdas (P, L) -> (P, L, 3) sums of weight, weight x response, weight x cost
    over the users matched at each multiplier; `at(lambdas)` -> (V, C, n_matched), each (P, L)."""

    def __init__(self, lower: torch.Tensor, upper: torch.Tensor, terms: torch.Tensor):
        if lower.dim() == 1:
            lower, upper = lower[None], upper[None]
        self.lower, order_a = torch.sort(lower, dim=-1)
        self.upper, order_b = torch.sort(upper, dim=-1)
        zero = torch.zeros(lower.shape[0], 1, 4, dtype=terms.dtype)
        terms4 = torch.cat([terms, torch.ones(terms.shape[0], 1, dtype=terms.dtype)], dim=-1)  # + a count
        self.cum_a = torch.cat([zero, torch.cumsum(terms4[order_a], dim=1)], dim=1)  # (P, B + 1, 4)
        self.cum_b = torch.cat([zero, torch.cumsum(terms4[order_b], dim=1)], dim=1)

    def sums(self, lambdas: torch.Tensor) -> torch.Tensor:
        lam = lambdas.contiguous()
        if self.lower.shape[0] == 1:  # one sorted sequence: numpy's search is ~30x faster than torch's here
            ia = torch.from_numpy(np.searchsorted(self.lower[0].numpy(), lam.numpy(), side="right"))
            ib = torch.from_numpy(np.searchsorted(self.upper[0].numpy(), lam.numpy(), side="right"))
        else:
            ia = torch.searchsorted(self.lower, lam, right=True)  # users with a_i <= alpha
            ib = torch.searchsorted(self.upper, lam, right=True)  # users with b_i <= alpha
        take = lambda cum, idx: cum.gather(1, idx[..., None].expand(*idx.shape, 4))  # noqa: E731
        return take(self.cum_a, ia) - take(self.cum_b, ib)

    @staticmethod
    def ratios(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        den = s[..., 0]
        ok = s[..., 3] > 0.5
        nan = torch.full_like(den, math.nan)
        safe = torch.where(ok, den, torch.ones_like(den))
        return (torch.where(ok, s[..., 1] / safe, nan), torch.where(ok, s[..., 2] / safe, nan),
                s[..., 3].round().to(torch.int64))

    def at(self, lambdas: torch.Tensor):
        return self.ratios(self.sums(lambdas))


def _bisect(sums_at, n_copies: int, budget, lambda_max: float, max_iter: int, tol: float) -> torch.Tensor:
    """Algorithm 1 for `n_copies` searches at once; `sums_at(alpha (P,)) -> (P, 4)` EOM sums; `budget`
    a number or one per search (P,)."""
    lo = torch.zeros(n_copies, dtype=DTYPE)
    hi = torch.full((n_copies,), float(lambda_max), dtype=DTYPE)
    done = torch.zeros(n_copies, dtype=torch.bool)
    value = torch.full((n_copies,), math.nan, dtype=DTYPE)
    for _ in range(int(max_iter)):
        mid = 0.5 * (lo + hi)
        v, c, _ = IntervalEOM.ratios(sums_at(mid))
        value = torch.where(done, value, v)
        done = done | ((c - budget).abs() <= tol)
        if bool(done.all()):
            break
        dear = c > budget  # NaN (nobody matched) counts as cheap, as in the reference
        lo = torch.where(done | ~dear, lo, mid)
        hi = torch.where(done | dear, hi, mid)
    return value


def q_lambda_max(response: torch.Tensor, cost: torch.Tensor, margin: float = 2.0) -> float:
    """alpha_max for a step: `evaluation.eom.lambda_upper_bound` of (v, c) times `margin`, so that
    perturbed copies of (v, c) have their upper bound inside the same search interval."""
    return float(lambda_upper_bound(response.detach().cpu().numpy(), cost.detach().cpu().numpy())) * margin


def q_bisection(response: torch.Tensor, cost: torch.Tensor, batch: RCTBatch, budget: float, *,
                lambda_max: float, max_iter: int = 50, tol: float = 1e-4) -> torch.Tensor:
    """Q(v, c) (Algorithm 1) for P copies at once: values / costs (P, B, K) or (B, K) -> Q (P,)
    (costs may be (1, B, K) against P copies of values). float32 inputs (NES's perturbed copies)
    keep their dtype for the P x B x K passes; the intervals, sums and bisection are float64."""
    keep = response.dtype == torch.float32 and cost.dtype == torch.float32
    v = response.detach() if keep else response.detach().to(DTYPE)
    c = cost.detach() if keep else cost.detach().to(DTYPE)
    if v.dim() == 2:
        v, c = v[None], c[None]
    lower, upper = matched_intervals(v, c, batch.logged)
    eom = IntervalEOM(lower.to(DTYPE), upper.to(DTYPE), batch.channels())
    return _bisect(lambda mid: eom.sums(mid[:, None])[:, 0], v.shape[0], budget, lambda_max, max_iter, tol)


def q_at_budgets(response: torch.Tensor, cost: torch.Tensor, batch: RCTBatch, budgets, *, lambda_max: float,
                 max_iter: int = 50, tol: float = 1e-4) -> torch.Tensor:
    """Q(v, c) of one (B, K) pair at several budgets, (L,): one interval set and one sort for all of
    them, their L bisections run together (each equals `q_bisection` at that budget)."""
    v = response.detach().to(DTYPE)
    c = cost.detach().to(DTYPE)
    lower, upper = matched_intervals(v, c, batch.logged)
    eom = IntervalEOM(lower, upper, batch.channels())
    b = torch.as_tensor(list(budgets), dtype=DTYPE)
    return _bisect(lambda mid: eom.sums(mid[None])[0], b.shape[0], b, lambda_max, max_iter, tol)


def q_value(response, cost, batch: RCTBatch, budget: float, *, lambda_max: float | None = None,
            max_iter: int = 50, tol: float = 1e-4) -> float:
    """Q(v, c) of one (B, K) pair (alpha_max default: `lambda_upper_bound`, as the reference)."""
    v = torch.as_tensor(response, dtype=DTYPE)
    c = torch.as_tensor(cost, dtype=DTYPE)
    lam = float(lambda_upper_bound(v.numpy(), c.numpy())) if lambda_max is None else float(lambda_max)
    return float(q_bisection(v, c, batch, budget, lambda_max=lam, max_iter=max_iter, tol=tol)[0])


# ------------------------------------------------------------------------------- estimators
def fd_estimate(evaluate, numel: int, n_entries: int, h: float, generator: torch.Generator) -> torch.Tensor:
    """Eq. 8 for any black box: `evaluate(index (P,), delta (P,)) -> f (P,)` gives f at x + delta
    e_index for P single-entry perturbations of a flat x with `numel` entries. F' = `n_entries`
    entries drawn without replacement get (f(x + h e_l) - f(x - h e_l)) / (2h), the others 0
    (a NaN f counts as no change). Returns the flat (numel,) estimate."""
    f = min(int(n_entries), int(numel))
    flat = torch.randperm(int(numel), generator=generator)[:f]
    q = evaluate(torch.cat([flat, flat]), torch.cat([torch.full((f,), h, dtype=DTYPE), torch.full((f,), -h, dtype=DTYPE)]))
    g = torch.zeros(int(numel), dtype=DTYPE)
    g[flat] = torch.nan_to_num((q[:f] - q[f:]) / (2.0 * h), nan=0.0)
    return g


MAX_BATCH_ELEMENTS = 1 << 25  # perturbed entries per vectorized Q call (P x B x K); more are split in chunks


def nes_directions(n_directions: int, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """The first half of the N' antithetic NES directions (Eq. 10): (N'/2, *shape) standard normal
    float32 draws delta_i, drawn in one call; the other half is their negatives (delta_{N'/2+i} =
    -delta_i). float32: ~6x faster to draw than float64 on CPU, and exact enough for a perturbation
    of scale sigma."""
    if n_directions < 2 or n_directions % 2:
        raise ModelInputError(f"NES needs an even number of directions >= 2 (antithetic pairs), got {n_directions}")
    return torch.randn((n_directions // 2,) + tuple(shape), generator=generator, dtype=torch.float32)


def nes_estimate(evaluate, shape: tuple[int, ...], n_directions: int, sigma: float, generator: torch.Generator,
                 chunk: int | None = None, *, pairs: bool = False) -> torch.Tensor:
    """Eq. 10 with antithetic sampling for any black box. `evaluate(delta (P, *shape)) -> f (P,)`
    gives f(x + sigma delta) for the P = N' directions [delta_1..delta_{N'/2}, -delta_1..-delta_{N'/2}]
    (`nes_directions` and their negatives); with `pairs`, `evaluate` gets only the N'/2 first ones
    and returns the N' values [f(x + sigma delta_i)..., f(x - sigma delta_i)...] itself (so that it
    can build the perturbed copies without materializing -delta). All directions go to ONE
    `evaluate` call (one batched, vectorized evaluation of every perturbed copy) unless `chunk`
    caps the directions per call; the directions, and so the estimate, do not depend on `chunk`.
    Returns sum_i delta_i f(x + sigma delta_i) / (sigma N') = sum_{i <= N'/2} delta_i (f+_i - f-_i)
    / (sigma N') (a NaN f counts as 0)."""
    half = nes_directions(n_directions, shape, generator)
    step = half.shape[0] if chunk is None else max(1, int(chunk) // 2)
    diffs = []
    for s in range(0, half.shape[0], step):
        d = half[s:s + step]
        f = torch.nan_to_num(evaluate(d) if pairs else evaluate(torch.cat([d, -d])), nan=0.0).to(DTYPE)
        diffs.append(f[:d.shape[0]] - f[d.shape[0]:])
    return torch.tensordot(torch.cat(diffs), half.to(DTYPE), dims=1) / (sigma * n_directions)


@dataclass(frozen=True)
class Bisection:
    """How Q's multiplier is searched (`q_bisection`): `lambda_max` alpha_max (None: `q_lambda_max` of
    the batch's predictions), `max_iter` iterations, tolerance `tol`."""

    lambda_max: float | None = None
    max_iter: int = 50
    tol: float = 1e-4


@dataclass(frozen=True)
class FiniteDifferences:
    """Eq. 8's settings: F' = `entries` random entries perturbed by +-`h`."""

    entries: int
    h: float


@dataclass(frozen=True)
class NES:
    """Eq. 10's settings: N' = `directions` antithetic directions of scale `sigma`; `chunk` perturbed
    copies per batched bisection (None: as many as keep a call within `MAX_BATCH_ELEMENTS` entries)."""

    directions: int
    sigma: float
    chunk: int | None = None


def fd_gradient(response: torch.Tensor, cost: torch.Tensor, batch: RCTBatch, budget: float,
                estimator: FiniteDifferences, generator: torch.Generator, *, wrt_costs: bool = True,
                search: Bisection = Bisection()) -> tuple[torch.Tensor, torch.Tensor | None]:
    """dQ/dv (and dQ/dc when `wrt_costs`) by Eq. 8 on F' = `estimator.entries` random entries of each
    (`fd_estimate`), each perturbed copy's Q from the base batch's sums and the one changed user
    (no re-evaluation of the batch). Returns (g_v, g_c or None), B x K."""
    v = response.detach().to(DTYPE)
    c = cost.detach().to(DTYPE)
    n, k = v.shape
    n_entries, h = estimator.entries, estimator.h
    lam = q_lambda_max(v, c) if search.lambda_max is None else float(search.lambda_max)
    max_iter, tol = search.max_iter, search.tol
    lower, upper = matched_intervals(v, c, batch.logged)
    base = IntervalEOM(lower, upper, batch.channels())
    terms = torch.cat([batch.channels(), torch.ones(n, 1, dtype=DTYPE)], dim=-1)  # (B, 4)

    def evaluate_on(target: str):
        def evaluate(flat: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
            rows, cols = flat // k, flat % k
            pv, pc = v[rows].clone(), c[rows].clone()  # (P, K): the perturbed users' rows
            (pv if target == "v" else pc)[torch.arange(rows.shape[0]), cols] += delta
            new_a, new_b = matched_intervals(pv, pc, batch.logged[rows])
            old_a, old_b, user = lower[rows], upper[rows], terms[rows]

            def sums_at(mid):
                s = base.sums(mid[None])[0]  # (P, 4): the base batch at each copy's multiplier
                was = ((old_a <= mid) & (mid < old_b)).to(DTYPE)[:, None]
                now = ((new_a <= mid) & (mid < new_b)).to(DTYPE)[:, None]
                return s + (now - was) * user

            return _bisect(sums_at, rows.shape[0], budget, lam, max_iter, tol)
        return evaluate

    g_v = fd_estimate(evaluate_on("v"), n * k, n_entries, h, generator).reshape(n, k)
    g_c = fd_estimate(evaluate_on("c"), n * k, n_entries, h, generator).reshape(n, k) if wrt_costs else None
    return g_v, g_c


def nes_gradient(response: torch.Tensor, cost: torch.Tensor, batch: RCTBatch, budget: float, estimator: NES,
                 generator: torch.Generator, *, wrt_costs: bool = True,
                 search: Bisection = Bisection()) -> tuple[torch.Tensor, torch.Tensor | None]:
    """dQ/dv (and dQ/dc when `wrt_costs`, perturbed jointly with v) by Eq. 10 with antithetic
    sampling (`nes_estimate`): all N' = `estimator.directions` perturbed copies of the batch,
    (N', B, K), in ONE batched bisection (`q_bisection`), or `estimator.chunk` copies per call
    (default: as many as keep a call within `MAX_BATCH_ELEMENTS` perturbed entries). The perturbed
    copies are float32 (v + sigma delta and v - sigma delta written straight from the float32
    directions): half the memory traffic of the P x B x K passes; the intervals, EOM sums and
    bisection stay float64. Returns (g_v, g_c or None), B x K."""
    v = response.detach().to(DTYPE)
    c = cost.detach().to(DTYPE)
    n_directions, sigma, chunk = estimator.directions, estimator.sigma, estimator.chunk
    lam = q_lambda_max(v, c) if search.lambda_max is None else float(search.lambda_max)
    max_iter, tol = search.max_iter, search.tol
    if chunk is None:
        chunk = max(2, MAX_BATCH_ELEMENTS // max(v.numel(), 1))
    base = (torch.stack([v, c]) if wrt_costs else v[None]).to(torch.float32)
    fixed_costs = c[None].to(torch.float32)

    def evaluate(half: torch.Tensor) -> torch.Tensor:
        p = half.shape[0]
        perturbed = torch.empty((2 * p,) + tuple(base.shape), dtype=torch.float32)
        torch.add(base, half, alpha=sigma, out=perturbed[:p])
        torch.sub(base, half, alpha=sigma, out=perturbed[p:])
        pc = perturbed[:, 1] if wrt_costs else fixed_costs  # (1, B, K) broadcasts against the perturbed v
        return q_bisection(perturbed[:, 0], pc, batch, budget, lambda_max=lam, max_iter=max_iter, tol=tol)

    g = nes_estimate(evaluate, tuple(base.shape), n_directions, sigma, generator, chunk, pairs=True)
    return g[0], (g[1] if wrt_costs else None)


def remove_level_shifts(grad: torch.Tensor | None) -> torch.Tensor | None:
    """An estimated dQ/dv (or dQ/dc), B x K, minus each user's mean over the levels.

    Q(v + s 1^T, c) = Q(v, c) = Q(v, c + s 1^T) for any per-user shift s (B,): the decision rule
    argmax_j v_ij - alpha c_ij picks the same level at every alpha, so bisection and EOM do not
    change. The exact gradient (and NES's, that of the Gaussian-smoothed Q) therefore has zero row
    sums, and an estimate's component along per-user shifts is pure estimator noise; removing it
    keeps the estimate's expectation and stops a fine-tuned network from drifting in the levels'
    common offset (which moves the predicted spend and can make a budget infeasible) on noise."""
    if grad is None:
        return None
    return grad - grad.mean(dim=-1, keepdim=True)


def remove_invariant_directions(grad: torch.Tensor | None, point: torch.Tensor) -> torch.Tensor | None:
    """`remove_level_shifts(grad)` and then its component along the centered `point` (B x K, the
    predicted values or costs the gradient belongs to) removed as well.

    Besides per-user shifts, Q ignores the global scale of the values and of the costs:
    Q(a v, c) = Q(v, c) = Q(v, a c) for a > 0 (the decision rule argmax_j v_ij - alpha c_ij picks the
    same levels at alpha / a, resp. a alpha, and the bisection searches the multiplier). The exact
    gradient is therefore orthogonal to the centered v (resp. c), and an estimate's component along
    it is estimator noise; left in, it lets a fine-tuned network drift in the scale of its predicted
    cost uplifts, which moves the spend of the allocation made at a budget with those costs."""
    if grad is None:
        return None
    g = remove_level_shifts(grad)
    x = remove_level_shifts(point.detach().to(g.dtype))
    norm = float((x * x).sum())
    return g if norm <= 0 else g - (float((g * x).sum()) / norm) * x


def surrogate_loss(response: torch.Tensor, cost: torch.Tensor | None, grad_response: torch.Tensor,
                   grad_cost: torch.Tensor | None) -> torch.Tensor:
    """The regularizer part of Eq. 11 (without gamma): -Tr[v^T sg(g_v)] - Tr[c^T sg(g_c)]. Its
    gradient with respect to v (c) is -g_v (-g_c): minimizing it ascends the estimated Q."""
    out = -(response * grad_response.detach().to(response.dtype)).sum()
    if cost is not None and grad_cost is not None:
        out = out - (cost * grad_cost.detach().to(cost.dtype)).sum()
    return out

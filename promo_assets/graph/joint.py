"""Joint allocation of customer coupons and merchant commissions under a ratio budget (Eq. 11–20).

Customers i get one coupon level, merchants one commission level (Eq. 12–15); the objective is the
total response — expected redemptions of customers plus expected sharing counts of merchants
(Eq. 11; we use the merchants' de-normalized counts so that both sides count redeemed incentives);
the budget (Eq. 16) bounds the average incentive paid per response:

    sum c^c x^c + sum c^m x^m  <=  B * (sum f^c x^c + sum f^m x^m),   c = amount x f.

This is one MCKP with the shifted costs c - B f, solved by `promo_assets.allocation.solve_ratio`.
The per-request decision rule for a given multiplier lambda* (Eq. 19–20) is
argmax_j f_ij - lambda* (c_ij - B f_ij) = argmin_j f_ij (lambda* r_j - lambda* B - 1) when
c_ij = r_j f_ij. (Eq. 20 as printed drops the f^m factor on lambda (r_j - B), as does Eq. 17; we keep
it on both sides so that the merchant terms obey Eq. 16.)

"Independent" allocation solves the two sides separately, each under the same ratio B; its choices
are feasible for the joint problem, so the joint optimum is at least as good on the same curves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


class JointAllocationError(ValueError):
    """Inputs of the joint allocation that do not line up."""


@dataclass
class JointAllocation:
    """Levels per customer and per merchant with the (predicted) totals of the allocation."""

    kind: str  # "joint" | "independent"
    ratio: float
    customer_levels: np.ndarray
    merchant_levels: np.ndarray
    lambda_: float | tuple[float, float]
    value: float
    cost: float
    customer_value: float
    merchant_value: float
    info: dict[str, Any] = field(default_factory=dict)


def _check(name: str, values: np.ndarray, costs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v, c = np.asarray(values, dtype=np.float64), np.asarray(costs, dtype=np.float64)
    if v.ndim != 2 or v.shape != c.shape:
        raise JointAllocationError(f"{name} values {v.shape} and costs {c.shape} must be matching N x K arrays")
    if not (np.isfinite(v).all() and np.isfinite(c).all()):
        raise JointAllocationError(f"{name} values and costs must be finite")
    return v, c


def _pad(a: np.ndarray, k: int) -> np.ndarray:
    """Pad to k columns by repeating level 0 (a copy of a level is never strictly better)."""
    if a.shape[1] == k:
        return a
    return np.concatenate([a, np.repeat(a[:, :1], k - a.shape[1], axis=1)], axis=1)


def decide(values: np.ndarray, costs: np.ndarray, lambda_: float, ratio: float) -> np.ndarray:
    """Eq. 19–20: per-row level argmax_j v_ij - lambda_ * (c_ij - ratio * v_ij) (first on ties)."""
    v, c = _check("decision", values, costs)
    return np.argmax(v - lambda_ * (c - ratio * v), axis=1)


def joint_allocation(
    customer_values: np.ndarray,
    customer_costs: np.ndarray,
    merchant_values: np.ndarray,
    merchant_costs: np.ndarray,
    ratio: float,
    *,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> JointAllocation:
    """Solve Eq. 11–16 for both sides at once (one ratio constraint); returns a JointAllocation."""
    from promo_assets import allocation

    vc, cc = _check("customer", customer_values, customer_costs)
    vm, cm = _check("merchant", merchant_values, merchant_costs)
    k = max(vc.shape[1], vm.shape[1])
    values = np.concatenate([_pad(vc, k), _pad(vm, k)])
    costs = np.concatenate([_pad(cc, k), _pad(cm, k)])
    a = allocation.solve_ratio(values, costs, ratio, seed=seed, log=log)
    levels = np.asarray(a.levels)
    lc, lm = levels[: len(vc)].copy(), levels[len(vc):].copy()
    lc[lc >= vc.shape[1]] = 0
    lm[lm >= vm.shape[1]] = 0
    return _result("joint", ratio, lc, lm, float(a.lambda_), vc, cc, vm, cm, {"allocation": a.summary()})


def independent_allocation(
    customer_values: np.ndarray,
    customer_costs: np.ndarray,
    merchant_values: np.ndarray,
    merchant_costs: np.ndarray,
    ratio: float,
    *,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> JointAllocation:
    """Each side on its own under the same ratio B; lambda_ is (customer λ*, merchant λ*)."""
    from promo_assets import allocation

    vc, cc = _check("customer", customer_values, customer_costs)
    vm, cm = _check("merchant", merchant_values, merchant_costs)
    ac = allocation.solve_ratio(vc, cc, ratio, seed=seed, log=log)
    am = allocation.solve_ratio(vm, cm, ratio, seed=seed, log=log)
    return _result(
        "independent", ratio, np.asarray(ac.levels), np.asarray(am.levels), (float(ac.lambda_), float(am.lambda_)),
        vc, cc, vm, cm, {"customer_allocation": ac.summary(), "merchant_allocation": am.summary()},
    )


def _result(kind, ratio, lc, lm, lam, vc, cc, vm, cm, info) -> JointAllocation:
    rc, rm = np.arange(len(lc)), np.arange(len(lm))
    cv, mv = float(vc[rc, lc].sum()), float(vm[rm, lm].sum())
    cost = float(cc[rc, lc].sum() + cm[rm, lm].sum())
    return JointAllocation(kind, float(ratio), lc, lm, lam, cv + mv, cost, cv, mv, info)


def allocation_truth(
    alloc: JointAllocation,
    customer_truth: tuple[np.ndarray, np.ndarray],
    merchant_truth: tuple[np.ndarray, np.ndarray],
) -> dict[str, float]:
    """True totals of an allocation: value (expected redemptions + expected shares), cost, and the
    achieved ratio cost / value, from (expected_response, expected_cost) N x K arrays per side."""
    (tvc, tcc), (tvm, tcm) = customer_truth, merchant_truth
    if tvc.shape[0] != len(alloc.customer_levels) or tvm.shape[0] != len(alloc.merchant_levels):
        raise JointAllocationError("truth arrays and allocation cover different numbers of customers/merchants")
    rc, rm = np.arange(tvc.shape[0]), np.arange(tvm.shape[0])
    cv, mv = float(tvc[rc, alloc.customer_levels].sum()), float(tvm[rm, alloc.merchant_levels].sum())
    cost = float(tcc[rc, alloc.customer_levels].sum() + tcm[rm, alloc.merchant_levels].sum())
    return {
        "true_value": cv + mv,
        "true_customer_value": cv,
        "true_merchant_value": mv,
        "true_cost": cost,
        "true_ratio": cost / (cv + mv) if cv + mv > 0 else float("nan"),
    }


def compare_joint_independent(
    customer_values: np.ndarray,
    customer_costs: np.ndarray,
    merchant_values: np.ndarray,
    merchant_costs: np.ndarray,
    ratio: float,
    customer_truth: tuple[np.ndarray, np.ndarray],
    merchant_truth: tuple[np.ndarray, np.ndarray],
    *,
    seed: int = 0,
) -> dict[str, Any]:
    """Joint vs independent allocation under the same ratio budget B, scored on the truth.

    Allocates from the predicted coefficients, then reports each policy's true value, cost and
    achieved ratio, plus the same two policies computed on the true curves (the oracle bounds).
    """
    out: dict[str, Any] = {"ratio": float(ratio)}
    for source, (vc, cc, vm, cm) in (
        ("predicted", (customer_values, customer_costs, merchant_values, merchant_costs)),
        ("oracle", (*customer_truth, *merchant_truth)),
    ):
        for fn in (joint_allocation, independent_allocation):
            a = fn(vc, cc, vm, cm, ratio, seed=seed)
            row = allocation_truth(a, customer_truth, merchant_truth)
            row.update({"predicted_value": a.value, "predicted_cost": a.cost})
            out[f"{source}_{a.kind}"] = row
    return out
